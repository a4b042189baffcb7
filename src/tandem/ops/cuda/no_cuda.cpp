// The CUDA kernels' entry points in a build without them (no nvcc, cuBLAS or cuDNN, or
// TANDEM_CUDA_KERNELS=OFF): each says so. No tensor can be on a GPU in such a build unless the
// device layer has CUDA; then ops on it fail here, naming the op, instead of running on the CPU.
#include "tandem/ops/cuda/cuda_ops.h"

namespace tandem::ops::cuda {
namespace {

[[noreturn]] void unavailable(const char* op) {
  TANDEM_FAIL(op, ": this tandem was built without CUDA kernels (nvcc, cuBLAS or cuDNN missing, ",
              "or TANDEM_CUDA_KERNELS=OFF), so it cannot run on a GPU");
}

}  // namespace

bool built() { return false; }

Tensor binary(BinaryOp, const Tensor&, const Tensor&) { unavailable("binary"); }
Tensor affine(const Tensor&, double, double) { unavailable("affine"); }
Tensor reciprocal_scaled(const Tensor&, double) { unavailable("reciprocal_scaled"); }
Tensor pow_scalar(const Tensor&, double) { unavailable("pow_scalar"); }
Tensor unary(UnaryOp, const Tensor&) { unavailable("unary"); }
Tensor relu_backward(const Tensor&, const Tensor&) { unavailable("relu_backward"); }
Tensor gelu_backward(const Tensor&, const Tensor&) { unavailable("gelu_backward"); }
void add_(const Tensor&, const Tensor&, double) { unavailable("add_"); }
void scale_(const Tensor&, double) { unavailable("scale_"); }
void fill_(const Tensor&, double) { unavailable("fill_"); }
Tensor equal(const Tensor&, const Tensor&) { unavailable("equal"); }
Tensor cast(const Tensor&, DType) { unavailable("cast"); }
Tensor contiguous(const Tensor&) { unavailable("contiguous"); }
void copy_strided(const Tensor&, const Tensor&) { unavailable("copy_strided"); }
Tensor sum(const Tensor&, const std::vector<std::int64_t>&, bool) { unavailable("sum"); }
Tensor argmax(const Tensor&, std::int64_t, bool) { unavailable("argmax"); }
Tensor matmul(const Tensor&, const Tensor&, bool, bool) { unavailable("matmul"); }
Tensor linear(const Tensor&, const Tensor&, const Tensor&) { unavailable("linear"); }
Tensor linear_backward_input(const Tensor&, const Tensor&) { unavailable("linear_backward_input"); }
void linear_backward_weights(const Tensor&, const Tensor&, Tensor*, Tensor*) {
  unavailable("linear_backward_weights");
}
Tensor conv2d(const Tensor&, const Tensor&, const Tensor&, const Conv2dParams&) {
  unavailable("conv2d");
}
Tensor conv2d_backward_input(const Tensor&, const Tensor&, const Shape&, const Conv2dParams&) {
  unavailable("conv2d_backward_input");
}
void conv2d_backward_weights(const Tensor&, const Tensor&, const Shape&, const Conv2dParams&,
                             Tensor*, Tensor*) {
  unavailable("conv2d_backward_weights");
}
Tensor max_pool2d(const Tensor&, const Pool2dParams&, Tensor*) { unavailable("max_pool2d"); }
Tensor max_pool2d_backward(const Tensor&, const Tensor&, const Shape&) {
  unavailable("max_pool2d_backward");
}
Tensor avg_pool2d(const Tensor&, const Pool2dParams&) { unavailable("avg_pool2d"); }
Tensor avg_pool2d_backward(const Tensor&, const Shape&, const Pool2dParams&) {
  unavailable("avg_pool2d_backward");
}
Tensor adaptive_avg_pool2d(const Tensor&, std::array<std::int64_t, 2>) {
  unavailable("adaptive_avg_pool2d");
}
Tensor adaptive_avg_pool2d_backward(const Tensor&, const Shape&) {
  unavailable("adaptive_avg_pool2d_backward");
}
Tensor batch_norm_train(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        double, double, Tensor*, Tensor*) {
  unavailable("batch_norm_train");
}
Tensor batch_norm_eval(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       double) {
  unavailable("batch_norm_eval");
}
Tensor batch_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, Tensor*, Tensor*) {
  unavailable("batch_norm_backward");
}
Tensor softmax(const Tensor&, std::int64_t) { unavailable("softmax"); }
Tensor log_softmax(const Tensor&, std::int64_t) { unavailable("log_softmax"); }
Tensor softmax_backward(const Tensor&, const Tensor&, std::int64_t) {
  unavailable("softmax_backward");
}
Tensor log_softmax_backward(const Tensor&, const Tensor&, std::int64_t) {
  unavailable("log_softmax_backward");
}
Tensor cross_entropy(const Tensor&, const Tensor&, double, bool, Tensor*) {
  unavailable("cross_entropy");
}
Tensor cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, double, bool) {
  unavailable("cross_entropy_backward");
}
Tensor cat(const std::vector<Tensor>&, std::int64_t) { unavailable("cat"); }
Tensor dropout_mask(const Shape&, double, DType, Device, Generator&) {
  unavailable("dropout_mask");
}
void sgd_step(const Tensor&, const Tensor&, const Tensor&, const SgdStep&) {
  unavailable("sgd_step");
}
void adam_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
               const AdamStep&) {
  unavailable("adam_step");
}

// No GPU parameter can exist: the batch stays empty and is never the open one.
struct MultiTensorStep::Entry {};
MultiTensorStep::MultiTensorStep() = default;
MultiTensorStep::~MultiTensorStep() = default;
MultiTensorStep* MultiTensorStep::open() { return nullptr; }
void MultiTensorStep::add_sgd(const Tensor&, const Tensor&, const Tensor&, const SgdStep&) {
  unavailable("sgd_step");
}
void MultiTensorStep::add_adam(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, const AdamStep&) {
  unavailable("adam_step");
}
void MultiTensorStep::flush() {}

}  // namespace tandem::ops::cuda
