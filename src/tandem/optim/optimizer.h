// Optimizer: the base of SGD, Adam and AdamW. Parameters live in groups, each with its own
// hyper-parameters; per-parameter state (momentum buffers, moments, step counts) is created on a
// parameter's first update. step() runs each optimizer's fused update loop under NoGradGuard.
// Not a scheduler: lr_scheduler.h changes the groups' "lr" through set_option().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tandem/nn/module.h"
#include "tandem/tensor/tensor.h"

namespace tandem::optim {

// The saved form of an optimizer (and, with no tensors, of a scheduler), made to be written by
// the io layer as tensors plus string metadata and read back exactly.
//   type     "SGD", "Adam", "AdamW", "StepLR", ...; load_state_dict checks it.
//   scalars  numbers by dotted name, in a fixed order (booleans are 0 / 1; integers are exact).
//            Optimizers write, for each group g:   "param_groups.<g>.params"  (its parameter count)
//                                                  "param_groups.<g>.<option>" (lr, momentum, ...)
//            and for each parameter i with state:  "state.<i>.step" (Adam, AdamW)
//            Parameters are numbered 0, 1, ... across the groups in order, as torch's state_dict.
//   tensors  per-parameter buffers "state.<i>.<name>": momentum_buffer (SGD); exp_avg,
//            exp_avg_sq, max_exp_avg_sq (Adam, AdamW). Snapshots (copies), not live buffers.
struct SavedState {
  std::string type;
  std::vector<std::pair<std::string, double>> scalars;
  nn::NamedTensors tensors;

  bool has(std::string_view key) const;
  double scalar(std::string_view key) const;  // an error naming the key if it is missing
  void set(std::string key, double value);    // replaces or appends
};

// A parameter's optimizer state: updates applied so far and named buffers shaped like it.
struct ParamState {
  std::int64_t step = 0;
  nn::NamedTensors buffers;
  Tensor* find(std::string_view name);  // null when absent
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string type_name() const = 0;

  // One update of every parameter that has a gradient (parameters without one are skipped).
  // Parameters must be contiguous float32 / float64 tensors, on the CPU or a GPU (a GPU's
  // update is queued on its current stream by ops/cuda's optimizer kernels).
  void step();

  // The same update in pieces, for several threads sharing it (DataParallel's replicas):
  // prepare_step() runs step()'s checks and creates and counts every parameter's state on the
  // calling thread, and returns one RangeUpdate per parameter with a gradient, in step()'s order.
  // Each updates elements [begin, end) of its parameter; disjoint ranges of the same step may run
  // concurrently on any threads, and running all of them equals step(), bit for bit. The
  // gradients are read when a range runs; nothing may change the parameters or the optimizer
  // between prepare_step() and the last range.
  struct RangeUpdate {
    Tensor param;
    std::int64_t numel = 0;
    std::function<void(std::int64_t begin, std::int64_t end)> run;
  };
  std::vector<RangeUpdate> prepare_step();
  // Runs every update whole on the calling thread (what step() does with prepare_step()'s):
  // those of GPU parameters are queued together as multi-tensor kernels (ops/cuda).
  static void run_whole(const std::vector<RangeUpdate>& updates);
  // [begin, end) of a contiguous tensor's elements, as a 1-d view (a GPU range's operand).
  static Tensor flat_range(const Tensor& t, std::int64_t begin, std::int64_t end);
  // Drops the gradients (set_to_none, the default) or zeroes them in place.
  void zero_grad(bool set_to_none = true);

  std::size_t group_count() const { return params_.size(); }
  const std::vector<Tensor>& params(std::size_t group) const;

  // The scalar hyper-parameters of a group by torch's names (booleans as 0 / 1). Like torch's
  // param_groups, values written here are taken as given; constructors check their options.
  virtual std::vector<std::string> option_names() const = 0;
  bool has_option(std::string_view name) const;
  virtual double option(std::size_t group, std::string_view name) const = 0;
  virtual void set_option(std::size_t group, std::string_view name, double value) = 0;
  double lr(std::size_t group = 0) const { return option(group, "lr"); }
  void set_lr(std::size_t group, double lr) { set_option(group, "lr", lr); }

  // Per-parameter state; null before the parameter's first update.
  const ParamState* state(const Tensor& param) const;

  // The hyper-parameters of every group and a copy of every parameter's state (see SavedState).
  SavedState state_dict() const;
  // Restores what state_dict() saved into an optimizer of the same type over parameters of the
  // same shapes in the same group layout: the groups' hyper-parameters are replaced, and buffers
  // are copied to each parameter's device and dtype. Nothing changes when a check fails.
  void load_state_dict(const SavedState& state);

 protected:
  Optimizer() = default;
  // Appends a group of parameters (each parameter may be in only one group).
  void add_params(std::vector<Tensor> params);
  // One parameter's update of this step: param and grad are contiguous, on the CPU, of the same
  // float dtype and shape; state persists between steps. Creates and counts the state now and
  // returns the update of elements [begin, end), which reads grad's data when it runs.
  using ElementRange = std::function<void(std::int64_t begin, std::int64_t end)>;
  virtual ElementRange prepare(std::size_t group, const Tensor& param, const Tensor& grad,
                               ParamState& state) = 0;
  // The buffer names this optimizer keeps per parameter, and whether it counts steps.
  virtual std::vector<std::string> buffer_names() const = 0;
  virtual bool counts_steps() const = 0;
  // The buffer `name` of a parameter's state, created as zeros like `param` when missing (then
  // *created is set) and converted to the parameter's dtype and device if it has moved since.
  static Tensor& buffer(ParamState& state, const std::string& name, const Tensor& param,
                        bool* created = nullptr);
  // Throws naming the optimizer when `name` is not one of option_names().
  [[noreturn]] void unknown_option(std::string_view name) const;

 private:
  std::vector<std::vector<Tensor>> params_;
  std::unordered_map<const TensorImpl*, ParamState> state_;
};

// A parameter group with its options, for building optimizers group by group:
//   SGD opt({{.params = body, .options = {.lr = 0.1}}, {.params = head, .options = {.lr = 1}}});
template <typename Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

}  // namespace tandem::optim
