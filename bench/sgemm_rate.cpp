// The machine's single-precision matrix-multiply rate, the yardstick bench/compare divides each
// run's achieved FLOP rate by: oneDNN's sgemm (through ops::matmul, as tandem's Linear uses it) on
// square float32 matrices, with 1 thread and with every core, best of several repeats. A
// benchmark, not a test. Usage: sgemm_rate [--n 1024] [--repeats 10]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "flag_pairs.h"
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
  for (const auto& [flag, value] : flag_pairs("sgemm_rate", argc, argv)) {
    if (flag == "--n") {
      n = std::atol(value.c_str());
    } else if (flag == "--repeats") {
      repeats = std::atoi(value.c_str());
    } else {
      std::fprintf(stderr, "sgemm_rate: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const int cores = static_cast<int>(tn::parallel::available_cpus().size());
  for (int threads : {1, cores}) {
    std::printf("{\"bench\": \"sgemm\", \"n\": %ld, \"threads\": %d, \"gflops\": %.1f}\n", n,
                threads, rate(n, threads, repeats));
    if (cores == 1) break;
  }
  return 0;
}
