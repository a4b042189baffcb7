// DataParallel throughput on CPU replicas: the seed CNN (1x28x28 -> conv 16 -> conv 32 -> linear
// 10) on random data at global batch 64 and 256, one device with one thread against cpu:2 (two
// replicas, one thread each) and the other placements; images/s and scaling efficiency, plus the
// optimizer-placement measurement quoted in data_parallel.h, and the ceiling: two trainings of
// half the batch that share nothing, run at once. A benchmark, not a test.
// Usage: data_parallel_bench [--steps 20] [--rounds 5] [--batches 64,256]
#include <omp.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_flags.h"
#include "tandem/tandem.h"

namespace tn = tandem;

namespace {

using Clock = std::chrono::steady_clock;

struct SeedCnn : tn::nn::Module {  // the seed document's Net, for 1x28x28 input
  tn::nn::Conv2d conv1 = register_module("conv1", tn::nn::Conv2d(1, 16, 3, 1, 1));
  tn::nn::Conv2d conv2 = register_module("conv2", tn::nn::Conv2d(16, 32, 3, 1, 1));
  tn::nn::Linear fc = register_module("fc", tn::nn::Linear(32 * 28 * 28, 10));
  tn::Tensor forward(const tn::Tensor& x) override {
    tn::Tensor y = conv2(conv1(x));
    return fc(y.view({y.size(0), -1}));
  }
};

tn::Tensor loss_fn(const tn::Tensor& out, const tn::Tensor& y) {
  return tn::nn::CrossEntropyLoss()(out, y);
}

struct Config {
  std::string name;
  int replicas = 0;     // 0: plain training on one (fresh) thread, no DataParallel
  int independent = 0;  // > 0: that many unrelated trainings on their own threads, each on
                        // 1/independent of the batch, sharing nothing: what the hardware allows
  int threads = 1;
  tn::nn::Pinning pinning = tn::nn::Pinning::None;
  tn::nn::ParameterSync sync = tn::nn::ParameterSync::Shared;
  tn::nn::SplitPolicy split = tn::nn::SplitPolicy::Even;
  long micro_shard = 0;
};

struct Batches {
  std::vector<tn::Tensor> x, y;
};

Batches make_batches(long batch, int count) {
  tn::Generator g(1);
  Batches b;
  for (int i = 0; i < count; ++i) {
    b.x.push_back(tn::randn({batch, 1, 28, 28}, {}, &g));
    b.y.push_back(tn::randint(0, 10, {batch}, {.dtype = tn::DType::Int64}, &g));
  }
  return b;
}

// Images per second over `steps` timed steps after 3 warm-up steps; the per-device accounting of
// the timed steps is printed for DataParallel configurations.
double measure(const Config& c, const Batches& data, int steps, bool print_stats) {
  tn::manual_seed(0);
  auto model = std::make_shared<SeedCnn>();
  tn::optim::SGD opt(model->parameters(), {.lr = 0.001, .momentum = 0.9});
  const long batch = data.x[0].size(0);
  const int warmup = 3;
  double seconds = 0.0;
  if (c.independent > 0) {
    const long part = batch / c.independent;
    std::vector<std::thread> workers;
    std::barrier warm(c.independent);  // the timing starts when every worker is warm
    Clock::time_point t0;
    for (int w = 0; w < c.independent; ++w) {
      workers.emplace_back([&, w] {
        omp_set_num_threads(c.threads);
        auto own = std::make_shared<SeedCnn>();
        tn::optim::SGD own_opt(own->parameters(), {.lr = 0.001, .momentum = 0.9});
        for (int i = 0; i < warmup + steps; ++i) {
          if (i == warmup) {
            warm.arrive_and_wait();
            if (w == 0) t0 = Clock::now();
          }
          const tn::Tensor x = data.x[i % data.x.size()].narrow(0, w * part, part);
          const tn::Tensor y = data.y[i % data.y.size()].narrow(0, w * part, part);
          own_opt.zero_grad();
          loss_fn(own->forward(x), y).backward();
          own_opt.step();
        }
      });
    }
    for (auto& t : workers) t.join();
    seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  } else if (c.replicas == 0) {
    // A fresh thread: oneDNN primitives are cached per thread and keep the thread count they
    // were created with, so reusing this thread's cache across configurations would be wrong.
    std::thread worker([&] {
      omp_set_num_threads(c.threads);
      for (int i = 0; i < warmup + steps; ++i) {
        const auto t0 = Clock::now();
        opt.zero_grad();
        tn::Tensor loss =
            loss_fn(model->forward(data.x[i % data.x.size()]), data.y[i % data.y.size()]);
        loss.backward();
        opt.step();
        if (i >= warmup) seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      }
    });
    worker.join();
  } else {
    tn::nn::DataParallel dp(model, tn::nn::cpu_replicas(c.replicas),
                            {.split = c.split,
                             .auto_split = {.warmup_steps = 2, .measure_steps = 4},
                             .threads_per_replica = c.threads,
                             .pinning = c.pinning,
                             .parameter_sync = c.sync,
                             .micro_shard = c.micro_shard});
    tn::nn::DataParallelStats before;
    for (int i = 0; i < warmup + steps; ++i) {
      if (i == warmup) before = dp.stats();
      const auto t0 = Clock::now();
      opt.zero_grad();
      dp.forward_backward(data.x[i % data.x.size()], data.y[i % data.y.size()], loss_fn);
      dp.step(opt);
      if (i >= warmup) seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (print_stats) {
      tn::nn::DataParallelStats timed = dp.stats();
      for (std::size_t r = 0; r < timed.devices.size(); ++r) {
        tn::nn::DeviceStats& d = timed.devices[r];
        const tn::nn::DeviceStats& b = before.devices[r];
        d.samples -= b.samples;
        d.forward_s -= b.forward_s;
        d.backward_s -= b.backward_s;
        d.reduction_s -= b.reduction_s;
        d.optimizer_s -= b.optimizer_s;
        d.wait_s -= b.wait_s;
      }
      std::printf("%s", tn::nn::format_table(timed).c_str());
    }
  }
  return static_cast<double>(batch) * steps / seconds;
}

// Seconds per call of f, the best of `repeats` runs of `n` calls.
template <typename F>
double best_time(int repeats, int n, F&& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / n);
  }
  return best;
}

// The optimizer placement question: one SGD-momentum update of the model against copying its
// parameters into one more replica (what update-then-broadcast adds per replica).
void optimizer_placement() {
  omp_set_num_threads(1);
  auto model = std::make_shared<SeedCnn>();
  auto copy = std::make_shared<SeedCnn>();
  for (const tn::Tensor& p : model->parameters()) p.set_grad(tn::ones(p.shape()));
  tn::optim::SGD opt(model->parameters(), {.lr = 0.001, .momentum = 0.9});
  opt.step();
  const double update = best_time(5, 50, [&] { opt.step(); });
  const auto src = model->parameters();
  const auto dst = copy->parameters();
  const double broadcast = best_time(5, 50, [&] {
    for (std::size_t i = 0; i < src.size(); ++i) tn::copy_into(dst[i], src[i]);
  });
  std::printf(
      "{\"bench\": \"optimizer_placement\", \"parameters\": %lld, \"sgd_update_ms\": %.4f, "
      "\"copy_to_one_replica_ms\": %.4f}\n",
      static_cast<long long>(model->parameter_count()), update * 1e3, broadcast * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 20, rounds = 5;
  std::vector<long> batches{64, 256};
  CLI::App app{"DataParallel on CPU replicas against one device", "data_parallel_bench"};
  app.add_option("--steps", steps)->check(at_least(1));
  app.add_option("--rounds", rounds)->check(at_least(1));
  app.add_option("--batches", batches, "global batch sizes, comma-separated")
      ->delimiter(',')
      ->check(at_least(1));
  CLI11_PARSE(app, argc, argv);
  optimizer_placement();
  const std::vector<Config> configs{
      {.name = "1 device, 1 thread", .replicas = 0, .threads = 1},
      {.name = "1 device, 2 threads", .replicas = 0, .threads = 2},
      {.name = "cpu:1 (DataParallel), 1 thread", .replicas = 1, .threads = 1},
      {.name = "cpu:2, 1 thread each", .replicas = 2, .threads = 1},
      {.name = "cpu:2, pinned", .replicas = 2, .threads = 1, .pinning = tn::nn::Pinning::Cores},
      {.name = "cpu:2, broadcast",
       .replicas = 2,
       .threads = 1,
       .sync = tn::nn::ParameterSync::Broadcast},
      {.name = "cpu:2, auto split",
       .replicas = 2,
       .threads = 1,
       .split = tn::nn::SplitPolicy::Auto},
      {.name = "cpu:2, micro-shards of 16", .replicas = 2, .threads = 1, .micro_shard = 16},
      {.name = "ceiling: 2 independent half-batch trainings", .independent = 2, .threads = 1},
  };
  for (long batch : batches) {
    const Batches data = make_batches(batch, 4);
    // Rounds interleave the configurations so that a burst of load elsewhere hits all of them;
    // each figure is the median over rounds.
    std::vector<std::vector<double>> ips(configs.size());
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t c = 0; c < configs.size(); ++c) {
        const bool print = round == rounds - 1 && configs[c].name == "cpu:2, 1 thread each";
        if (print)
          std::printf("per-device accounting, batch %ld, %s:\n", batch, configs[c].name.c_str());
        ips[c].push_back(measure(configs[c], data, steps, print));
      }
    }
    double base = 0.0;
    for (std::size_t c = 0; c < configs.size(); ++c) {
      std::sort(ips[c].begin(), ips[c].end());
      const double median = ips[c][ips[c].size() / 2];
      if (c == 0) base = median;
      std::printf(
          "{\"bench\": \"data_parallel\", \"batch\": %ld, \"config\": \"%s\", "
          "\"images_per_s\": %.1f, \"speedup\": %.3f, \"min\": %.1f, \"max\": %.1f}\n",
          batch, configs[c].name.c_str(), median, median / base, ips[c].front(), ips[c].back());
    }
    const double two = [&] {
      for (std::size_t c = 0; c < configs.size(); ++c) {
        if (configs[c].name == "cpu:2, 1 thread each") return ips[c][ips[c].size() / 2];
      }
      return 0.0;
    }();
    std::printf("batch %ld: cpu:2 scaling efficiency %.1f%% (%.1f vs 2 x %.1f images/s)\n", batch,
                100.0 * two / (2.0 * base), two, base);
    std::fflush(stdout);
  }
  return 0;
}
