// Tests of the trainer's step runners and device choice: one device reports its times and peak
// memory, --accumulate gives the gradients of the whole batch on one device and on CPU replicas
// (also for a short last batch), the update's time goes to the devices that ran it, --split and
// --sync-batchnorm reach DataParallel, bad combinations are errors naming the flag, and --devices
// auto measures both CPU layouts, in the run's precision, and leaves the default generator as it
// was.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "errors.h"
#include "tandem/tandem.h"
#include "tandem/train/auto_devices.h"
#include "tandem/train/config.h"
#include "tandem/train/distributed.h"
#include "tandem/train/models.h"
#include "tandem/train/trainer.h"

namespace tandem::train {
namespace {

const InputSpec kInput{{1, 8, 8}, 10};  // seed CNN on 1x8x8 images, 10 classes

std::shared_ptr<nn::Module> seed_model() {
  const GeneratorState saved = default_generator().state();
  manual_seed(7);
  auto m = make_model(ModelKind::SeedCnn, kInput);
  default_generator().set_state(saved);
  return m;
}

data::Batch batch_of(std::int64_t rows, std::uint64_t seed) {
  Generator g(seed);
  return {randn({rows, 1, 8, 8}, {}, &g), randint(0, 10, {rows}, {.dtype = DType::Int64}, &g)};
}

struct Gradients {
  double loss = 0;
  std::vector<Tensor> grads;
};

// One forward_backward of a fresh seed model through the runner for `layout` and `options`.
Gradients run(const std::string& devices, const RunnerOptions& options, const data::Batch& b) {
  const std::shared_ptr<nn::Module> model = seed_model();
  auto runner = make_step_runner(model, parse_devices(devices), nn::CrossEntropyLoss(),
                                 [] { return make_model(ModelKind::SeedCnn, kInput); }, options);
  Gradients out;
  out.loss = runner->forward_backward(b).loss;
  for (const Tensor& p : model->parameters()) out.grads.push_back(contiguous_copy(p.grad()));
  return out;
}

void expect_same(const Gradients& a, const Gradients& b, const std::string& what) {
  EXPECT_NEAR(a.loss, b.loss, 1e-5 * std::abs(a.loss)) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size()) << what;
  for (std::size_t i = 0; i < a.grads.size(); ++i) {
    const Tensor x = a.grads[i].to(DType::Float64), y = b.grads[i].to(DType::Float64);
    const double* px = x.data<double>();
    const double* py = y.data<double>();
    double worst = 0;
    for (std::int64_t j = 0; j < x.numel(); ++j) {
      worst = std::max(worst, std::abs(px[j] - py[j]) - 1e-5 * std::abs(py[j]));
    }
    EXPECT_LE(worst, 5e-6) << what << ", parameter " << i;
  }
}

TEST(Runner, AccumulationGivesTheWholeBatchsGradients) {
  const data::Batch b = batch_of(10, 1);
  const Gradients whole = run("cpu", {}, b);
  expect_same(run("cpu", {.accumulate = 3}, b), whole, "cpu, accumulate 3 (rows 4+3+3)");
  expect_same(run("cpu:2", {}, b), whole, "cpu:2");
  expect_same(run("cpu:2", {.accumulate = 3}, b), whole, "cpu:2, accumulate 3");
  expect_same(run("cpu:3", {.accumulate = 2, .split = parse_split("3:1:1")}, b), whole,
              "cpu:3, 3:1:1, accumulate 2");
  // A batch with fewer rows than --accumulate (an epoch's last) ends the cycle early.
  const data::Batch small = batch_of(2, 2);
  expect_same(run("cpu:2", {.accumulate = 4}, small), run("cpu", {}, small),
              "cpu:2, 2 rows, accumulate 4");
  expect_same(run("cpu", {.accumulate = 4}, small), run("cpu", {}, small),
              "cpu, 2 rows, accumulate 4");
}

TEST(Runner, OneDeviceReportsItsTimesAndPeakMemory) {
  const std::shared_ptr<nn::Module> model = seed_model();
  auto runner = make_step_runner(model, parse_devices("cpu"), nn::CrossEntropyLoss());
  const StepResult r = runner->forward_backward(batch_of(16, 4));
  ASSERT_EQ(r.devices.size(), 1u);
  const DeviceFigures& d = r.devices[0];
  EXPECT_EQ(d.device, "cpu");
  EXPECT_EQ(d.samples, 16);
  EXPECT_GT(d.forward_s, 0);
  EXPECT_GT(d.backward_s, 0);
  EXPECT_DOUBLE_EQ(d.seconds, d.forward_s + d.backward_s);
  // At least the activations of the first convolution (16 x 16 x 8 x 8 float32) were held.
  EXPECT_GE(d.peak_bytes, 16 * 16 * 8 * 8 * 4);
}

// The update's time goes to the devices that ran it: the one device, or every CPU replica (each
// updates a part of the parameters), with the replicas' wait for each other's part.
TEST(Runner, TheOptimizerUpdatesTimeGoesToTheDevicesThatRanIt) {
  for (const std::string devices : {"cpu", "cpu:2"}) {
    const std::shared_ptr<nn::Module> model = seed_model();
    auto runner = make_step_runner(model, parse_devices(devices), nn::CrossEntropyLoss(),
                                   [] { return make_model(ModelKind::SeedCnn, kInput); });
    optim::SGD sgd(model->parameters(), {.lr = 0.1, .momentum = 0.9});
    StepResult r = runner->forward_backward(batch_of(16, 5));
    std::vector<double> before;
    for (const DeviceFigures& d : r.devices) before.push_back(d.optimizer_s);
    runner->optimizer_step(sgd, r);
    ASSERT_EQ(r.devices.size(), devices == "cpu" ? 1u : 2u) << devices;
    for (std::size_t d = 0; d < r.devices.size(); ++d) {
      EXPECT_GT(r.devices[d].optimizer_s, before[d]) << devices << ", device " << d;
      EXPECT_GE(r.devices[d].wait_s, 0) << devices << ", device " << d;
    }
  }
}

TEST(Runner, SplitAndSyncBatchNormReachDataParallel) {
  const data::Batch b = batch_of(12, 3);
  expect_same(run("cpu:2", {.split = parse_split("auto")}, b), run("cpu", {}, b), "auto split");
  expect_same(run("cpu:2", {.sync_batchnorm = true}, b), run("cpu", {}, b),
              "sync batch norm (no batch norm in this model)");
  testing::expect_contains(
      testing::error_of([&] { run("cpu:2", {.split = parse_split("1:2:3")}, b); }),
      "--split: 1:2:3 gives 3 proportions for 2 devices");
  testing::expect_contains(
      testing::error_of([&] { run("cpu", {.split = parse_split("1:2")}, b); }),
      "--split: 1:2 gives proportions, but there is one device");
}

TEST(Config, ParallelSettingsParseAndValidate) {
  TrainConfig a, b;
  set_from_text(a, "split", "3:2:2:3");
  set_from_text(a, "sync_batchnorm", "true");
  set_from_text(a, "accumulate", "4");
  set_from_text(a, "threads", "1");
  apply_toml(b, "split = \"3:2:2:3\"\nsync_batchnorm = true\naccumulate = 4\nthreads = 1\n",
             "b.toml");
  EXPECT_EQ(to_json(a), to_json(b));
  EXPECT_EQ(a.split.kind, SplitKind::Weighted);
  EXPECT_EQ(a.split.proportions, (std::vector<double>{3, 2, 2, 3}));
  EXPECT_EQ(split_name(a.split), "3:2:2:3");
  EXPECT_EQ(parse_split("auto").kind, SplitKind::Auto);
  EXPECT_EQ(split_name(parse_split("even")), "even");
  EXPECT_NO_THROW(validate(a));
  for (const char* bad : {"3", "3:x", "1:-1", "0:0", "", "1::2", "nan:1"}) {
    testing::expect_contains(testing::error_of([&] { parse_split(bad); }), "--split");
  }
  TrainConfig c;
  set_from_text(c, "accumulate", "65");  // more micro-batches than the batch's 64 rows
  testing::expect_contains(testing::error_of([&] { validate(c); }), "--accumulate: 65");
  TrainConfig d;
  set_from_text(d, "micro_shard", "16");
  set_from_text(d, "sync_batchnorm", "true");
  testing::expect_contains(testing::error_of([&] { validate(d); }),
                           "--micro-shard and --sync-batchnorm");
}

TEST(Config, GpuReductionIsNcclOrHostAndHostUnderDeterministic) {
  TrainConfig c;
  EXPECT_EQ(runner_options(c).gpu_reduction, GpuReductionKind::Nccl);
  set_from_text(c, "gpu_reduction", "host");
  EXPECT_EQ(runner_options(c).gpu_reduction, GpuReductionKind::Host);
  EXPECT_NE(to_json(c).find("\"gpu_reduction\": \"host\""), std::string::npos);
  TrainConfig d;
  set_from_text(d, "deterministic", "true");  // the host's fixed-order float64 sums
  EXPECT_EQ(runner_options(d).gpu_reduction, GpuReductionKind::Host);
  testing::expect_contains(testing::error_of([&] { set_from_text(d, "gpu_reduction", "mpi"); }),
                           "--gpu-reduction: unknown reduction 'mpi' (expected nccl or host)");
  // CPU replicas are always summed on the host, whatever the setting.
  const RunnerOptions nccl{.gpu_reduction = GpuReductionKind::Nccl};
  const auto runner = make_step_runner(seed_model(), parse_devices("cpu:2"),
                                       nn::CrossEntropyLoss(), [] { return seed_model(); }, nccl);
  EXPECT_EQ(runner->reduction(), "host");
  const auto one = make_step_runner(seed_model(), parse_devices("cpu"), nn::CrossEntropyLoss(),
                                    [] { return seed_model(); }, nccl);
  EXPECT_EQ(one->reduction(), "");
}

TEST(Distributed, EachProcessTakesItsOwnGpuWhenTheDevicesAreEveryGpu) {
  const DeviceLayout all{{Device(DeviceType::CUDA, 0), Device(DeviceType::CUDA, 1)}};
  DeviceLayout layout = all;
  EXPECT_EQ(one_gpu_per_process(3, "cuda", layout, 2),
            "one GPU per process: cuda:1 for local rank 3 (2 GPUs visible)");
  EXPECT_EQ(layout.describe(), "cuda:1");
  layout = all;
  EXPECT_EQ(one_gpu_per_process(0, "auto", layout, 2), "one GPU per process: cuda:0 for local "
                                                       "rank 0 (2 GPUs visible)");
  EXPECT_EQ(layout.describe(), "cuda:0");
  // Named devices, CPU layouts and machines without a GPU stay as they are.
  for (const char* spec : {"cuda:0,cuda:1", "cpu:2", "auto"}) {
    DeviceLayout kept = std::string(spec) == "cpu:2" || std::string(spec) == "auto"
                            ? DeviceLayout{{Device(DeviceType::CPU, 0), Device(DeviceType::CPU, 1)}}
                            : all;
    const DeviceLayout before = kept;
    EXPECT_EQ(one_gpu_per_process(1, spec, kept, 2), "") << spec;
    EXPECT_EQ(kept, before) << spec;
  }
  layout = all;
  EXPECT_EQ(one_gpu_per_process(1, "cuda", layout, 0), "");
}

TEST(Distributed, GpuGradientsCrossThroughNcclOnlyWhenEveryRankHasAGpuOfItsOwn) {
  const std::vector<std::int64_t> distinct{11, 42, 7};
  EXPECT_EQ(nccl_refusal(distinct, GpuReductionKind::Nccl, false, true), "");
  const std::vector<std::int64_t> shared{11, 42, 11};
  EXPECT_EQ(nccl_refusal(shared, GpuReductionKind::Nccl, false, true),
            "ranks 0 and 2 train on the same GPU, and NCCL needs a GPU of its own for each rank");
  EXPECT_EQ(nccl_refusal(std::vector<std::int64_t>{11, -1}, GpuReductionKind::Nccl, false, true),
            "rank 1 does not train on one GPU");
  EXPECT_EQ(nccl_refusal(distinct, GpuReductionKind::Host, false, true), "--gpu-reduction host");
  EXPECT_EQ(nccl_refusal(distinct, GpuReductionKind::Nccl, true, true),
            "--deterministic (Gloo sums in a fixed order)");
  EXPECT_EQ(nccl_refusal(distinct, GpuReductionKind::Nccl, false, false),
            "this build has no NCCL");
}

// A job of one process has no group: nothing is exchanged, and the GPU path says nothing.
TEST(Distributed, ASingleProcessHasNoGpuGradientPath) {
  const GpuGradientPath path =
      gpu_gradient_path(Job{}, parse_devices("cpu"), GpuReductionKind::Nccl, false);
  EXPECT_EQ(path.nccl, nullptr);
  EXPECT_EQ(path.reason, "");
}

// The seed model behind a forward that counts the forwards run under bf16 autocast and in all.
struct PrecisionSpy : nn::Module {
  std::shared_ptr<nn::Module> inner;
  std::shared_ptr<std::atomic<int>> bf16, all;
  PrecisionSpy(std::shared_ptr<nn::Module> m, std::shared_ptr<std::atomic<int>> b,
               std::shared_ptr<std::atomic<int>> a)
      : inner(std::move(m)), bf16(std::move(b)), all(std::move(a)) {
    add_child("inner", inner);
  }
  Tensor forward(const Tensor& x) override {
    ++*all;
    if (autocast_precision() == Precision::BFloat16) ++*bf16;
    return (*inner)(x);
  }
};

TEST(AutoDevices, TheTrialsRunInTheRunsPrecision) {
  auto bf16 = std::make_shared<std::atomic<int>>(0);
  auto all = std::make_shared<std::atomic<int>>(0);
  const AutoDeviceChoice choice = choose_cpu_layout(
      {.make_model = [&] {
         return std::make_shared<PrecisionSpy>(make_model(ModelKind::SeedCnn, kInput), bf16, all);
       },
       .sample_shape = kInput.sample_shape,
       .classes = kInput.classes,
       .batch_size = 8,
       .cores = 2,
       .precision = Precision::BFloat16,
       .max_steps = 1,
       .max_seconds = 0.1});
  EXPECT_GT(all->load(), 0);
  EXPECT_EQ(bf16->load(), all->load()) << "some trial forwards ran in float32";
  testing::expect_contains(choice.reason, "batch 8 in bf16");
}

TEST(AutoDevices, MeasuresBothCpuLayoutsAndKeepsTheGenerator) {
  manual_seed(42);
  const GeneratorState before = default_generator().state();
  const AutoDeviceChoice choice =
      choose_cpu_layout({.make_model = [] { return make_model(ModelKind::SeedCnn, kInput); },
                         .sample_shape = kInput.sample_shape,
                         .classes = kInput.classes,
                         .batch_size = 16,
                         .cores = 2,
                         .max_steps = 2,
                         .max_seconds = 0.2});
  EXPECT_EQ(default_generator().state(), before);
  EXPECT_EQ(choice.one_device.layout.describe(), "cpu");
  EXPECT_EQ(choice.one_device.threads, 2);
  EXPECT_EQ(choice.replicas.layout.describe(), "cpu:0,cpu:1");
  EXPECT_EQ(choice.replicas.threads, 1);
  EXPECT_GT(choice.one_device.images_per_s, 0);
  EXPECT_GT(choice.replicas.images_per_s, 0);
  EXPECT_GE(choice.one_device.steps, 1);
  const bool replicas_faster = choice.replicas.images_per_s > choice.one_device.images_per_s;
  EXPECT_EQ(choice.layout, replicas_faster ? choice.replicas.layout : choice.one_device.layout);
  for (const char* part : {"cpu:2 (2 replicas x 1 thread)", "cpu (1 device x 2 threads)", "img/s",
                           "batch 16"}) {
    testing::expect_contains(choice.reason, part);
  }
}

}  // namespace
}  // namespace tandem::train
