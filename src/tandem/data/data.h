// The data layer in one include: datasets and formats, transforms, samplers, the DataLoader.
#pragma once

#include "tandem/data/data_loader.h"
#include "tandem/data/data_spec.h"
#include "tandem/data/dataset.h"
#include "tandem/data/formats/bytes.h"
#include "tandem/data/formats/cifar.h"
#include "tandem/data/formats/csv.h"
#include "tandem/data/formats/idx.h"
#include "tandem/data/pinned_memory.h"
#include "tandem/data/sampler.h"
#include "tandem/data/synthetic.h"
#include "tandem/data/transforms.h"
