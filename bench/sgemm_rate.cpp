// The machine's single-precision matrix-multiply rate, the yardstick bench/compare divides each
// run's achieved FLOP rate by: oneDNN's sgemm (through ops::matmul, as tandem's Linear uses it) on
// square float32 matrices, with 1 thread and with every core, best of several repeats. A
// benchmark, not a test. Usage: sgemm_rate [--n 1024] [--repeats 10]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "bench_flags.h"
#include "tandem/ops/ops.h"
#include "tandem/parallel/replica_threads.h"
#include "tandem/tensor/factories.h"

namespace tn = tandem;

namespace {

// GFLOP/s of (n, n) x (n, n) on a fresh thread with `threads` OpenMP threads: the best repeat.
double rate(long n, int threads, int repeats) {
  double best = 0;
  std::thread worker([&] {
    omp_set_num_threads(threads);
    tn::Generator g(1);
    const tn::Tensor a = tn::randn({n, n}, {}, &g);
    const tn::Tensor b = tn::randn({n, n}, {}, &g);
    tn::ops::matmul(a, b);  // primitive creation and first touch
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const tn::Tensor c = tn::ops::matmul(a, b);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 2.0 * static_cast<double>(n) * n * n / s / 1e9);
    }
  });
  worker.join();
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  long n = 1024;
  int repeats = 10;
  CLI::App app{"this machine's float32 matrix-product rate", "sgemm_rate"};
  app.add_option("--n", n, "matrix size (n x n)")->check(at_least(1));
  app.add_option("--repeats", repeats)->check(at_least(1));
  CLI11_PARSE(app, argc, argv);
  const int cores = static_cast<int>(tn::parallel::available_cpus().size());
  for (int threads : {1, cores}) {
    std::printf("{\"bench\": \"sgemm\", \"n\": %ld, \"threads\": %d, \"gflops\": %.1f}\n", n,
                threads, rate(n, threads, repeats));
    if (cores == 1) break;
  }
  return 0;
}
