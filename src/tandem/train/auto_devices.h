// --devices auto on a machine without GPUs: one CPU device using every core, or one replica per
// core? It depends on the model and the batch (small convolutions scale poorly across threads,
// large ones well), so the choice is measured: a few training steps of each on synthetic batches
// of the run's shape. Not the --devices parser (devices.h) and not a benchmark.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tandem/autograd/autocast.h"
#include "tandem/nn/module.h"
#include "tandem/nn/modules/loss.h"
#include "tandem/base/shape.h"
#include "tandem/train/devices.h"

namespace tandem::train {

struct AutoDeviceTrial {
  DeviceLayout layout;
  int threads = 0;  // per device
  double images_per_s = 0;
  std::int64_t steps = 0;  // timed steps behind the figure
};

struct AutoDeviceChoice {
  DeviceLayout layout;          // the faster trial's
  int threads = 0;              // per device, for the runner
  AutoDeviceTrial one_device;   // cpu with `cores` threads
  AutoDeviceTrial replicas;     // cpu:cores, one thread each
  std::string reason;           // "cpu:2 (2 replicas x 1 thread: 7020 img/s; cpu x 2 threads: ..."
};

struct AutoDeviceRequest {
  std::function<std::shared_ptr<nn::Module>()> make_model;  // a fresh model per trial
  Shape sample_shape;                                       // one sample, e.g. (1, 28, 28)
  std::int64_t classes = 0;
  std::int64_t batch_size = 0;
  int cores = 0;  // > 1
  nn::CrossEntropyLoss criterion;
  Precision precision = Precision::Float32;  // the run's: bf16 trials run under autocast
  int warmup_steps = 3;           // primitive creation, first touch of memory, thread start-up
  int max_steps = 100;            // timed steps per trial at most ...
  double max_seconds = 0.4;       // ... or until this much time has gone (at least one step)
};

// Runs both trials on fresh threads (the caller's thread count and oneDNN primitives are left
// alone) and leaves the default generator as it was.
AutoDeviceChoice choose_cpu_layout(const AutoDeviceRequest& request);

}  // namespace tandem::train
