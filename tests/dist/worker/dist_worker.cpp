// The process the dist tests start 2 or 3 of: joins the process group from the environment
// (RANK, WORLD_SIZE, MASTER_*; TANDEM_STORE, TANDEM_TEST_TIMEOUT_MS) and runs one scenario,
// checking its own results. Writes "<dir>/rank<r>.txt" (ok) or "<dir>/rank<r>.err" (the error).
// Usage: dist_worker collectives|die|stall|die-once|mismatch VICTIM DIR (die-once: only on the
// first attempt under tandem launch, TANDEM_RESTART_COUNT=0)
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "tandem/base/check.h"
#include "tandem/dist/consistency.h"
#include "tandem/dist/init.h"
#include "tandem/tensor/factories.h"

namespace dist = tandem::dist;
using tandem::DType;
using tandem::Tensor;

namespace {

int checks = 0;

void expect(bool cond, const std::string& what) {
  ++checks;
  TANDEM_CHECK(cond, "check failed: ", what);
}

int g_rank = 0, g_size = 1;

// Every collective, every dtype, sizes that do not divide evenly and one over Gloo's segment.
void collectives(dist::ProcessGroup& pg) {
  const double w = g_size, r = g_rank;
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{1003}, std::int64_t{600000}}) {
    Tensor f = tandem::empty({n}, {.dtype = DType::Float32});
    Tensor d = tandem::empty({n}, {.dtype = DType::Float64});
    Tensor l = tandem::empty({n}, {.dtype = DType::Int64});
    for (std::int64_t i = 0; i < n; ++i) {
      f.data<float>()[i] = static_cast<float>((r + 1) * static_cast<double>(i % 97 + 1));
      d.data<double>()[i] = (r + 1) * 0.25 * static_cast<double>(i % 89 + 1);
      l.data<std::int64_t>()[i] = (g_rank + 1) * (i + 1);
    }
    pg.all_reduce(f, dist::ReduceOp::Sum);
    pg.all_reduce(d, dist::ReduceOp::Mean);
    pg.all_reduce(l, dist::ReduceOp::Sum);
    const double ranks_sum = w * (w + 1) / 2;  // sum over ranks of (rank + 1)
    for (std::int64_t i = 0; i < n; ++i) {
      expect(f.data<float>()[i] == static_cast<float>(ranks_sum * static_cast<double>(i % 97 + 1)),
             "float32 sum at " + std::to_string(i));
      expect(d.data<double>()[i] == ranks_sum / w * 0.25 * static_cast<double>(i % 89 + 1),
             "float64 mean at " + std::to_string(i));
      expect(l.data<std::int64_t>()[i] == static_cast<std::int64_t>(ranks_sum) * (i + 1),
             "int64 sum at " + std::to_string(i));
    }
  }
  const int root = g_size - 1;
  Tensor b = tandem::empty({257}, {.dtype = DType::Float64});
  for (std::int64_t i = 0; i < 257; ++i) b.data<double>()[i] = r * 1000 + static_cast<double>(i);
  pg.broadcast(b, root);
  for (std::int64_t i = 0; i < 257; ++i) {
    expect(b.data<double>()[i] == root * 1000.0 + static_cast<double>(i), "broadcast");
  }
  Tensor in = tandem::empty({3}, {.dtype = DType::Float32});
  Tensor out = tandem::empty({g_size, 3}, {.dtype = DType::Float32});
  for (int i = 0; i < 3; ++i) in.data<float>()[i] = static_cast<float>(r * 10 + i);
  pg.all_gather(in, out);
  for (int k = 0; k < g_size; ++k) {
    for (int i = 0; i < 3; ++i) {
      expect(out.data<float>()[k * 3 + i] == static_cast<float>(k * 10 + i), "all_gather");
    }
  }
  pg.barrier();

  // Repeated all-reduces (gradient buckets): two buffers bound once, each summed three times with
  // new contents, a per-call collective in between; one buffer large, one smaller than the ranks'
  // halving-doubling blocks.
  Tensor big = tandem::empty({600000}, {.dtype = DType::Float32});
  Tensor small = tandem::empty({5}, {.dtype = DType::Float64});
  const auto big_sum = pg.repeated_all_reduce(big);
  const auto small_sum = pg.repeated_all_reduce(small);
  for (int round = 0; round < 3; ++round) {
    for (std::int64_t i = 0; i < big.numel(); ++i) {
      big.data<float>()[i] = static_cast<float>((r + 1) * (round + 1) + static_cast<double>(i % 7));
    }
    for (std::int64_t i = 0; i < small.numel(); ++i) {
      small.data<double>()[i] = (r + 1) * 0.5 * static_cast<double>(round + i);
    }
    big_sum->run();
    small_sum->run();
    pg.barrier();
    const double ranks_sum = w * (w + 1) / 2;
    for (std::int64_t i = 0; i < big.numel(); ++i) {
      expect(big.data<float>()[i] ==
                 static_cast<float>(ranks_sum * (round + 1) + w * static_cast<double>(i % 7)),
             "repeated float32 sum at " + std::to_string(i) + ", round " + std::to_string(round));
    }
    for (std::int64_t i = 0; i < small.numel(); ++i) {
      expect(small.data<double>()[i] == ranks_sum * 0.5 * static_cast<double>(round + i),
             "repeated float64 sum at " + std::to_string(i) + ", round " + std::to_string(round));
    }
  }
}

// The fingerprint check: identical on every rank, except on the victim, whose fc.weight has
// another shape and which has an extra parameter.
void fingerprint(dist::ProcessGroup& pg, int victim) {
  std::vector<dist::ParamInfo> params{{"conv.weight", {4, 1, 3, 3}, DType::Float32},
                                      {"fc.weight", {10, 6}, DType::Float32}};
  if (g_rank == victim) {
    params[1].shape = {10, 7};
    params.push_back({"extra.bias", {10}, DType::Float32});
  }
  dist::check_same_model(pg, params, "bucket 0: 1 0\n");
  ++checks;
}

// The victim dies (SIGKILL) or stops (SIGSTOP) at the 5th all-reduce (per-call ones, or one
// repeated all-reduce as the gradient buckets use); the others keep reducing until their process
// group reports it.
void failure(dist::ProcessGroup& pg, int victim, int sig, bool repeated, const std::string& dir) {
  if (g_rank == victim) {
    std::ofstream(dir + "/victim.pid") << ::getpid() << "\n";
  }
  Tensor t = tandem::empty({4096}, {.dtype = DType::Float32});
  const auto bucket = repeated ? pg.repeated_all_reduce(t) : nullptr;
  for (int step = 0; step < 1000000; ++step) {
    if (step == 5 && g_rank == victim) ::raise(sig);
    if (bucket) {
      bucket->run();
      continue;
    }
    pg.all_reduce(t, dist::ReduceOp::Sum);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: dist_worker collectives|die|stall|die-repeated|stall-repeated|die-once|"
                 "mismatch VICTIM DIR\n";
    return 2;
  }
  const std::string scenario = argv[1], dir = argv[3];
  const int victim = std::atoi(argv[2]);
  try {
    const auto world = dist::world_from_env();
    TANDEM_CHECK(world.has_value(), "no RANK/WORLD_SIZE in the environment");
    g_rank = world->rank;
    g_size = world->world_size;
    dist::ProcessGroupOptions options;
    options.timeout = std::chrono::milliseconds(std::atoi(std::getenv("TANDEM_TEST_TIMEOUT_MS")));
    auto pg = dist::init_process_group(*world, options);
    const char* restart = std::getenv("TANDEM_RESTART_COUNT");
    if (scenario == "die-once" && g_rank == victim && (!restart || std::atoi(restart) == 0)) {
      ::raise(SIGKILL);  // the first attempt loses a rank; a restarted one runs the collectives
    }
    if (scenario == "collectives" || scenario == "die-once") {
      fingerprint(*pg, -1);
      collectives(*pg);
    } else if (scenario == "mismatch") {
      fingerprint(*pg, victim);
    } else {
      const bool dies = scenario.starts_with("die");
      failure(*pg, victim, dies ? SIGKILL : SIGSTOP, scenario.ends_with("-repeated"), dir);
    }
    std::ofstream(dir + "/rank" + std::to_string(g_rank) + ".txt") << "ok " << checks << "\n";
    std::cout << "rank " << g_rank << ": ok, " << checks << " checks\n";
    return 0;
  } catch (const std::exception& e) {
    std::ofstream(dir + "/rank" + std::to_string(g_rank) + ".err") << e.what() << "\n";
    std::cerr << "rank " << g_rank << ": " << e.what() << "\n";
    if (scenario.starts_with("stall")) {  // the stopped victim would never exit: end it
      std::ifstream pid_file(dir + "/victim.pid");
      pid_t pid = 0;
      if (pid_file >> pid && pid > 0) ::kill(pid, SIGKILL);
    }
    return 3;
  }
}
