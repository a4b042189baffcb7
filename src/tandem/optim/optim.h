// Everything in tandem::optim with one include: the optimizer base, SGD, Adam/AdamW and the
// learning-rate schedules.
#pragma once

#include "tandem/optim/adam.h"
#include "tandem/optim/lr_scheduler.h"
#include "tandem/optim/optimizer.h"
#include "tandem/optim/sgd.h"
