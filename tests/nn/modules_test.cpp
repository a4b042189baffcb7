// Tests of module structure: PyTorch's parameter and buffer names and order, Sequential, handle
// semantics (copies share tensors and the training flag), the DESIGN.md Net, state-dict round
// trips and load_state_dict's strict errors.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

namespace tn = tandem;
using testing::allclose;

std::vector<std::string> names(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

// The seed's model, verbatim from DESIGN.md section 1. Its forward(Tensor) hides the virtual
// forward(const Tensor&) on purpose (it is called directly), which clang reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverloaded-virtual"
// clang-format off
struct Net : tn::nn::Module {                       // the seed's model, verbatim
  tn::nn::Conv2d conv1 = register_module("conv1", tn::nn::Conv2d(3, 16, /*k*/3, /*s*/1, /*p*/1));
  tn::nn::Conv2d conv2 = register_module("conv2", tn::nn::Conv2d(16, 32, 3, 1, 1));
  tn::nn::Linear fc    = register_module("fc",    tn::nn::Linear(32 * 32 * 32, 10));
  tn::Tensor forward(tn::Tensor x) {
    x = conv2(conv1(x));
    return fc(x.view({x.size(0), -1}));
  }
};
// clang-format on
#pragma GCC diagnostic pop

TEST(Modules, SequentialNamesMatchPyTorch) {
  // torch.nn.Sequential(Conv2d(3, 4, 3), BatchNorm2d(4), ReLU(), Linear(4, 2)).state_dict().keys()
  nn::Sequential seq(nn::Conv2d(3, 4, 3), nn::BatchNorm2d(4), nn::ReLU(), nn::Linear(4, 2));
  EXPECT_EQ(
      names(seq.state_dict()),
      (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                "1.running_var", "1.num_batches_tracked", "3.weight", "3.bias"}));
  EXPECT_EQ(
      names(seq.named_parameters()),
      (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "3.weight", "3.bias"}));
  EXPECT_EQ(names(seq.named_buffers()),
            (std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"}));
  EXPECT_EQ(seq.parameter_count(), 4 * 3 * 9 + 4 + 4 + 4 + 2 * 4 + 2);
  const auto sd = seq.state_dict();
  EXPECT_EQ(sd[0].second.shape(), (Shape{4, 3, 3, 3}));
  EXPECT_EQ(sd[6].second.dtype(), DType::Int64);
  EXPECT_EQ(sd[6].second.dim(), 0);
}

TEST(Modules, ParameterShapesAndOptionalTensors) {
  nn::Conv2d grouped(
      {.in_channels = 4, .out_channels = 6, .kernel_size = {3, 5}, .groups = 2, .bias = false});
  EXPECT_EQ(grouped.weight.shape(), (Shape{6, 2, 3, 5}));
  EXPECT_FALSE(grouped.bias.defined());
  EXPECT_EQ(names(grouped.named_parameters()), (std::vector<std::string>{"weight"}));
  nn::Linear no_bias(5, 2, /*bias=*/false);
  EXPECT_EQ(names(no_bias.state_dict()), (std::vector<std::string>{"weight"}));
  nn::BatchNorm2d plain({.num_features = 3, .affine = false, .track_running_stats = false});
  EXPECT_TRUE(plain.state_dict().empty());
  nn::BatchNorm2d bn(3);
  EXPECT_TRUE(allclose(bn.weight, {1, 1, 1}));
  EXPECT_TRUE(allclose(bn.bias, {0, 0, 0}));
  EXPECT_TRUE(allclose(bn.running_mean, {0, 0, 0}));
  EXPECT_TRUE(allclose(bn.running_var, {1, 1, 1}));
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 0);
  EXPECT_FALSE(bn.running_mean.requires_grad());
  EXPECT_EQ(bn.options.momentum, 0.1);
  EXPECT_EQ(bn.options.eps, 1e-5);
}

TEST(Modules, ConstructorChecksNameTheModule) {
  auto message = [](auto&& make) {
    try {
      make();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { nn::Conv2d(3, 4, 0); }).find("Conv2d"), std::string::npos);
  EXPECT_NE(message([] {
              nn::Conv2d({.in_channels = 3, .out_channels = 4, .groups = 2});
            }).find("groups=2"),
            std::string::npos);
  EXPECT_NE(message([] { nn::Linear(0, 3); }).find("Linear"), std::string::npos);
  EXPECT_NE(message([] { nn::Dropout(1.5); }).find("Dropout"), std::string::npos);
  EXPECT_NE(message([] { nn::MaxPool2d(2, 2, 2); }).find("MaxPool2d"), std::string::npos);
  EXPECT_NE(message([] { nn::BatchNorm2d(0); }).find("BatchNorm2d"), std::string::npos);
}

TEST(Modules, CopiesShareParametersAndTrainingFlag) {
  nn::Linear a(3, 2);
  nn::Linear b = a;
  EXPECT_TRUE(b.weight.is_same(a.weight));
  nn::init::constant_(a.weight, 0.5);
  EXPECT_TRUE(allclose(b.weight, std::vector<double>(6, 0.5)));
  b.eval();
  EXPECT_FALSE(a.is_training());
  EXPECT_TRUE(a.named_parameters()[0].second.is_same(b.weight));
  a.to(DType::Float64);  // in place: every handle sees it
  EXPECT_EQ(b.weight.dtype(), DType::Float64);
  EXPECT_EQ(b.named_parameters()[1].second.dtype(), DType::Float64);
}

TEST(Modules, SequentialIndexingPushBackAndNesting) {
  nn::Sequential seq(nn::Linear(4, 3), nn::ReLU());
  nn::Sequential alias = seq;  // a handle, not a nesting
  EXPECT_EQ(alias.size(), 2u);
  seq.push_back(nn::Linear(3, 1));
  EXPECT_EQ(alias.size(), 3u);
  EXPECT_EQ(seq[1].type_name(), "ReLU");
  EXPECT_EQ(seq.at<nn::Linear>(2).in_features, 3);
  EXPECT_TRUE(seq.at<nn::Linear>(0).weight.is_same(seq.named_parameters()[0].second));
  EXPECT_THROW(seq.at<nn::Conv2d>(0), Error);
  EXPECT_THROW(seq[3], Error);

  nn::Sequential outer(seq, nn::Sequential(nn::Tanh()), nn::Linear(1, 1));
  EXPECT_EQ(names(outer.named_parameters()),
            (std::vector<std::string>{"0.0.weight", "0.0.bias", "0.2.weight", "0.2.bias",
                                      "2.weight", "2.bias"}));
  // A module pushed as a shared_ptr is the very object.
  auto shared = std::make_shared<nn::Linear>(1, 2);
  outer.push_back(shared);
  EXPECT_EQ(&outer[3], shared.get());

  nn::Sequential empty_seq;
  Tensor x = ones({2, 2});
  EXPECT_TRUE(empty_seq(x).is_same(x));
  EXPECT_TRUE(empty_seq.empty());
}

TEST(Modules, SequentialTrainEvalReachesEveryChild) {
  nn::Sequential seq(nn::Linear(2, 2), nn::Dropout(0.5), nn::Sequential(nn::BatchNorm2d(2)));
  seq.eval();
  EXPECT_FALSE(seq.at<nn::Dropout>(1).is_training());
  EXPECT_FALSE(seq.at<nn::Sequential>(2).at<nn::BatchNorm2d>(0).is_training());
  seq.train();
  EXPECT_TRUE(seq.at<nn::Sequential>(2)[0].is_training());
}

TEST(Modules, DesignNetCompilesTrainsAndNamesItsParameters) {
  manual_seed(0);
  auto model = std::make_shared<Net>();
  EXPECT_EQ(names(model->named_parameters()),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                      "fc.weight", "fc.bias"}));
  // The members and the registered children are the same modules.
  EXPECT_TRUE(model->conv1.weight.is_same(model->named_parameters()[0].second));
  EXPECT_TRUE(model->fc.bias.is_same(model->named_parameters()[5].second));
  EXPECT_EQ(model->parameter_count(), 16 * 27 + 16 + 32 * 144 + 32 + 32768 * 10 + 10);

  model->to(Device("cpu"));
  optim::SGD opt(model->parameters(), {.lr = 0.001, .momentum = 0.9});
  nn::CrossEntropyLoss criterion;
  Tensor data = randn({2, 3, 32, 32});
  Tensor target = from_vector(std::vector<std::int64_t>{3, 7}, {2});
  const std::vector<double> before = model->fc.weight.to_vector<double>();
  double first_loss = 0;
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    Tensor logits = model->forward(data);
    EXPECT_EQ(logits.shape(), (Shape{2, 10}));
    Tensor loss = criterion(logits, target);
    if (i == 0) first_loss = loss.item();
    loss.backward();
    for (const auto& [n, p] : model->named_parameters()) {
      EXPECT_TRUE(p.grad().defined()) << n;
    }
    opt.step();
  }
  EXPECT_NE(model->fc.weight.to_vector<double>(), before);
  NoGradGuard no_grad;
  EXPECT_LT(criterion(model->forward(data), target).item(), first_loss);
}

TEST(Modules, StateDictRoundTripCopiesValues) {
  manual_seed(1);
  nn::Sequential a(nn::Conv2d(2, 3, 3), nn::BatchNorm2d(3), nn::ReLU(), nn::Flatten(),
                   nn::Linear(12, 2));
  manual_seed(2);
  nn::Sequential b(nn::Conv2d(2, 3, 3), nn::BatchNorm2d(3), nn::ReLU(), nn::Flatten(),
                   nn::Linear(12, 2));
  a(randn({4, 2, 4, 4}));  // moves a's running stats and num_batches_tracked
  EXPECT_NE(a.state_dict()[0].second.to_vector<double>(),
            b.state_dict()[0].second.to_vector<double>());
  b.load_state_dict(a.state_dict());
  const auto sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_EQ(sa[i].second.to_vector<double>(), sb[i].second.to_vector<double>()) << sa[i].first;
    EXPECT_FALSE(sa[i].second.is_same(sb[i].second));
  }
  EXPECT_EQ(b.at<nn::BatchNorm2d>(1).num_batches_tracked.item<std::int64_t>(), 1);
  // Values were copied: changing a no longer changes b.
  nn::init::zeros_(a.at<nn::Linear>(4).weight);
  EXPECT_NE(b.at<nn::Linear>(4).weight.to_vector<double>(),
            a.at<nn::Linear>(4).weight.to_vector<double>());
  // Outputs agree in eval mode.
  a.eval();
  b.eval();
  b.load_state_dict(a.state_dict());
  Tensor x = randn({2, 2, 4, 4});
  EXPECT_TRUE(allclose(a(x), b(x), 0, 0));
}

TEST(Modules, LoadStateDictStrictErrorsListTheKeys) {
  nn::Sequential model(nn::Linear(3, 2), nn::ReLU(), nn::Linear(2, 1));
  auto error_of = [&](const nn::StateDict& sd, bool strict) {
    try {
      model.load_state_dict(sd, strict);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nn::StateDict sd = model.state_dict();  // 0.weight 0.bias 2.weight 2.bias
  ASSERT_EQ(sd[2].first, "2.weight");
  sd[2].second = zeros({1, 3});             // the model's is (1, 2)
  sd.erase(sd.begin() + 1);                 // drop "0.bias"
  sd.emplace_back("5.weight", zeros({1}));  // unexpected
  const std::string msg = error_of(sd, true);
  EXPECT_NE(msg.find("missing keys: 0.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unexpected keys: 5.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2.weight: checkpoint (1, 3), model (1, 2)"), std::string::npos) << msg;
  // Non-strict still refuses shape differences, but accepts missing and unexpected keys.
  EXPECT_FALSE(error_of(sd, false).empty());
  sd[1].second = full({1, 2}, 0.75);  // "2.weight" again
  EXPECT_TRUE(error_of(sd, false).empty());
  EXPECT_TRUE(allclose(model.at<nn::Linear>(2).weight, {0.75, 0.75}));
}

}  // namespace
}  // namespace tandem
