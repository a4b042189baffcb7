// The seed walkthrough (DESIGN.md §1): device, the seed's Net, DataLoader, SGD, CrossEntropyLoss,
// a few steps, evaluation under no-grad, state dict saved. The Net is the seed's, exactly as
// written for 3x32x32 CIFAR images — Conv2d(3,16,3,1,1) → Conv2d(16,32,3,1,1) → Linear(32*32*32,10)
// — with its 1x28x28 variant for Fashion-MNIST; the data's sample shape picks which.
// Usage: seed_walkthrough [--data SPEC] [--steps N] [--out FILE]   (defaults: fashion-mnist, 100)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <tandem/tandem.h>
namespace tn = tandem;

struct Net : tn::nn::Module {  // the seed's model: C x S x S images (3x32x32 or 1x28x28)
  const std::int64_t channels, side;
  tn::nn::Conv2d conv1 =
      register_module("conv1", tn::nn::Conv2d(channels, 16, /*k*/ 3, /*s*/ 1, /*p*/ 1));
  tn::nn::Conv2d conv2 = register_module("conv2", tn::nn::Conv2d(16, 32, 3, 1, 1));
  tn::nn::Linear fc = register_module("fc", tn::nn::Linear(32 * side * side, 10));
  Net(std::int64_t c, std::int64_t s) : channels(c), side(s) {}
  tn::Tensor forward(const tn::Tensor& input) override {
    tn::Tensor x = conv2(conv1(input));
    return fc(x.view({x.size(0), -1}));
  }
};

int main(int argc, char** argv) {
  std::string spec = "fashion-mnist";
  int steps = 100;
  std::string out = "model.safetensors";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--data") spec = argv[i + 1];
    else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--out") out = argv[i + 1];
  }
  try {
    tn::Device device("cpu");  // this build's device; a CUDA build would pick "cuda" when present
    tn::manual_seed(0);
    auto train = tn::data::parse_data_spec(spec, tn::data::Split::Train);
    auto test = tn::data::parse_data_spec(spec, tn::data::Split::Test);
    const tn::Shape sample = train->get(0).data.shape();  // (C, H, W)
    if (sample.size() != 3 || sample[1] != sample[2] || (sample[0] != 3 && sample[0] != 1)) {
      std::fprintf(stderr, "seed_walkthrough: the seed CNN takes 3xSxS or 1xSxS images, not %s\n",
                   tn::to_string(sample).c_str());
      return 2;
    }
    auto model = std::make_shared<Net>(sample[0], sample[1]);
    model->to(device);
    std::printf("seed CNN for %s images, %lld parameters\n", tn::to_string(sample).c_str(),
                static_cast<long long>(model->parameter_count()));
    tn::data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .num_workers = 2,
                                        .transforms = tn::data::default_transforms(spec)});
    tn::optim::SGD opt(model->parameters(), {.lr = 0.001, .momentum = 0.9});
    tn::nn::CrossEntropyLoss criterion;

    int step = 0;
    for (auto& [data, target] : loader) {
      opt.zero_grad();
      auto loss = criterion((*model)(data.to(device)), target.to(device));
      loss.backward();
      opt.step();
      std::printf("step %d  loss %.4f\n", ++step, loss.item());
      if (step == steps) break;
    }

    // Evaluation: no tape, eval mode.
    model->eval();
    tn::NoGradGuard no_grad;
    tn::data::DataLoader test_loader(test, {.batch_size = 500,
                                            .transforms = tn::data::default_transforms(spec)});
    std::int64_t correct = 0, seen = 0;
    for (auto& [data, target] : test_loader) {
      const auto predicted = (*model)(data.to(device)).argmax(1).to_vector<std::int64_t>();
      const auto truth = target.to_vector<std::int64_t>();
      for (std::size_t i = 0; i < truth.size(); ++i) correct += predicted[i] == truth[i];
      seen += static_cast<std::int64_t>(truth.size());
    }
    std::printf("test accuracy %.4f on %lld samples\n",
                static_cast<double>(correct) / static_cast<double>(seen), static_cast<long long>(seen));

    tn::io::save_safetensors(out, model->state_dict());  // loads in PyTorch as-is
    std::printf("saved %s\n", out.c_str());
    return 0;
  } catch (const tn::Error& e) {
    std::fprintf(stderr, "seed_walkthrough: error: %s\n", e.what());
    return 2;
  }
}
