// Everything in tandem::nn with one include: the Module base, every module, initialisation and the
// functional API.
#pragma once

#include "tandem/nn/functional.h"
#include "tandem/nn/init.h"
#include "tandem/nn/module.h"
#include "tandem/nn/modules/activation.h"
#include "tandem/nn/modules/batchnorm.h"
#include "tandem/nn/modules/conv.h"
#include "tandem/nn/modules/dropout.h"
#include "tandem/nn/modules/flatten.h"
#include "tandem/nn/modules/linear.h"
#include "tandem/nn/modules/loss.h"
#include "tandem/nn/modules/pooling.h"
#include "tandem/nn/modules/sequential.h"
#include "tandem/nn/modules/size2.h"
