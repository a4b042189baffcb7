// The CUDA kernels behind ops.h: the same functions, same shapes and same meaning, for tensors on
// a GPU (every operand on one GPU; the work queued on that GPU's current stream, in order, without
// waiting for it). ops.h's functions call these when their first operand is on a GPU, so callers
// use ops.h; only the optimizer steps, which have no ops.h twin, are called from here directly.
// CUDA-free header. Without CUDA kernels (cuda/no_cuda.cpp) each throws "built without CUDA
// kernels". float32 everywhere; float64 where a kernel says so (the parity tests use float32).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tandem/base/rng.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/tensor.h"

namespace tandem::ops::cuda {

// Whether this build has the CUDA kernels.
bool built();

// elementwise.cu (float32, float64; binary broadcasts as on the CPU)
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor affine(const Tensor& x, double scale, double shift);
Tensor reciprocal_scaled(const Tensor& x, double numerator);
Tensor pow_scalar(const Tensor& x, double exponent);
Tensor unary(UnaryOp op, const Tensor& x);
Tensor relu_backward(const Tensor& grad_out, const Tensor& y);
Tensor gelu_backward(const Tensor& grad_out, const Tensor& x);
void add_(const Tensor& dst, const Tensor& src, double alpha);
void scale_(const Tensor& dst, double value);
void fill_(const Tensor& dst, double value);  // every dtype
Tensor equal(const Tensor& a, const Tensor& b);  // every dtype -> uint8
Tensor cast(const Tensor& x, DType dtype);      // between every pair of dtypes

// copy.cu: a contiguous copy of a strided tensor (any dtype, up to 8 dims), on the GPU; and a
// copy between two tensors of one GPU, shape and dtype, any strides (dst must not overlap itself).
Tensor contiguous(const Tensor& x);
void copy_strided(const Tensor& dst, const Tensor& src);

// reduce.cu
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim);
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim);

// matmul.cpp (cuBLASLt / cuBLAS)
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
Tensor linear_backward_input(const Tensor& grad_out, const Tensor& w);
void linear_backward_weights(const Tensor& grad_out, const Tensor& x, Tensor* grad_w,
                             Tensor* grad_b);

// conv2d.cpp (cuDNN; the algorithm chosen once per shape and cached)
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& w, const Shape& x_shape,
                             const Conv2dParams& p);
void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Shape& w_shape,
                             const Conv2dParams& p, Tensor* grad_w, Tensor* grad_b);

// pool2d.cu
Tensor max_pool2d(const Tensor& x, const Pool2dParams& p, Tensor* indices);
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& x_shape);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape, const Pool2dParams& p);
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape);

// batch_norm.cu
Tensor batch_norm_train(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const Tensor& running_mean, const Tensor& running_var, double momentum,
                        double eps, Tensor* save_mean, Tensor* save_invstd);
Tensor batch_norm_eval(const Tensor& x, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, double eps);
Tensor batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                           const Tensor& save_mean, const Tensor& save_invstd,
                           Tensor* grad_weight, Tensor* grad_bias);

// softmax.cu
Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);
Tensor softmax_backward(const Tensor& grad_out, const Tensor& y, std::int64_t dim);
Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& y, std::int64_t dim);

// cross_entropy.cu
Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing,
                     bool mean, Tensor* log_probs);
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                              const Tensor& target, double label_smoothing, bool mean);

// cat.cu
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim);

// dropout.cu: the mask drawn on the host from `generator` (the same numbers as on the CPU, so a
// seed gives the same mask on every device), copied to the GPU.
Tensor dropout_mask(const Shape& shape, double p, DType dtype, Device device, Generator& generator);

// optimizer_step.cu: one optimizer step of one float32 parameter, in place, with PyTorch's rules
// (optim/sgd.cpp and optim/adam.cpp hold the CPU loops and the options' meaning).
struct SgdStep {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
  bool first = false;  // the momentum buffer's first step: buffer = gradient
};
// momentum_buffer undefined when momentum is 0.
void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
              const SgdStep& step);

struct AdamStep {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW: p *= 1 - lr * weight_decay before the update
  bool amsgrad = false, maximize = false;
  std::int64_t step = 1;  // this step's number, from 1 (bias corrections)
};
// max_exp_avg_sq undefined unless amsgrad.
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
               const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamStep& step);

// Whole-parameter updates queued together and launched as multi-tensor kernels: one launch covers
// up to kMultiTensors parameters and kMultiBlocks chunks of kMultiChunk elements, for each run of
// consecutive updates of one kind with the same GPU, dtype and step constants (the per-element
// arithmetic is sgd_step's / adam_step's, so the results are the same bit for bit). A step with
// one launch per parameter is launch-bound for small models; this is one launch for the seed CNN.
// While a MultiTensorStep is alive it is its thread's open batch (Optimizer::step() opens one);
// flush() launches what was added. Destroyed without flush(), it drops what was added.
class MultiTensorStep {
 public:
  static constexpr int kMultiTensors = 16;
  static constexpr int kMultiBlocks = 256;
  static constexpr std::int64_t kMultiChunk = 32768;

  MultiTensorStep();
  ~MultiTensorStep();
  MultiTensorStep(const MultiTensorStep&) = delete;
  MultiTensorStep& operator=(const MultiTensorStep&) = delete;

  // The calling thread's open batch, or null.
  static MultiTensorStep* open();
  // Checked as sgd_step / adam_step check; the tensors are kept until the launch.
  void add_sgd(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
               const SgdStep& step);
  void add_adam(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamStep& step);
  void flush();
  int launches() const { return launches_; }  // kernels launched by flush() so far

 private:
  struct Entry;
  std::vector<Entry> entries_;
  MultiTensorStep* previous_ = nullptr;
  int launches_ = 0;
};

}  // namespace tandem::ops::cuda
