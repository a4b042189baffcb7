// The DataLoader alone on Fashion-MNIST (batch 64, shuffled, ToFloat + Normalize) or any --data
// spec (its default transforms) with 0, 1 and 2 workers, beside the seed CNN's training rate on
// Fashion-MNIST's batches: the loader must deliver at least 10 times faster than training
// consumes. A benchmark, not a test; it prints figures.
// Usage: data_loader_bench [--epochs 3] [--train-steps 30] [--batch-size 64] [--data SPEC]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_flags.h"
#include "tandem/tandem.h"
#include "tandem/train/models.h"

namespace tn = tandem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  long epochs = 3, train_steps = 30, batch_size = 64;
  std::string spec = "fashion-mnist";
  CLI::App app{"the DataLoader alone, beside the seed CNN's training rate", "data_loader_bench"};
  app.add_option("--data", spec, "fashion-mnist or a data spec");
  app.add_option("--epochs", epochs)->check(at_least(1));
  app.add_option("--train-steps", train_steps)->check(at_least(1));
  app.add_option("--batch-size", batch_size)->check(at_least(1));
  CLI11_PARSE(app, argc, argv);
  try {
    const auto t_load = Clock::now();
    const std::shared_ptr<const tn::data::Dataset> samples =
        tn::data::parse_data_spec(spec, tn::data::Split::Train);
    std::printf("%s train: %lld samples read and checked in %.2f s\n", spec.c_str(),
                static_cast<long long>(samples->size()), seconds_since(t_load));
    const std::vector<tn::data::AnyTransform> transforms =
        tn::data::default_transforms(spec, /*normalize=*/true);

    double slowest_loader = 0;
    for (int workers : {0, 1, 2}) {
      tn::data::DataLoader loader(samples, {.batch_size = batch_size,
                                          .shuffle = true,
                                          .num_workers = workers,
                                          .transforms = transforms});
      for (auto& batch : loader) (void)batch;  // one warm-up epoch
      long images = 0;
      const auto t0 = Clock::now();
      for (long e = 0; e < epochs; ++e) {
        for (auto& [data, target] : loader) images += data.size(0);
      }
      const double rate = static_cast<double>(images) / seconds_since(t0);
      slowest_loader = slowest_loader == 0 ? rate : std::min(slowest_loader, rate);
      std::printf("loader  workers=%d  batch=%ld  %ld epochs  %12.0f images/s\n", workers,
                  batch_size, epochs, rate);
      std::fflush(stdout);
    }

    if (train_steps > 0 && spec == "fashion-mnist") {
      tn::manual_seed(0);
      // The seed document's Net for 1x28x28 input, as `tandem train --model seed-cnn` builds it.
      auto model = std::make_shared<tn::train::SeedCnn>(1, 28, 28, 10);
      tn::optim::SGD opt(model->parameters(), {.lr = 0.001, .momentum = 0.9});
      tn::nn::CrossEntropyLoss criterion;
      tn::data::DataLoader loader(
          samples,
          {.batch_size = batch_size, .shuffle = true, .num_workers = 2, .transforms = transforms});
      long step = 0, images = 0;
      Clock::time_point t0;
      for (auto& [data, target] : loader) {
        if (step == 2) t0 = Clock::now();  // two warm-up steps (primitive creation)
        opt.zero_grad();
        tn::Tensor loss = criterion((*model)(data), target);
        loss.backward();
        opt.step();
        if (step >= 2) images += data.size(0);
        if (++step == train_steps + 2) break;
      }
      const double rate = static_cast<double>(images) / seconds_since(t0);
      std::printf("seed CNN training (loader with 2 workers)  %12.0f images/s\n", rate);
      std::printf("slowest loader / training = %.0fx (needs >= 10x)\n", slowest_loader / rate);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "data_loader_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
