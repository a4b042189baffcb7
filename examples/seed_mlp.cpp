// The second seed's MyModel: Linear(100, 50) -> ReLU -> Linear(50, 10), trained with SGD on a
// synthetic 100-feature dataset (or a CSV with 100 feature columns and a label), then evaluated.
// Usage: seed_mlp [--data SPEC] [--steps N] [--out FILE]   (default data synthetic:100:10:2000)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <tandem/tandem.h>
namespace tn = tandem;

struct MyModel : tn::nn::Module {
  tn::nn::Linear fc1 = register_module("fc1", tn::nn::Linear(100, 50));
  tn::nn::ReLU relu = register_module("relu", tn::nn::ReLU());
  tn::nn::Linear fc2 = register_module("fc2", tn::nn::Linear(50, 10));
  tn::Tensor forward(const tn::Tensor& x) override { return fc2(relu(fc1(x))); }
};

int main(int argc, char** argv) {
  std::string spec = "synthetic:100:10:2000";
  int steps = 200;
  std::string out = "mlp.safetensors";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--data") spec = argv[i + 1];
    else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--out") out = argv[i + 1];
  }
  try {
    tn::manual_seed(0);
    auto model = std::make_shared<MyModel>();
    auto train = tn::data::parse_data_spec(spec, tn::data::Split::Train);
    tn::data::DataLoader loader(train, {.batch_size = 32, .shuffle = true});
    tn::optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
    tn::nn::CrossEntropyLoss criterion;

    int step = 0;
    double first_loss = 0, last_loss = 0;
    while (step < steps) {
      for (auto& [data, target] : loader) {
        opt.zero_grad();
        auto loss = criterion((*model)(data), target);
        loss.backward();
        opt.step();
        last_loss = loss.item();
        if (step == 0) first_loss = last_loss;
        if (++step == steps) break;
      }
    }
    std::printf("%d steps: loss %.4f -> %.4f\n", steps, first_loss, last_loss);

    model->eval();
    tn::NoGradGuard no_grad;
    auto test = tn::data::parse_data_spec(spec, tn::data::Split::Test);
    tn::data::DataLoader test_loader(test, {.batch_size = 500});
    std::int64_t correct = 0, seen = 0;
    for (auto& [data, target] : test_loader) {
      const auto predicted = (*model)(data).argmax(1).to_vector<std::int64_t>();
      const auto truth = target.to_vector<std::int64_t>();
      for (std::size_t i = 0; i < truth.size(); ++i) correct += predicted[i] == truth[i];
      seen += static_cast<std::int64_t>(truth.size());
    }
    std::printf("test accuracy %.4f on %lld samples\n",
                static_cast<double>(correct) / static_cast<double>(seen), static_cast<long long>(seen));
    tn::io::save_safetensors(out, model->state_dict());
    std::printf("saved %s\n", out.c_str());
    return last_loss < first_loss ? 0 : 1;  // the example also checks that it learned
  } catch (const tn::Error& e) {
    std::fprintf(stderr, "seed_mlp: error: %s\n", e.what());
    return 2;
  }
}
