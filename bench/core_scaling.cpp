// How this machine's cores scale when all are busy at once, the hardware ceiling beneath every
// multi-replica speed-up (cpu:N, tandem launch): three kinds of work, each on one pinned thread
// per core, first each core alone in turn, then every core together, and how much of its alone
// rate each core keeps. compute: multiply-adds on values held in registers (no memory traffic);
// sgemm: oneDNN's float32 matrix product through ops::matmul, as Linear uses it; stream: copying a
// buffer larger than the caches (memory bandwidth). A benchmark, not a test.
// Usage: core_scaling [--seconds 1] [--rounds 3] [--n 512]
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench_flags.h"
#include "tandem/ops/ops.h"
#include "tandem/parallel/replica_threads.h"
#include "tandem/tensor/factories.h"

namespace tn = tandem;

namespace {

using Clock = std::chrono::steady_clock;

// One kind of work: `run` repeats it for `seconds` on the calling thread and returns its rate.
struct Workload {
  const char* name;
  const char* unit;
  std::function<double(double seconds)> run;
};

double elapsed(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// GFLOP/s of multiply-adds on 64 independent accumulators (registers), 2 flops each.
double compute_rate(double seconds) {
  constexpr int kLanes = 64;
  constexpr long kInner = 1 << 16;
  float acc[kLanes];
  for (int i = 0; i < kLanes; ++i) acc[i] = static_cast<float>(i);
  const float scale = 0.999999F;
  const float shift = 1e-7F;
  long rounds = 0;
  const auto t0 = Clock::now();
  do {
    for (long k = 0; k < kInner; ++k) {
      for (float& a : acc) a = a * scale + shift;
    }
    ++rounds;
  } while (elapsed(t0) < seconds);
  const double s = elapsed(t0);
  float sum = 0;
  for (float a : acc) sum += a;
  static std::atomic<float> sink;
  sink.store(sum, std::memory_order_relaxed);
  return 2.0 * kLanes * kInner * static_cast<double>(rounds) / s / 1e9;
}

// GFLOP/s of (n, n) x (n, n) float32 products, one OpenMP thread.
double sgemm_rate(long n, double seconds) {
  omp_set_num_threads(1);
  tn::Generator g(1);
  const tn::Tensor a = tn::randn({n, n}, {}, &g);
  const tn::Tensor b = tn::randn({n, n}, {}, &g);
  tn::ops::matmul(a, b);  // primitive creation and first touch
  long products = 0;
  const auto t0 = Clock::now();
  do {
    const tn::Tensor c = tn::ops::matmul(a, b);
    ++products;
  } while (elapsed(t0) < seconds);
  return 2.0 * static_cast<double>(n) * n * n * static_cast<double>(products) / elapsed(t0) / 1e9;
}

// GB/s moved (read + written) copying 64 MiB buffers, twice the 32 MiB L3 of this VM.
double stream_rate(double seconds) {
  const std::size_t bytes = std::size_t{64} << 20;
  std::vector<char> from(bytes, 1);
  std::vector<char> to(bytes, 0);
  long copies = 0;
  const auto t0 = Clock::now();
  do {
    std::memcpy(to.data(), from.data(), bytes);
    from[static_cast<std::size_t>(copies) % bytes] = static_cast<char>(copies);
    ++copies;
  } while (elapsed(t0) < seconds);
  return 2.0 * static_cast<double>(bytes) * static_cast<double>(copies) / elapsed(t0) / 1e9;
}

// Each core's rate for `work`, the cores in `cpus` running it at once (one pinned thread each).
std::vector<double> rates_together(const Workload& work, const std::vector<int>& cpus,
                                   double seconds) {
  std::vector<double> rates(cpus.size());
  std::barrier start(static_cast<std::ptrdiff_t>(cpus.size()));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    threads.emplace_back([&, i] {
      tn::parallel::set_up_this_thread({.threads = 1, .cpus = {cpus[i]}});
      work.run(0.05);  // warm-up: buffers, primitives, clocks
      start.arrive_and_wait();
      rates[i] = work.run(seconds);
    });
  }
  for (std::thread& t : threads) t.join();
  return rates;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  int rounds = 3;
  long n = 512;
  CLI::App app{"how the cores scale when all are busy at once", "core_scaling"};
  app.add_option("--seconds", seconds, "time per measurement")->check(CLI::Range(1e-3, 3600.0));
  app.add_option("--rounds", rounds)->check(at_least(1));
  app.add_option("--n", n, "sgemm size (n x n)")->check(at_least(1));
  CLI11_PARSE(app, argc, argv);
  const std::vector<int> cpus = tn::parallel::available_cpus();
  const std::vector<Workload> workloads = {
      {"compute", "GFLOP/s", compute_rate},
      {"sgemm", "GFLOP/s", [n](double s) { return sgemm_rate(n, s); }},
      {"stream", "GB/s", stream_rate},
  };
  for (const Workload& work : workloads) {
    // alone[c], together[c]: core c's rates over the rounds, alternating alone and together.
    std::vector<std::vector<double>> alone(cpus.size());
    std::vector<std::vector<double>> together(cpus.size());
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t c = 0; c < cpus.size(); ++c) {
        alone[c].push_back(rates_together(work, {cpus[c]}, seconds)[0]);
      }
      const std::vector<double> all = rates_together(work, cpus, seconds);
      for (std::size_t c = 0; c < cpus.size(); ++c) together[c].push_back(all[c]);
    }
    double sum_alone = 0;
    double sum_together = 0;
    for (std::size_t c = 0; c < cpus.size(); ++c) {
      const double a = median(alone[c]);
      const double t = median(together[c]);
      sum_alone += a;
      sum_together += t;
      std::printf("{\"bench\": \"core_scaling\", \"work\": \"%s\", \"cpu\": %d, \"unit\": \"%s\", "
                  "\"alone\": %.1f, \"together\": %.1f, \"kept\": %.3f}\n",
                  work.name, cpus[c], work.unit, a, t, t / a);
    }
    std::printf("%s: %zu cores together give %.2fx one core alone (%.1f vs %.1f %s, medians)\n",
                work.name, cpus.size(), sum_together / (sum_alone / static_cast<double>(cpus.size())),
                sum_together, sum_alone / static_cast<double>(cpus.size()), work.unit);
  }
  return 0;
}
