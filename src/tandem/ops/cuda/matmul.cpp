// Matrix products on a GPU through cuBLAS (float32 in full float32 precision, never TF32, so that
// results match the CPU's; float64; bfloat16 on tensor cores with float32 accumulation, no bias:
// autocast adds it in float32), and the linear layer built on them; the bias add and the bias
// gradient are small kernels in matmul_bias.cu. Not a cuBLASLt epilogue user (yet).
// Shapes: a (M, K) or (K, M) if trans_a, b (K, N) or (N, K) if trans_b, c (M, N); batched with a
// leading B. Linear: x (N, D_in), w (D_out, D_in), b (D_out), y (N, D_out).
//
// Row-major against cuBLAS's column-major: a row-major (R, C) matrix is the column-major (C, R)
// matrix with leading dimension C, its transpose. So C = op(A) op(B) in row-major is asked of
// cuBLAS as C^T = op(B)^T op(A)^T: B first, A second, m = N, n = M, and C^T comes out (N, M)
// column-major with ldc = N, which is C row-major. Nothing is transposed in memory.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "tandem/base/check.h"
#include "tandem/device/cuda/check.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/handles.h"
#include "tandem/ops/cuda/launch.cuh"
#include "tandem/ops/geometry.h"

namespace tandem::ops::cuda {

// matmul_bias.cu: y (N, D) += b (D) on every row; out (D) = sum over the N rows of g (N, D), each
// column summed in row order (deterministic). Queued on the current stream of the tensors' GPU.
namespace linear_bias {
void add_bias_rows(const Tensor& y, const Tensor& b);
void sum_rows(const Tensor& g, const Tensor& out);
}  // namespace linear_bias

namespace {

void check_floating(const char* op, const Tensor& t) {
  TANDEM_CHECK(
      t.dtype() == DType::Float32 || t.dtype() == DType::Float64 || t.dtype() == DType::BFloat16,
      op, ": expected a float32, float64 or bfloat16 tensor, got ", t.dtype());
}

int as_int(std::int64_t v, const char* op) {
  TANDEM_CHECK(v <= INT_MAX, op, ": dimension ", v, " is too large for cuBLAS (at most ", INT_MAX,
               ")");
  return static_cast<int>(v);
}

// c = op(a) op(b) for `batch` matrices stored one after another; a, b and c contiguous, on one
// GPU, of one dtype; m, n, k as in the header; k > 0, m*n > 0.
void gemm(const char* op, const Tensor& a, const Tensor& b, const Tensor& c, std::int64_t batch,
          std::int64_t m, std::int64_t n, std::int64_t k, bool trans_a, bool trans_b) {
  const int device = c.device().index;
  cublasHandle_t handle = cublas_handle(device);  // bound to the current stream of `device`
  // Full precision: no TF32 tensor-op math for float32 (the CPU computes in float32); for bfloat16,
  // no split-K partial sums reduced in bfloat16 (cuBLAS's default allows it): float32 throughout.
  TANDEM_CUBLAS_CHECK(cublasSetMathMode(
      handle, c.dtype() == DType::BFloat16
                  ? static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
                  : CUBLAS_DEFAULT_MATH));
  // alpha and beta below live on the host (the handle is shared: say so on every call).
  TANDEM_CUBLAS_CHECK(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
  // cuBLAS's first operand is B: op(B)^T is (N, K) column-major. B stored (K, N) row-major is
  // (N, K) column-major with ld N (no transpose); stored (N, K) it is (K, N) with ld K (transpose).
  const cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld_first = as_int(trans_b ? k : n, op);
  // The second is A: op(A)^T is (K, M). A stored (M, K) is (K, M) column-major with ld K; stored
  // (K, M) it is (M, K) with ld M (transpose).
  const cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld_second = as_int(trans_a ? m : k, op);
  const int ldc = as_int(n, op);
  const long long stride_a = m * k, stride_b = k * n, stride_c = m * n;
  const bool f64 = c.dtype() == DType::Float64;
  const cudaDataType type = f64                                ? CUDA_R_64F
                            : c.dtype() == DType::BFloat16 ? CUDA_R_16BF
                                                           : CUDA_R_32F;
  // bfloat16 operands accumulate in float32 (on tensor cores: no TF32 question arises).
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  // alpha and beta in the compute type.
  const double alpha64 = 1.0, beta64 = 0.0;
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : static_cast<const void*>(&alpha32);
  const void* beta = f64 ? static_cast<const void*>(&beta64) : static_cast<const void*>(&beta32);
  TANDEM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, op_first, op_second, as_int(n, op), as_int(m, op), as_int(k, op), alpha, b.raw_data(),
      type, ld_first, stride_b, a.raw_data(), type, ld_second, stride_a, beta, c.raw_data(), type,
      ldc, stride_c, as_int(batch, op), compute, CUBLAS_GEMM_DEFAULT));
}

Tensor contiguous_on_gpu(const Tensor& t) { return t.is_contiguous() ? t : cuda::contiguous(t); }

void zero(const Tensor& t) {
  const OnDevice on(t);
  TANDEM_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), on.stream()));
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in, bool trans_a, bool trans_b) {
  check_gpu_operands("matmul", {&a_in, &b_in});
  check_floating("matmul", a_in);
  const MatmulSizes z = matmul_sizes(a_in, b_in, trans_a, trans_b);
  const std::int64_t batch = z.batch, m = z.m, n = z.n, k = z.k;
  const OnDevice on(a_in);
  const Tensor a = contiguous_on_gpu(a_in), b = contiguous_on_gpu(b_in);
  Tensor c = new_like(z.out, a);
  if (c.numel() == 0) return c;
  if (k == 0) {
    zero(c);
    return c;
  }
  gemm("matmul", a, b, c, batch, m, n, k, trans_a, trans_b);
  return c;
}

Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  check_gpu_operands("linear", {&x_in, &w_in, &b_in});
  check_floating("linear", x_in);
  check_no_bf16_bias("linear", x_in.dtype(), b_in.defined());
  check_linear_shapes("linear", x_in, w_in);
  if (b_in.defined()) {
    TANDEM_CHECK(b_in.dim() == 1 && b_in.size(0) == w_in.size(0), "linear: bias ",
                 show(b_in.shape()), " does not match weight ", show(w_in.shape()));
  }
  // y (N, D_out) = x (N, D_in) w^T, w stored (D_out, D_in): matmul with trans_b.
  Tensor y = cuda::matmul(x_in, w_in, false, true);
  if (b_in.defined() && y.numel() > 0) linear_bias::add_bias_rows(y, contiguous_on_gpu(b_in));
  return y;
}

Tensor linear_backward_input(const Tensor& grad_out, const Tensor& w) {
  check_gpu_operands("linear_backward", {&grad_out, &w});
  TANDEM_CHECK(grad_out.dim() == 2 && w.dim() == 2 && grad_out.size(1) == w.size(0),
               "linear_backward: gradient ", show(grad_out.shape()), " does not match weight ",
               show(w.shape()));
  // grad_x (N, D_in) = g (N, D_out) w (D_out, D_in).
  return cuda::matmul(grad_out, w, false, false);
}

void linear_backward_weights(const Tensor& grad_out, const Tensor& x, Tensor* grad_w,
                             Tensor* grad_b) {
  check_gpu_operands("linear_backward", {&grad_out, &x});
  check_floating("linear_backward", grad_out);
  check_no_bf16_bias("linear_backward", grad_out.dtype(), grad_b != nullptr);
  TANDEM_CHECK(grad_out.dim() == 2 && x.dim() == 2 && grad_out.size(0) == x.size(0),
               "linear_backward: gradient ", show(grad_out.shape()), " does not match input ",
               show(x.shape()));
  // grad_w (D_out, D_in) = g^T (D_out, N) x (N, D_in): matmul with trans_a.
  if (grad_w) *grad_w = cuda::matmul(grad_out, x, /*trans_a=*/true, false);
  if (grad_b) {
    const OnDevice on(grad_out);
    const Tensor g = contiguous_on_gpu(grad_out);
    Tensor gb = new_like({g.size(1)}, g);
    if (gb.numel() > 0) linear_bias::sum_rows(g, gb);  // zeros when N == 0
    *grad_b = gb;
  }
}

}  // namespace tandem::ops::cuda
