// An out-of-tree program built against the installed tandem package: the seed MLP
// (Linear(100, 50) -> ReLU -> Linear(50, 10)) takes one SGD step on random data.
// Prints the loss; exits 0 when it is finite.
#include <cmath>
#include <cstdio>
#include <memory>

#include <tandem/tandem.h>
namespace tn = tandem;

struct MyModel : tn::nn::Module {
  tn::nn::Linear fc1 = register_module("fc1", tn::nn::Linear(100, 50));
  tn::nn::ReLU relu = register_module("relu", tn::nn::ReLU());
  tn::nn::Linear fc2 = register_module("fc2", tn::nn::Linear(50, 10));
  tn::Tensor forward(const tn::Tensor& x) override { return fc2(relu(fc1(x))); }
};

int main() {
  try {
    tn::manual_seed(0);
    auto model = std::make_shared<MyModel>();
    tn::optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.9});
    tn::nn::CrossEntropyLoss criterion;

    const auto data = tn::randn({32, 100});
    const auto target = tn::randint(0, 10, {32});
    opt.zero_grad();
    auto loss = criterion((*model)(data), target);
    loss.backward();
    opt.step();

    const double value = loss.item();
    std::printf("consumer: one SGD step, loss %.6f\n", value);
    return std::isfinite(value) ? 0 : 1;
  } catch (const tn::Error& e) {
    std::fprintf(stderr, "consumer: error: %s\n", e.what());
    return 2;
  }
}
