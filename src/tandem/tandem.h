// The whole public API in one include: tensors, autograd, nn, optim, io.
#pragma once

#include "tandem/autograd/functions.h"
#include "tandem/autograd/autocast.h"
#include "tandem/autograd/grad_mode.h"
#include "tandem/base/rng.h"
#include "tandem/device/device.h"
#include "tandem/tensor/factories.h"
#include "tandem/tensor/tensor.h"
#include "tandem/nn/module.h"
#include "tandem/nn/nn.h"
#include "tandem/optim/optim.h"
#include "tandem/io/safetensors.h"
#include "tandem/data/data.h"
#include "tandem/parallel/data_parallel.h"
