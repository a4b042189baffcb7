// Tests of the learning-rate schedules: 10-step sequences (and OneCycleLR's momentum / beta1
// cycle) against torch 1.13, argument checks, and resuming from saved state.
//
// Reference numbers: /usr/bin/python3 (torch 1.13) with this helper; each test names its call.
//   import torch
//   S = torch.optim.lr_scheduler
//   def seq(make_opt, make_sched, n=10, key=None):
//       opt = make_opt([torch.zeros(1, requires_grad=True)])
//       s = make_sched(opt)
//       lrs, moms = [], []
//       for i in range(n):
//           lrs.append(s.get_last_lr()[0])
//           if key: moms.append(opt.param_groups[0][key] if key != 'betas'
//                               else opt.param_groups[0]['betas'][0])
//           opt.step()
//           s.step()
//       print(repr(lrs)); key and print(repr(moms))
//   sgd = lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)
//   adam = lambda p: torch.optim.Adam(p, lr=0.1)
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using optim::LRScheduler;
using optim::Optimizer;

struct Sequence {
  std::vector<double> lrs, momenta;
};

// The tandem twin of seq(): records the rate (and the momentum option) before each step.
Sequence record(Optimizer& opt, LRScheduler& sched, int n = 10, const std::string& momentum = "") {
  Sequence s;
  for (int i = 0; i < n; ++i) {
    s.lrs.push_back(sched.get_last_lr()[0]);
    if (!momentum.empty()) s.momenta.push_back(opt.option(0, momentum));
    opt.step();
    sched.step();
  }
  return s;
}

::testing::AssertionResult near(const std::vector<double>& got, const std::vector<double>& want,
                                double rtol = 1e-13) {
  return testing::allclose(
      from_vector(got, {static_cast<std::int64_t>(got.size())}, {.dtype = DType::Float64}), want,
      rtol, 1e-17);
}

struct Fixture {
  Tensor p = zeros({1}, {.requires_grad = true});
  optim::SGD sgd{{p}, {.lr = 0.1, .momentum = 0.9}};
  optim::Adam adam{{zeros({1}, {.requires_grad = true})}, {.lr = 0.1}};
};

TEST(LRScheduler, StepLR) {
  // seq(sgd, lambda o: S.StepLR(o, step_size=3, gamma=0.5))
  Fixture f;
  optim::StepLR sched(f.sgd, 3, 0.5);
  EXPECT_TRUE(near(record(f.sgd, sched).lrs,
                   {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125}));
  EXPECT_EQ(sched.last_epoch(), 10);
  EXPECT_EQ(f.sgd.lr(), 0.0125);
  EXPECT_THROW(optim::StepLR(f.sgd, 0), Error);
}

TEST(LRScheduler, CosineAnnealingLRPastTMax) {
  // seq(sgd, lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.01))
  Fixture f;
  optim::CosineAnnealingLR sched(f.sgd, 4, 0.01);
  EXPECT_TRUE(near(record(f.sgd, sched).lrs,
                   {0.1, 0.08681980515339464, 0.05500000000000001, 0.023180194846605363, 0.01,
                    0.023180194846605363, 0.05500000000000002, 0.08681980515339469,
                    0.10000000000000006, 0.0868198051533947}));
}

TEST(LRScheduler, LinearWarmup) {
  // seq(sgd, lambda o: S.LinearLR(o, start_factor=0.25, total_iters=4))
  Fixture f;
  optim::LinearWarmup sched(f.sgd, {.start_factor = 0.25, .total_iters = 4});
  EXPECT_TRUE(near(record(f.sgd, sched).lrs,
                   {0.025, 0.043750000000000004, 0.06250000000000001, 0.08125000000000002,
                    0.10000000000000002, 0.10000000000000002, 0.10000000000000002,
                    0.10000000000000002, 0.10000000000000002, 0.10000000000000002}));
  // seq(sgd, lambda o: S.LinearLR(o))
  Fixture g;
  optim::LinearLR defaults(g.sgd);
  EXPECT_TRUE(near(record(g.sgd, defaults).lrs,
                   {0.03333333333333333, 0.04666666666666667, 0.060000000000000005,
                    0.07333333333333335, 0.08666666666666668, 0.1, 0.1, 0.1, 0.1, 0.1}));
  EXPECT_THROW(optim::LinearWarmup(g.sgd, {.start_factor = 0.0}), Error);
  EXPECT_THROW(optim::LinearWarmup(g.sgd, {.end_factor = 1.5}), Error);
}

TEST(LRScheduler, OneCycleLRCyclesSgdMomentum) {
  // seq(sgd, lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=10), key='momentum')
  Fixture f;
  optim::OneCycleLR sched(f.sgd, {.max_lr = {0.1}, .total_steps = 10});
  const Sequence s = record(f.sgd, sched, 10, "momentum");
  EXPECT_TRUE(near(s.lrs, {0.0040000000000000036, 0.052000000000000005, 0.1, 0.09504846320134738,
                           0.0811745653949763, 0.06112620219362893, 0.03887419780637107,
                           0.0188258346050237, 0.004951936798652629, 4e-07}));
  EXPECT_TRUE(near(s.momenta, {0.95, 0.8999999999999999, 0.85, 0.854951556604879,
                               0.8688255099070633, 0.8888739533021842, 0.9111260466978157,
                               0.9311744900929366, 0.945048443395121, 0.95}));
  EXPECT_EQ(sched.total_steps(), 10);
  EXPECT_EQ(sched.last_epoch(), 10);  // the last step torch allows
  EXPECT_THROW(sched.step(), Error);
}

TEST(LRScheduler, OneCycleLRThreePhaseCyclesAdamBeta1) {
  // seq(adam, lambda o: S.OneCycleLR(o, max_lr=0.01, total_steps=10, three_phase=True),
  //     key='betas')
  Fixture f;
  optim::OneCycleLR sched(f.adam, {.max_lr = {0.01}, .total_steps = 10, .three_phase = true});
  const Sequence s = record(f.adam, sched, 10, "beta1");
  EXPECT_TRUE(near(s.lrs, {0.0003999999999999993, 0.0052, 0.01, 0.005200000000000001, 0.0004,
                           0.00036180721853510203, 0.000261817218535102, 0.00013822278146489805,
                           3.823278146489804e-05, 4e-08}));
  EXPECT_TRUE(near(s.momenta, {0.95, 0.8999999999999999, 0.85, 0.8999999999999999, 0.95, 0.95, 0.95,
                               0.95, 0.95, 0.95}));
  EXPECT_EQ(f.adam.options().betas[1], 0.999);  // beta2 untouched
}

TEST(LRScheduler, OneCycleLRLinearEpochsWithoutMomentum) {
  // seq(sgd, lambda o: S.OneCycleLR(o, max_lr=1.0, epochs=2, steps_per_epoch=6,
  //     pct_start=0.25, anneal_strategy='linear', cycle_momentum=False, div_factor=10.,
  //     final_div_factor=100.), n=12)
  Fixture f;
  optim::OneCycleLR sched(f.sgd, {.max_lr = {1.0},
                                  .epochs = 2,
                                  .steps_per_epoch = 6,
                                  .pct_start = 0.25,
                                  .anneal_strategy = optim::AnnealStrategy::Linear,
                                  .cycle_momentum = false,
                                  .div_factor = 10.0,
                                  .final_div_factor = 100.0});
  EXPECT_TRUE(
      near(record(f.sgd, sched, 12).lrs,
           {0.1, 0.55, 1.0, 0.889, 0.778, 0.667, 0.556, 0.44499999999999995, 0.3340000000000001,
            0.22299999999999998, 0.1120000000000001, 0.0010000000000000009},
           1e-12));
  // Stepping to total_steps runs the last phase past its end, to a negative rate, as in torch.
  EXPECT_NEAR(f.sgd.lr(), -0.11, 1e-12);
  EXPECT_EQ(f.sgd.options().momentum, 0.9);  // not cycled
}

TEST(LRScheduler, OneCycleLRChecksItsArguments) {
  Fixture f;
  EXPECT_THROW(optim::OneCycleLR(f.sgd, {.max_lr = {0.1}}), Error);  // no length
  EXPECT_THROW(optim::OneCycleLR(f.sgd, {.max_lr = {0.1, 0.2}, .total_steps = 5}), Error);
  EXPECT_THROW(optim::OneCycleLR(f.sgd, {.max_lr = {0.1}, .total_steps = 5, .pct_start = 2}),
               Error);
}

TEST(LRScheduler, PerGroupBaseRates) {
  Tensor a = zeros({1}, {.requires_grad = true}), b = zeros({1}, {.requires_grad = true});
  optim::SGD opt(std::vector<optim::ParamGroup<optim::SGDOptions>>{
      {.params = {a}, .options = {.lr = 0.1}}, {.params = {b}, .options = {.lr = 0.02}}});
  optim::StepLR sched(opt, 1, 0.5);
  sched.step();
  EXPECT_EQ(sched.get_last_lr(), (std::vector<double>{0.05, 0.01}));
  EXPECT_EQ(sched.base_lrs(), (std::vector<double>{0.1, 0.02}));
  optim::OneCycleLR cycle(opt, {.max_lr = {1.0, 0.5}, .total_steps = 4});
  EXPECT_TRUE(near(cycle.get_last_lr(), {1.0 / 25, 0.5 / 25}));
}

// Steps a schedule 4 times, saves optimizer and schedule, loads both into fresh ones (made with
// other settings), and checks the next 6 rates and momenta are identical.
template <typename MakeSched>
void expect_resume_identical(const MakeSched& make_sched, const std::string& momentum) {
  Tensor pa = zeros({1}, {.requires_grad = true}), pb = zeros({1}, {.requires_grad = true});
  optim::SGD opt_a({pa}, {.lr = 0.1, .momentum = 0.9});
  auto sched_a = make_sched(opt_a, 0);
  record(opt_a, *sched_a, 4, momentum);
  const optim::SavedState opt_state = opt_a.state_dict();
  const optim::SavedState sched_state = sched_a->state_dict();

  optim::SGD opt_b({pb}, {.lr = 0.7, .momentum = 0.5});
  auto sched_b = make_sched(opt_b, 1);
  opt_b.load_state_dict(opt_state);
  sched_b->load_state_dict(sched_state);
  EXPECT_EQ(sched_b->last_epoch(), 4);
  EXPECT_EQ(sched_b->get_last_lr(), sched_a->get_last_lr());
  const Sequence a = record(opt_a, *sched_a, 6, momentum);
  const Sequence b = record(opt_b, *sched_b, 6, momentum);
  EXPECT_EQ(a.lrs, b.lrs);
  EXPECT_EQ(a.momenta, b.momenta);
}

TEST(LRScheduler, ResumeFromStateDictContinuesIdentically) {
  // Each maker builds the schedule with settings that differ when `variant` is 1.
  expect_resume_identical(
      [](Optimizer& o, int variant) {
        return std::make_unique<optim::StepLR>(o, 3 + variant, 0.5 - 0.1 * variant);
      },
      "");
  expect_resume_identical(
      [](Optimizer& o, int variant) {
        return std::make_unique<optim::CosineAnnealingLR>(o, 4 + variant, 0.01);
      },
      "");
  expect_resume_identical(
      [](Optimizer& o, int variant) {
        return std::make_unique<optim::LinearWarmup>(
            o, optim::LinearWarmupOptions{.start_factor = 0.2, .total_iters = 6 - variant});
      },
      "");
  expect_resume_identical(
      [](Optimizer& o, int variant) {
        return std::make_unique<optim::OneCycleLR>(
            o, optim::OneCycleLROptions{.max_lr = {0.5 + variant},
                                        .total_steps = 12 + variant,
                                        .three_phase = variant == 0});
      },
      "momentum");
}

TEST(LRScheduler, LoadStateDictChecksTheType) {
  Fixture f;
  optim::StepLR step(f.sgd, 2);
  optim::CosineAnnealingLR cosine(f.sgd, 5);
  EXPECT_THROW(cosine.load_state_dict(step.state_dict()), Error);
  const optim::SavedState s = step.state_dict();
  EXPECT_EQ(s.type, "StepLR");
  EXPECT_EQ(s.scalar("step_size"), 2.0);
  EXPECT_EQ(s.scalar("gamma"), 0.1);
  EXPECT_EQ(s.scalar("last_epoch"), 0.0);
  EXPECT_EQ(s.scalar("base_lrs.0"), 0.1);
}

}  // namespace
}  // namespace tandem
