// Tests of SGD, Adam and AdamW: 5-step trajectories on a tiny least-squares problem against
// torch 1.13, option checks, zero_grad, skipped parameters, and state_dict save/load mid-run.
//
// Reference numbers: /usr/bin/python3 (torch 1.13) with this helper; each test names its call.
//   import torch
//   X = [[0.1, -0.2, 0.3], [0.5, 0.4, -0.6], [-0.7, 0.8, 0.9], [1.0, -1.1, 0.2]]
//   Y = [[0.3, -0.1], [0.2, 0.4], [-0.5, 0.6], [0.7, -0.8]]
//   W0 = [[0.2, -0.3, 0.1], [0.4, 0.5, -0.6]]
//   B0 = [0.05, -0.05]
//   def run(make, dtype=torch.float64, steps=5):
//       x, y = torch.tensor(X, dtype=dtype), torch.tensor(Y, dtype=dtype)
//       w = torch.tensor(W0, dtype=dtype, requires_grad=True)
//       b = torch.tensor(B0, dtype=dtype, requires_grad=True)
//       opt, losses = make(w, b), []
//       for _ in range(steps):
//           opt.zero_grad()
//           loss = ((torch.nn.functional.linear(x, w, b) - y) ** 2).mean()
//           loss.backward()
//           opt.step()
//           losses.append(loss.item())
//       print(repr(losses), repr(w.detach().flatten().tolist() + b.detach().tolist()))
//   O = torch.optim
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <memory>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using optim::Adam;
using optim::AdamOptions;
using optim::AdamW;
using optim::AdamWOptions;
using optim::Optimizer;
using optim::SGD;
using optim::SGDOptions;

constexpr std::array<double, 12> kX{0.1, -0.2, 0.3, 0.5, 0.4, -0.6, -0.7, 0.8, 0.9, 1.0, -1.1, 0.2};
constexpr std::array<double, 8> kY{0.3, -0.1, 0.2, 0.4, -0.5, 0.6, 0.7, -0.8};
constexpr std::array<double, 6> kW0{0.2, -0.3, 0.1, 0.4, 0.5, -0.6};
constexpr std::array<double, 2> kB0{0.05, -0.05};

template <std::size_t N>
std::vector<double> values(const std::array<double, N>& a) {
  return {a.begin(), a.end()};
}

struct Problem {
  Tensor x, y, w, b;
  explicit Problem(DType dtype = DType::Float64)
      : x(from_vector(values(kX), {4, 3}, {.dtype = dtype})),
        y(from_vector(values(kY), {4, 2}, {.dtype = dtype})),
        w(from_vector(values(kW0), {2, 3}, {.dtype = dtype, .requires_grad = true})),
        b(from_vector(values(kB0), {2}, {.dtype = dtype, .requires_grad = true})) {}
  // One training step: returns the loss before the update.
  double step(Optimizer& opt) const {
    opt.zero_grad();
    Tensor loss = (linear(x, w, b) - y).pow(2.0).mean();
    loss.backward();
    opt.step();
    return loss.item();
  }
  std::vector<double> params() const {
    std::vector<double> p = w.to_vector<double>();
    for (double v : b.to_vector<double>()) p.push_back(v);
    return p;
  }
};

using Make = std::function<std::unique_ptr<Optimizer>(const Tensor& w, const Tensor& b)>;

struct Trajectory {
  std::vector<double> losses, params;
};

Trajectory run(const Make& make, DType dtype = DType::Float64, int steps = 5) {
  Problem p(dtype);
  auto opt = make(p.w, p.b);
  Trajectory t;
  for (int i = 0; i < steps; ++i) t.losses.push_back(p.step(*opt));
  t.params = p.params();
  return t;
}

::testing::AssertionResult near(const std::vector<double>& got, const std::vector<double>& want,
                                double rtol, double atol) {
  return testing::allclose(
      from_vector(got, {static_cast<std::int64_t>(got.size())}, {.dtype = DType::Float64}), want,
      rtol, atol);
}

// float64 trajectories agree with torch to rounding (torch may fuse multiply-adds).
void expect_trajectory(const Make& make, const std::vector<double>& losses,
                       const std::vector<double>& params) {
  const Trajectory t = run(make);
  EXPECT_TRUE(near(t.losses, losses, 1e-10, 1e-13));
  EXPECT_TRUE(near(t.params, params, 1e-10, 1e-13));
}

template <typename O, typename Options>
Make make(Options options) {
  return [options](const Tensor& w, const Tensor& b) {
    return std::make_unique<O>(std::vector<Tensor>{w, b}, options);
  };
}

TEST(SGD, Plain) {
  // run(lambda w, b: O.SGD([w, b], lr=0.1))
  expect_trajectory(
      make<SGD>(optim::SGDOptions{.lr = 0.1}),
      {0.20719999999999994, 0.1761555997296875, 0.15006160293786214, 0.12811105287674118,
       0.10963013751267317},
      {0.2428417267529955, -0.32490691030876206, 0.06464434248262389, 0.2554652949471369,
       0.625889566685098, -0.47873909183364255, 0.0708081239481017, 0.00043062972612702784});
}

TEST(SGD, Momentum) {
  // run(lambda w, b: O.SGD([w, b], lr=0.1, momentum=0.9))
  expect_trajectory(
      make<SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9}),
      {0.20719999999999994, 0.1761555997296875, 0.126653796602183, 0.07482485591741078,
       0.034567697028525836},
      {0.3081794261257272, -0.3618868396549499, 0.00875501471842858, 0.033523293491276085,
       0.8170183157886309, -0.2901683907117504, 0.1017825033041126, 0.07836945540560672});
}

TEST(SGD, MomentumWithDampening) {
  // run(lambda w, b: O.SGD([w, b], lr=0.1, momentum=0.9, dampening=0.5))
  expect_trajectory(
      make<SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.5}),
      {0.20719999999999994, 0.1761555997296875, 0.13830671402037656, 0.09955982676954199,
       0.06493311598648654},
      {0.2777537240496563, -0.34603130989668224, 0.037407857048345636, 0.1387689685016958,
       0.7293865549053745, -0.3827447679870429, 0.08824294974487391, 0.04091464046672708});
}

TEST(SGD, Nesterov) {
  // run(lambda w, b: O.SGD([w, b], lr=0.1, momentum=0.9, nesterov=True))
  expect_trajectory(
      make<SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}),
      {0.20719999999999994, 0.15052458789917186, 0.09260242384607026, 0.04699291351043805,
       0.019743249513592166},
      {0.31817635210762424, -0.36318909413293515, -0.008030780057399739, -0.005939806269289276,
       0.8412099376381955, -0.24668677503128186, 0.10420855569784175, 0.09319879016190577});
}

TEST(SGD, WeightDecayWithMomentum) {
  // run(lambda w, b: O.SGD([w, b], lr=0.1, momentum=0.5, weight_decay=0.1))
  expect_trajectory(
      make<SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.5, .weight_decay = 0.1}),
      {0.20719999999999994, 0.1749995907296875, 0.13442451441158332, 0.09769071771598645,
       0.06890646161659993},
      {0.2526096174295884, -0.3175318277180144, 0.037244397798251436, 0.14942665177156003,
       0.6530425769676548, -0.37089241577320925, 0.07930982060792806, 0.029629961443407293});
}

TEST(SGD, Maximize) {
  // run(lambda w, b: O.SGD([w, b], lr=0.01, maximize=True))
  expect_trajectory(
      make<SGD>(optim::SGDOptions{.lr = 0.01, .maximize = true}),
      {0.20719999999999994, 0.21045296887229684, 0.2137604098207271, 0.2171232560181905,
       0.22054245683225956},
      {0.19476778013671206, -0.2967484787699361, 0.10391103940952104, 0.4173494301117495,
       0.4844285893935827, -0.6140651220133507, 0.0473125135423813, -0.0559641320384959});
}

TEST(SGD, PerGroupLearningRates) {
  // run(lambda w, b: O.SGD([{'params': [w]}, {'params': [b], 'lr': 0.01}], lr=0.1,
  //                        momentum=0.9))
  Make groups = [](const Tensor& w, const Tensor& b) {
    return std::make_unique<SGD>(std::vector<optim::ParamGroup<optim::SGDOptions>>{
        {.params = {w}, .options = {.lr = 0.1, .momentum = 0.9}},
        {.params = {b}, .options = {.lr = 0.01, .momentum = 0.9}}});
  };
  expect_trajectory(
      groups,
      {0.20719999999999994, 0.1775904719796875, 0.13041006952224818, 0.08103107408017034,
       0.04258070077476817},
      {0.31106031229185743, -0.36211887188848824, 0.01136008465228507, 0.04020454547180112,
       0.8164759294865492, -0.2841289222374705, 0.05648461317675705, -0.03413463600927773});
}

TEST(SGD, Float32MatchesTorchFloat32) {
  // run(lambda w, b: O.SGD([w, b], lr=0.1, momentum=0.9), dtype=torch.float32)
  const Trajectory t =
      run(make<SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9}), DType::Float32);
  EXPECT_TRUE(near(t.losses,
                   {0.20720000565052032, 0.17615561187267303, 0.126653790473938,
                    0.07482486218214035, 0.0345677025616169},
                   1e-5, 1e-7));
  EXPECT_TRUE(
      near(t.params,
           {0.30817943811416626, -0.3618868291378021, 0.008755026385188103, 0.03352329507470131,
            0.8170183300971985, -0.2901684045791626, 0.10178250074386597, 0.07836944609880447},
           1e-5, 1e-7));
}

TEST(Adam, Defaults) {
  // run(lambda w, b: O.Adam([w, b], lr=0.1))
  expect_trajectory(
      make<Adam>(optim::AdamOptions{.lr = 0.1}),
      {0.20719999999999994, 0.1080500012675182, 0.05522201588543127, 0.024809514346996527,
       0.013244931545939361},
      {0.29513795655086394, -0.2923738959209075, -0.21540359135972664, -0.059206547678737495,
       0.9324977206032837, -0.1442998459450133, 0.0975502054561988, 0.12464353503189968});
}

TEST(Adam, WeightDecayAmsgradBetas) {
  // run(lambda w, b: O.Adam([w, b], lr=0.1, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True))
  expect_trajectory(
      make<Adam>(optim::AdamOptions{
          .lr = 0.1, .betas = {0.8, 0.99}, .weight_decay = 0.1, .amsgrad = true}),
      {0.20719999999999994, 0.10805000052081877, 0.05021441522273282, 0.021641735603387273,
       0.012429248597467822},
      {0.2534138664766955, -0.21439837280883536, -0.18216887583854388, -0.044955773881094105,
       0.8500786351009759, -0.15044995012628948, 0.12099121030907113, 0.08609735989242118});
}

TEST(Adam, Maximize) {
  // run(lambda w, b: O.Adam([w, b], lr=0.05, maximize=True))
  expect_trajectory(
      make<Adam>(optim::AdamOptions{.lr = 0.05, .maximize = true}),
      {0.20719999999999994, 0.28276249431688005, 0.3750778712764539, 0.48429008408854624,
       0.6107199677005514},
      {-0.04696861865529569, -0.05486795661482568, 0.35069505713197846, 0.6511117212300329,
       0.2489107901806186, -0.851112784045017, -0.19278508266825276, -0.29900131725679135});
}

TEST(Adam, Float32MatchesTorchFloat32) {
  // run(lambda w, b: O.Adam([w, b], lr=0.1), dtype=torch.float32)
  const Trajectory t = run(make<Adam>(optim::AdamOptions{.lr = 0.1}), DType::Float32);
  EXPECT_TRUE(near(t.losses,
                   {0.20720000565052032, 0.10805002599954605, 0.055222027003765106,
                    0.024809518828988075, 0.01324493158608675},
                   1e-5, 1e-7));
  EXPECT_TRUE(
      near(t.params,
           {0.2951379418373108, -0.2923738658428192, -0.21540361642837524, -0.059206560254096985,
            0.9324976801872253, -0.14429989457130432, 0.09755020588636398, 0.12464353442192078},
           1e-5, 1e-7));
}

TEST(AdamW, DefaultWeightDecay) {
  // run(lambda w, b: O.AdamW([w, b], lr=0.1))      (weight_decay defaults to 0.01)
  expect_trajectory(
      make<AdamW>(optim::AdamWOptions{.lr = 0.1}),
      {0.20719999999999994, 0.1079085707236736, 0.05502674657437695, 0.024602356930744904,
       0.013018405352128084},
      {0.29468559183615406, -0.2916943260635872, -0.2152984072546521, -0.06021785003571491,
       0.9293480469121513, -0.14252889031972943, 0.09782039081622078, 0.12413669558840679});
}

TEST(AdamW, StrongDecayAmsgrad) {
  // run(lambda w, b: O.AdamW([w, b], lr=0.1, weight_decay=0.5, amsgrad=True))
  expect_trajectory(
      make<AdamW>(optim::AdamWOptions{.lr = 0.1, .weight_decay = 0.5, .amsgrad = true}),
      {0.20719999999999994, 0.10139362657528744, 0.047025305542050005, 0.01750593404944481,
       0.006365333648563653},
      {0.27785946161198827, -0.27130044474278053, -0.20951520387039196, -0.10305379735039785,
       0.7872853965070873, -0.06741749926853824, 0.11005248105237994, 0.10137166429063142});
}

TEST(AdamW, Float32MatchesTorchFloat32) {
  // run(lambda w, b: O.AdamW([w, b], lr=0.1, amsgrad=True), dtype=torch.float32)
  const Trajectory t =
      run(make<AdamW>(optim::AdamWOptions{.lr = 0.1, .amsgrad = true}), DType::Float32);
  EXPECT_TRUE(near(t.losses,
                   {0.20720000565052032, 0.10790859162807465, 0.055026743561029434,
                    0.024601301178336143, 0.013017650693655014},
                   1e-5, 1e-7));
  EXPECT_TRUE(
      near(t.params,
           {0.2946910262107849, -0.29169535636901855, -0.21528133749961853, -0.060217879712581635,
            0.9293479919433594, -0.1425289809703827, 0.09781114012002945, 0.12413672357797623},
           1e-5, 1e-7));
}

TEST(Optimizer, OptionsAreCheckedAndNamed) {
  Tensor w = ones({2}, {.requires_grad = true});
  EXPECT_THROW(SGD({w}, {.lr = -1.0}), Error);
  EXPECT_THROW(SGD({w}, {.lr = 0.1, .nesterov = true}), Error);  // no momentum
  EXPECT_THROW(SGD({w}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}), Error);
  EXPECT_THROW(Adam({w}, {.betas = {1.0, 0.999}}), Error);
  EXPECT_THROW(Adam({w}, {.eps = -1.0}), Error);
  EXPECT_THROW(SGD({w, w}), Error);     // a parameter twice
  EXPECT_THROW(SGD({w * 2.0}), Error);  // not a leaf

  SGD sgd({w}, {.lr = 0.5, .momentum = 0.9, .nesterov = true});
  EXPECT_EQ(sgd.option_names(), (std::vector<std::string>{"lr", "momentum", "dampening",
                                                          "weight_decay", "nesterov", "maximize"}));
  EXPECT_EQ(sgd.lr(), 0.5);
  EXPECT_EQ(sgd.option(0, "nesterov"), 1.0);
  sgd.set_lr(0, 0.25);
  EXPECT_EQ(sgd.options().lr, 0.25);
  EXPECT_THROW(sgd.option(0, "betas"), Error);
  EXPECT_THROW(sgd.option(1, "lr"), Error);
  AdamW adamw({w});
  EXPECT_EQ(adamw.type_name(), "AdamW");
  EXPECT_EQ(adamw.options().weight_decay, 1e-2);
  EXPECT_EQ(adamw.option(0, "beta2"), 0.999);
  EXPECT_EQ(Adam({w}).options().weight_decay, 0.0);
}

TEST(Optimizer, ZeroGradAndParametersWithoutGradients) {
  Tensor used =
      from_vector(std::vector<double>{1, 2}, {2}, {.dtype = DType::Float64, .requires_grad = true});
  Tensor unused =
      from_vector(std::vector<double>{3, 4}, {2}, {.dtype = DType::Float64, .requires_grad = true});
  Adam opt({used, unused}, {.lr = 0.1});
  (used * used).sum().backward();
  opt.step();
  EXPECT_TRUE(testing::allclose(unused, {3, 4}, 0, 0));
  EXPECT_EQ(opt.state(unused), nullptr);
  ASSERT_NE(opt.state(used), nullptr);
  EXPECT_EQ(opt.state(used)->step, 1);
  // First Adam step moves each element by lr (m / sqrt(v) = sign(g) after bias correction).
  EXPECT_TRUE(testing::allclose(used, {0.9, 1.9}, 1e-7));
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(testing::allclose(used.grad(), {0, 0}, 0, 0));
  opt.zero_grad();
  EXPECT_FALSE(used.grad().defined());
}

TEST(Optimizer, LargeParameterUsesTheSameRule) {
  // Big enough for the parallel loop; the first momentum step is p -= lr * g exactly.
  const std::int64_t n = 200'003;
  Tensor p = randn({n}, {.requires_grad = true});
  const std::vector<float> p0 = p.to_vector<float>();
  Tensor g = randn({n});
  p.set_grad(g);
  SGD opt({p}, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.25});
  opt.step();
  const std::vector<float> p1 = p.to_vector<float>(), gv = g.to_vector<float>();
  for (std::int64_t i = 0; i < n; i += 997) {
    const auto k = static_cast<std::size_t>(i);
    const float d = gv[k] + 0.25f * p0[k];
    EXPECT_EQ(p1[k], p0[k] + -0.5f * d) << "element " << i;
  }
  const std::vector<float> buf = opt.state(p)->buffers.at(0).second.to_vector<float>();
  EXPECT_EQ(buf[12345], gv[12345] + 0.25f * p0[12345]);  // the first buffer is the gradient
}

// The update loops are compiled once per combination of options, so that they vectorize. Every
// combination, on 1,003 float32 elements (the vector body and the scalar tail) over 3 steps,
// equals the per-element rule below (the same operations in torch's order) bit for bit.
struct ScalarSgd {
  SGDOptions o;
  std::vector<float> buf;
  void step(std::vector<float>& p, const std::vector<float>& g, int t) {
    buf.resize(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      float d = o.maximize ? -g[i] : g[i];
      if (o.weight_decay != 0.0) d = d + static_cast<float>(o.weight_decay) * p[i];
      if (o.momentum != 0.0) {
        const float mom = static_cast<float>(o.momentum);
        const float b = t == 0 ? d : buf[i] * mom + static_cast<float>(1.0 - o.dampening) * d;
        buf[i] = b;
        d = o.nesterov ? d + mom * b : b;
      }
      p[i] = p[i] + static_cast<float>(-o.lr) * d;
    }
  }
};

struct ScalarAdam {
  AdamOptions o;
  bool decoupled;
  std::vector<float> m, v, vmax;
  void step(std::vector<float>& p, const std::vector<float>& g, int t) {
    m.resize(p.size());
    v.resize(p.size());
    vmax.resize(p.size());
    const double steps = t + 1;
    const auto b1 = static_cast<float>(o.betas[0]), b2 = static_cast<float>(o.betas[1]);
    const auto step_size = static_cast<float>(-(o.lr / (1.0 - std::pow(o.betas[0], steps))));
    const auto bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(o.betas[1], steps)));
    for (std::size_t i = 0; i < p.size(); ++i) {
      float d = o.maximize ? -g[i] : g[i];
      float w = p[i];
      if (decoupled) w = w * static_cast<float>(1.0 - o.lr * o.weight_decay);
      if (!decoupled && o.weight_decay != 0.0) d = d + static_cast<float>(o.weight_decay) * w;
      m[i] = m[i] * b1 + static_cast<float>(1.0 - o.betas[0]) * d;
      v[i] = v[i] * b2 + static_cast<float>(1.0 - o.betas[1]) * d * d;
      float second = v[i];
      if (o.amsgrad) second = vmax[i] = std::max(vmax[i], v[i]);
      p[i] = w + step_size * m[i] / (std::sqrt(second) / bc2_sqrt + static_cast<float>(o.eps));
    }
  }
};

template <typename Reference>
void expect_bitwise_rule(const std::function<std::unique_ptr<Optimizer>(Tensor)>& make,
                         Reference reference, const std::string& what) {
  constexpr std::int64_t n = 1'003;
  Generator gen(11);
  Tensor p = randn({n}, {.requires_grad = true}, &gen);
  std::vector<float> expected = p.to_vector<float>();
  const std::unique_ptr<Optimizer> opt = make(p);
  for (int t = 0; t < 3; ++t) {
    Tensor g = randn({n}, {}, &gen);
    p.set_grad(g);
    opt->step();
    reference.step(expected, g.to_vector<float>(), t);
  }
  const std::vector<float> got = p.to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << what << ", element " << i;
  }
}

TEST(Optimizer, EveryCombinationOfOptionsFollowsTheRuleBitForBit) {
  const std::vector<std::pair<std::string, SGDOptions>> sgd{
      {"plain", {.lr = 0.1}},
      {"momentum", {.lr = 0.1, .momentum = 0.9}},
      {"dampening", {.lr = 0.1, .momentum = 0.9, .dampening = 0.3}},
      {"nesterov", {.lr = 0.1, .momentum = 0.9, .nesterov = true}},
      {"decay", {.lr = 0.1, .weight_decay = 0.2}},
      {"decay, momentum, maximize",
       {.lr = 0.1, .momentum = 0.8, .weight_decay = 0.2, .maximize = true}},
      {"decay, nesterov", {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.2, .nesterov = true}}};
  for (const auto& [name, o] : sgd) {
    expect_bitwise_rule([o](Tensor p) { return std::make_unique<SGD>(std::vector<Tensor>{p}, o); },
                        ScalarSgd{o, {}}, "SGD " + name);
  }
  const std::vector<std::pair<std::string, AdamOptions>> adam{
      {"defaults", {.lr = 0.01}},
      {"decay", {.lr = 0.01, .weight_decay = 0.1}},
      {"amsgrad, maximize", {.lr = 0.01, .amsgrad = true, .maximize = true}},
      {"decay, amsgrad", {.lr = 0.01, .weight_decay = 0.1, .amsgrad = true}}};
  for (const auto& [name, o] : adam) {
    expect_bitwise_rule([o](Tensor p) { return std::make_unique<Adam>(std::vector<Tensor>{p}, o); },
                        ScalarAdam{o, false, {}, {}, {}}, "Adam " + name);
    const AdamWOptions w{.lr = o.lr,
                         .weight_decay = o.weight_decay == 0.0 ? 0.05 : o.weight_decay,
                         .amsgrad = o.amsgrad,
                         .maximize = o.maximize};
    expect_bitwise_rule(
        [w](Tensor p) { return std::make_unique<AdamW>(std::vector<Tensor>{p}, w); },
        ScalarAdam{w.as_adam(), true, {}, {}, {}}, "AdamW " + name);
  }
}

TEST(Optimizer, StateDictHoldsHyperParametersAndStateCopies) {
  Problem prob;
  Adam opt({prob.w, prob.b}, {.lr = 0.1, .amsgrad = true});
  prob.step(opt);
  prob.step(opt);
  const optim::SavedState s = opt.state_dict();
  EXPECT_EQ(s.type, "Adam");
  EXPECT_EQ(s.scalar("param_groups.0.params"), 2.0);
  EXPECT_EQ(s.scalar("param_groups.0.lr"), 0.1);
  EXPECT_EQ(s.scalar("param_groups.0.beta2"), 0.999);
  EXPECT_EQ(s.scalar("param_groups.0.amsgrad"), 1.0);
  EXPECT_EQ(s.scalar("state.0.step"), 2.0);
  EXPECT_EQ(s.scalar("state.1.step"), 2.0);
  std::vector<std::string> keys;
  for (const auto& [k, t] : s.tensors) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq",
                                            "state.0.max_exp_avg_sq", "state.1.exp_avg",
                                            "state.1.exp_avg_sq", "state.1.max_exp_avg_sq"}));
  EXPECT_EQ(s.tensors[0].second.shape(), (Shape{2, 3}));
  EXPECT_THROW(s.scalar("state.2.step"), Error);
  // The saved tensors are snapshots: further steps leave them alone.
  const std::vector<double> saved = s.tensors[0].second.to_vector<double>();
  prob.step(opt);
  EXPECT_EQ(s.tensors[0].second.to_vector<double>(), saved);
}

// Runs `steps_before` steps, saves, and checks that a fresh optimizer loaded from the saved state
// continues exactly as the original does.
template <typename O, typename Options>
void expect_resume_identical(const Options& options, const Options& other_options) {
  Problem a;
  O opt_a({a.w, a.b}, options);
  a.step(opt_a);
  a.step(opt_a);
  const optim::SavedState saved = opt_a.state_dict();
  Problem b;
  {
    NoGradGuard no_grad;
    copy_into(b.w, a.w);
    copy_into(b.b, a.b);
  }
  O opt_b({b.w, b.b}, other_options);
  opt_b.load_state_dict(saved);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.step(opt_a), b.step(opt_b)) << "step " << i;
  }
  EXPECT_EQ(a.params(), b.params());
  EXPECT_EQ(opt_b.option(0, "lr"), opt_a.option(0, "lr"));
}

TEST(Optimizer, ResumeFromStateDictContinuesIdentically) {
  expect_resume_identical<SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true},
                               optim::SGDOptions{.lr = 0.7});
  expect_resume_identical<Adam>(optim::AdamOptions{.lr = 0.1, .weight_decay = 0.1, .amsgrad = true},
                                optim::AdamOptions{.lr = 0.01});
  expect_resume_identical<AdamW>(optim::AdamWOptions{.lr = 0.1, .betas = {0.8, 0.9}},
                                 optim::AdamWOptions{});
}

TEST(Optimizer, LoadStateDictRejectsMismatches) {
  Problem p;
  SGD sgd({p.w, p.b}, {.lr = 0.1, .momentum = 0.9});
  p.step(sgd);
  const optim::SavedState saved = sgd.state_dict();
  Adam adam({p.w, p.b});
  EXPECT_THROW(adam.load_state_dict(saved), Error);  // another optimizer's state
  SGD one_group({p.w}, {.lr = 0.1});
  EXPECT_THROW(one_group.load_state_dict(saved), Error);  // 1 parameter, not 2
  SGD two_groups(
      std::vector<optim::ParamGroup<optim::SGDOptions>>{{.params = {p.w}}, {.params = {p.b}}});
  EXPECT_THROW(two_groups.load_state_dict(saved), Error);  // group layout
  SGD swapped({p.b, p.w}, {.lr = 0.1});
  try {
    swapped.load_state_dict(saved);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("state.0.momentum_buffer has shape (2, 3)"),
              std::string::npos)
        << e.what();
  }
  SGD fine({p.w, p.b}, {.lr = 0.3});
  fine.load_state_dict(saved);
  EXPECT_EQ(fine.lr(), 0.1);
  EXPECT_EQ(fine.options().momentum, 0.9);
}

}  // namespace
}  // namespace tandem
