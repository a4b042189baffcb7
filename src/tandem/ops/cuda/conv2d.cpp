// 2-D convolution on a GPU through cuDNN's convolution API: forward (+ bias by cudnnAddTensor),
// backward data, backward filter (+ bias gradient by cudnnConvolutionBackwardBias); stride,
// padding, dilation and groups. float32 in full float32 precision (FMA math, never TF32, so that
// results match the CPU's), float64, and bfloat16 on tensor cores (float32 accumulation, no bias:
// autocast adds it in float32). Each algorithm is chosen once per (direction, shapes,
// parameters, dtype, GPU, determinism) and cached: under ops::deterministic_algorithms() (the
// default) the fastest of those that sum in a fixed order, else the fastest of all (cuDNN's
// atomic-add gradients included); by timing every algorithm on the
// GPU (cuDNN's Find, as PyTorch's cudnn.benchmark; the heuristics' first picks can be many times
// slower), or from cuDNN's heuristics alone with TANDEM_CONV_ALGORITHMS=heuristic, and always
// while a CUDA graph is being captured (timing runs cannot be captured).
// x (N, C, H, W), w (K, C/G, R, S), b (K), y (N, K, P, Q); G groups.
#include <cudnn.h>

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "tandem/base/check.h"
#include "tandem/device/cuda/check.h"
#include "tandem/ops/cuda/cuda_ops.h"
#include "tandem/ops/cuda/handles.h"
#include "tandem/ops/cuda/launch.cuh"
#include "tandem/ops/determinism.h"
#include "tandem/ops/geometry.h"

namespace tandem::ops::cuda {
namespace {

// The most scratch memory an algorithm may ask for; a hungrier one is passed over.
constexpr std::size_t kMaxWorkspace = std::size_t{512} << 20;

void check_floating(const char* op, DType dtype) {
  TANDEM_CHECK(dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16, op,
               ": expected float32, float64 or bfloat16 tensors, got ", dtype);
}

int as_int(std::int64_t v, const char* op) {
  TANDEM_CHECK(v >= 0 && v <= INT_MAX, op, ": size ", v, " is out of cuDNN's int range");
  return static_cast<int>(v);
}

cudnnDataType_t cudnn_dtype(DType dtype) {
  switch (dtype) {
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

// What cuDNN accumulates in: float64 for float64 data, float32 otherwise (bfloat16 included).
cudnnDataType_t compute_dtype(DType dtype) {
  return dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

// The scaling factors cuDNN reads: double for double data, float otherwise.
struct Scalars {
  float f_one = 1.0f, f_zero = 0.0f;
  double d_one = 1.0, d_zero = 0.0;
  bool is_double;
  explicit Scalars(DType dtype) : is_double(dtype == DType::Float64) {}
  const void* one() const { return is_double ? static_cast<const void*>(&d_one) : &f_one; }
  const void* zero() const { return is_double ? static_cast<const void*>(&d_zero) : &f_zero; }
};

// ---- descriptors ------------------------------------------------------------------------------

class TensorDesc {
 public:
  TensorDesc(DType dtype, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
             const char* op) {
    TANDEM_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    // From here on the destructor must run if a check throws.
    try {
      TANDEM_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, cudnn_dtype(dtype),
                                                    as_int(n, op), as_int(c, op), as_int(h, op),
                                                    as_int(w, op)));
    } catch (...) {
      (void)cudnnDestroyTensorDescriptor(desc_);
      throw;
    }
  }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(desc_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc(DType dtype, const Shape& w, const char* op) {
    TANDEM_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
    try {
      TANDEM_CUDNN_CHECK(cudnnSetFilter4dDescriptor(desc_, cudnn_dtype(dtype), CUDNN_TENSOR_NCHW,
                                                    as_int(w[0], op), as_int(w[1], op),
                                                    as_int(w[2], op), as_int(w[3], op)));
    } catch (...) {
      (void)cudnnDestroyFilterDescriptor(desc_);
      throw;
    }
  }
  ~FilterDesc() { (void)cudnnDestroyFilterDescriptor(desc_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

// float32 is restricted to FMA kernels (CUDNN_DEFAULT_MATH would allow TF32 tensor cores on
// Ampere and later); float64 tensor-core kernels compute in full double precision; bfloat16 is
// for tensor cores.
cudnnMathType_t default_math(DType dtype) {
  if (dtype == DType::BFloat16) return CUDNN_TENSOR_OP_MATH;
  return dtype == DType::Float32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

class ConvDesc {
 public:
  ConvDesc(DType dtype, const Conv2dParams& p, const char* op) {
    TANDEM_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
    try {
      TANDEM_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
          desc_, as_int(p.padding[0], op), as_int(p.padding[1], op), as_int(p.stride[0], op),
          as_int(p.stride[1], op), as_int(p.dilation[0], op), as_int(p.dilation[1], op),
          CUDNN_CROSS_CORRELATION, compute_dtype(dtype)));
      TANDEM_CUDNN_CHECK(cudnnSetConvolutionGroupCount(desc_, as_int(p.groups, op)));
      TANDEM_CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, default_math(dtype)));
    } catch (...) {
      (void)cudnnDestroyConvolutionDescriptor(desc_);
      throw;
    }
  }
  ~ConvDesc() { (void)cudnnDestroyConvolutionDescriptor(desc_); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }
  void set_math(cudnnMathType_t math) const {
    TANDEM_CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, math));
  }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

// Everything one convolution needs described: x, w, y (or their gradients) and the convolution.
struct ConvSetup {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  ConvSetup(DType dtype, const Shape& xs, const Shape& ws, const Shape& ys, const Conv2dParams& p,
            const char* op)
      : x(dtype, xs[0], xs[1], xs[2], xs[3], op),
        y(dtype, ys[0], ys[1], ys[2], ys[3], op),
        w(dtype, ws, op),
        conv(dtype, p, op) {
    // cuDNN must see the output shape tandem computed (conv2d_output_shape).
    int n = 0, k = 0, oh = 0, ow = 0;
    TANDEM_CUDNN_CHECK(
        cudnnGetConvolution2dForwardOutputDim(conv.get(), x.get(), w.get(), &n, &k, &oh, &ow));
    TANDEM_CHECK(n == ys[0] && k == ys[1] && oh == ys[2] && ow == ys[3], op,
                 ": cuDNN computes the output (", n, ", ", k, ", ", oh, ", ", ow, "), expected ",
                 show(ys));
  }
};

// ---- algorithm choice, cached -----------------------------------------------------------------

enum class Direction { Forward, BackwardData, BackwardFilter };

struct AlgoKey {
  Direction direction;
  int device;
  DType dtype;
  std::array<std::int64_t, 4> x, w;
  std::array<std::int64_t, 2> stride, padding, dilation;
  std::int64_t groups;
  bool deterministic;  // chosen under ops::deterministic_algorithms()
  auto fields() const {
    return std::tie(direction, device, dtype, x, w, stride, padding, dilation, groups,
                    deterministic);
  }
  bool operator<(const AlgoKey& other) const { return fields() < other.fields(); }
};

AlgoKey key_of(Direction direction, int device, DType dtype, const Shape& x, const Shape& w,
               const Conv2dParams& p) {
  return AlgoKey{.direction = direction,
                 .device = device,
                 .dtype = dtype,
                 .x = {x[0], x[1], x[2], x[3]},
                 .w = {w[0], w[1], w[2], w[3]},
                 .stride = p.stride,
                 .padding = p.padding,
                 .dilation = p.dilation,
                 .groups = p.groups,
                 .deterministic = deterministic_algorithms()};
}

struct Choice {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
};

std::mutex cache_mutex;
std::map<AlgoKey, Choice>& algo_cache() {
  static std::map<AlgoKey, Choice> cache;
  return cache;
}

// Whether a heuristic result's math type keeps the dtype's precision.
bool math_ok(DType dtype, cudnnMathType_t math) {
  if (dtype == DType::Float32) return math == CUDNN_FMA_MATH;
  return math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The first usable result (cuDNN lists them best first): supported, precise enough, and with a
// workspace (queried with the result's math type set on conv) within kMaxWorkspace; under
// `deterministic`, deterministic ones first. workspace_of(algo) returns the bytes, or nothing
// when cuDNN refuses the combination.
template <typename Perf, typename WorkspaceOf>
std::optional<Choice> pick(const Perf* perf, int count, DType dtype, bool deterministic,
                           const ConvDesc& conv, WorkspaceOf workspace_of) {
  for (const bool deterministic_only : {deterministic, false}) {
    for (int i = 0; i < count; ++i) {
      const Perf& r = perf[i];
      if (r.status != CUDNN_STATUS_SUCCESS) continue;
      if (deterministic_only && r.determinism != CUDNN_DETERMINISTIC) continue;
      if (!math_ok(dtype, r.mathType) || r.memory > kMaxWorkspace) continue;
      conv.set_math(r.mathType);
      const std::optional<std::size_t> bytes = workspace_of(r.algo);
      if (!bytes || *bytes > kMaxWorkspace) continue;
      return Choice{static_cast<int>(r.algo), r.mathType, *bytes};
    }
  }
  conv.set_math(default_math(dtype));
  return std::nullopt;
}

// The first of `fallbacks` that cuDNN accepts for this convolution, in the dtype's default math;
// an error naming the shapes when it accepts none.
template <typename Algo, typename WorkspaceOf>
Choice first_usable(std::initializer_list<Algo> fallbacks, WorkspaceOf workspace_of,
                    const AlgoKey& key, const char* op, const char* direction) {
  for (const Algo fallback : fallbacks) {
    const std::optional<std::size_t> bytes = workspace_of(fallback);
    if (bytes) return Choice{static_cast<int>(fallback), default_math(key.dtype), *bytes};
  }
  TANDEM_FAIL(op, ": cuDNN offers no ", direction, " algorithm for input ",
              show(Shape(key.x.begin(), key.x.end())), " and weight ",
              show(Shape(key.w.begin(), key.w.end())));
}

// Whether algorithms are chosen by timing them (the default) rather than by cuDNN's heuristics:
// TANDEM_CONV_ALGORITHMS=heuristic (or measure), read once.
bool measure_algorithms() {
  static const bool measure = [] {
    const char* v = std::getenv("TANDEM_CONV_ALGORITHMS");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "measure") == 0) return true;
    TANDEM_CHECK(std::strcmp(v, "heuristic") == 0, "TANDEM_CONV_ALGORITHMS=", v,
                 ": expected measure or heuristic");
    return false;
  }();
  return measure;
}

// Whether algorithms may be timed now: not while the handle's stream is capturing a CUDA graph.
bool may_time(cudnnHandle_t handle) {
  if (!measure_algorithms()) return false;
  cudaStream_t stream = nullptr;
  TANDEM_CUDNN_CHECK(cudnnGetStream(handle, &stream));
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TANDEM_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status == cudaStreamCaptureStatusNone;
}

// The fastest usable algorithm (as pick) by cuDNN's timing, `find` calling its Find function with
// room for `room` results; nothing when not timing (may_time), or where cuDNN cannot time them (no
// memory for its trial buffers: the heuristics decide then).
template <typename Perf, typename Find, typename WorkspaceOf>
std::optional<Choice> timed_choice(cudnnHandle_t handle, const AlgoKey& key, const ConvDesc& conv,
                                   WorkspaceOf workspace_of, Find find) {
  if (!may_time(handle)) return std::nullopt;
  std::array<Perf, 16> perf{};  // more than any direction's algorithm count
  int count = 0;
  if (find(static_cast<int>(perf.size()), &count, perf.data()) != CUDNN_STATUS_SUCCESS) {
    (void)cudaGetLastError();  // its trial allocations may have failed: not sticky
    return std::nullopt;
  }
  return pick(perf.data(), count, key.dtype, key.deterministic, conv, workspace_of);
}

// The cached choice for key, or the one `choose` makes (outside the lock; a racing thread's
// equal choice is dropped).
template <typename Choose>
Choice cached_choice(const AlgoKey& key, Choose choose) {
  {
    const std::lock_guard<std::mutex> lock(cache_mutex);
    const auto it = algo_cache().find(key);
    if (it != algo_cache().end()) return it->second;
  }
  const Choice made = choose();
  const std::lock_guard<std::mutex> lock(cache_mutex);
  return algo_cache().emplace(key, made).first->second;
}

Choice forward_choice(cudnnHandle_t handle, const ConvSetup& s, const AlgoKey& key,
                      const char* op) {
  return cached_choice(key, [&] {
    auto workspace_of = [&](cudnnConvolutionFwdAlgo_t algo) -> std::optional<std::size_t> {
      std::size_t bytes = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(handle, s.x.get(), s.w.get(), s.conv.get(),
                                                  s.y.get(), algo,
                                                  &bytes) != CUDNN_STATUS_SUCCESS) {
        return std::nullopt;
      }
      return bytes;
    };
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
    int count = 0;
    if (auto c = timed_choice<cudnnConvolutionFwdAlgoPerf_t>(
            handle, key, s.conv, workspace_of,
            [&](int room, int* found, cudnnConvolutionFwdAlgoPerf_t* results) {
              return cudnnFindConvolutionForwardAlgorithm(
                  handle, s.x.get(), s.w.get(), s.conv.get(), s.y.get(), room, found, results);
            })) {
      return *c;
    }
    TANDEM_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        handle, s.x.get(), s.w.get(), s.conv.get(), s.y.get(), static_cast<int>(perf.size()),
        &count, perf.data()));
    if (auto c = pick(perf.data(), count, key.dtype, key.deterministic, s.conv, workspace_of))
      return *c;
    // Implicit GEMM needs no workspace and handles every configuration.
    const auto fallback = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    const std::optional<std::size_t> bytes = workspace_of(fallback);
    TANDEM_CHECK(bytes.has_value(), op, ": cuDNN offers no forward algorithm for input ",
                 show(Shape(key.x.begin(), key.x.end())), " and weight ",
                 show(Shape(key.w.begin(), key.w.end())));
    return Choice{static_cast<int>(fallback), default_math(key.dtype), *bytes};
  });
}

Choice backward_data_choice(cudnnHandle_t handle, const ConvSetup& s, const AlgoKey& key,
                            const char* op) {
  return cached_choice(key, [&] {
    auto workspace_of = [&](cudnnConvolutionBwdDataAlgo_t algo) -> std::optional<std::size_t> {
      std::size_t bytes = 0;
      if (cudnnGetConvolutionBackwardDataWorkspaceSize(handle, s.w.get(), s.y.get(), s.conv.get(),
                                                       s.x.get(), algo,
                                                       &bytes) != CUDNN_STATUS_SUCCESS) {
        return std::nullopt;
      }
      return bytes;
    };
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
    int count = 0;
    if (auto c = timed_choice<cudnnConvolutionBwdDataAlgoPerf_t>(
            handle, key, s.conv, workspace_of,
            [&](int room, int* found, cudnnConvolutionBwdDataAlgoPerf_t* results) {
              return cudnnFindConvolutionBackwardDataAlgorithm(
                  handle, s.w.get(), s.y.get(), s.conv.get(), s.x.get(), room, found, results);
            })) {
      return *c;
    }
    TANDEM_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, s.w.get(), s.y.get(), s.conv.get(), s.x.get(), static_cast<int>(perf.size()),
        &count, perf.data()));
    if (auto c = pick(perf.data(), count, key.dtype, key.deterministic, s.conv, workspace_of))
      return *c;
    // ALGO_1 is deterministic; ALGO_0 (atomic adds: sums in a varying order) only if it is not.
    return first_usable({CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0},
                        workspace_of, key, op, "backward-data");
  });
}

Choice backward_filter_choice(cudnnHandle_t handle, const ConvSetup& s, const AlgoKey& key,
                              const char* op) {
  return cached_choice(key, [&] {
    auto workspace_of = [&](cudnnConvolutionBwdFilterAlgo_t algo) -> std::optional<std::size_t> {
      std::size_t bytes = 0;
      if (cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, s.x.get(), s.y.get(), s.conv.get(),
                                                         s.w.get(), algo,
                                                         &bytes) != CUDNN_STATUS_SUCCESS) {
        return std::nullopt;
      }
      return bytes;
    };
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
    int count = 0;
    if (auto c = timed_choice<cudnnConvolutionBwdFilterAlgoPerf_t>(
            handle, key, s.conv, workspace_of,
            [&](int room, int* found, cudnnConvolutionBwdFilterAlgoPerf_t* results) {
              return cudnnFindConvolutionBackwardFilterAlgorithm(
                  handle, s.x.get(), s.y.get(), s.conv.get(), s.w.get(), room, found, results);
            })) {
      return *c;
    }
    TANDEM_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, s.x.get(), s.y.get(), s.conv.get(), s.w.get(), static_cast<int>(perf.size()),
        &count, perf.data()));
    if (auto c = pick(perf.data(), count, key.dtype, key.deterministic, s.conv, workspace_of))
      return *c;
    // ALGO_1 is deterministic; ALGO_0 (atomic adds: sums in a varying order) only if it is not.
    return first_usable({CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0},
                        workspace_of, key, op, "backward-filter");
  });
}

void check_grad_out(const char* op, const Tensor& grad_out, const Shape& expected) {
  TANDEM_CHECK(grad_out.shape() == expected, op, ": grad_out ", show(grad_out.shape()),
               " does not match the convolution's output ", show(expected));
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in, const Conv2dParams& p) {
  const char* op = "conv2d";
  check_gpu_operands(op, {&x_in, &w_in, &b_in});
  check_floating(op, x_in.dtype());
  check_no_bf16_bias(op, x_in.dtype(), b_in.defined());
  const Shape y_shape = conv2d_output_shape(x_in.shape(), w_in.shape(), p);
  if (b_in.defined()) {
    TANDEM_CHECK(b_in.dim() == 1 && b_in.size(0) == y_shape[1], op, ": bias ", show(b_in.shape()),
                 " does not match weight ", show(w_in.shape()), " (", y_shape[1],
                 " output channels)");
  }
  const OnDevice on(x_in);
  Tensor x = contig(x_in), w = contig(w_in);
  Tensor y = new_like(y_shape, x);
  if (y.numel() == 0) return y;
  const DType dtype = x.dtype();
  const ConvSetup s(dtype, x.shape(), w.shape(), y_shape, p, op);
  cudnnHandle_t handle = cudnn_handle(on.device());
  const Choice c = forward_choice(
      handle, s, key_of(Direction::Forward, on.device(), dtype, x.shape(), w.shape(), p), op);
  s.conv.set_math(c.math);
  void* ws = workspace(on.device(), c.workspace);
  const Scalars k(dtype);
  TANDEM_CUDNN_CHECK(cudnnConvolutionForward(handle, k.one(), s.x.get(), x.raw_data(), s.w.get(),
                                             w.raw_data(), s.conv.get(),
                                             static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws,
                                             c.workspace, k.zero(), s.y.get(), y.raw_data()));
  if (b_in.defined()) {
    Tensor b = contig(b_in);
    const TensorDesc bd(dtype, 1, y_shape[1], 1, 1, op);
    TANDEM_CUDNN_CHECK(
        cudnnAddTensor(handle, k.one(), bd.get(), b.raw_data(), k.one(), s.y.get(), y.raw_data()));
  }
  return y;
}

Tensor conv2d_backward_input(const Tensor& grad_out_in, const Tensor& w_in, const Shape& x_shape,
                             const Conv2dParams& p) {
  const char* op = "conv2d_backward_input";
  check_gpu_operands(op, {&grad_out_in, &w_in});
  check_floating(op, w_in.dtype());
  const Shape y_shape = conv2d_output_shape(x_shape, w_in.shape(), p);
  check_grad_out(op, grad_out_in, y_shape);
  const OnDevice on(grad_out_in);
  Tensor g = contig(grad_out_in), w = contig(w_in);
  Tensor gx = new_like(x_shape, g);
  if (gx.numel() == 0) return gx;
  const DType dtype = g.dtype();
  const ConvSetup s(dtype, x_shape, w.shape(), y_shape, p, op);
  cudnnHandle_t handle = cudnn_handle(on.device());
  const Choice c = backward_data_choice(
      handle, s, key_of(Direction::BackwardData, on.device(), dtype, x_shape, w.shape(), p), op);
  s.conv.set_math(c.math);
  void* ws = workspace(on.device(), c.workspace);
  const Scalars k(dtype);
  TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardData(
      handle, k.one(), s.w.get(), w.raw_data(), s.y.get(), g.raw_data(), s.conv.get(),
      static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws, c.workspace, k.zero(), s.x.get(),
      gx.raw_data()));
  return gx;
}

void conv2d_backward_weights(const Tensor& grad_out_in, const Tensor& x_in, const Shape& w_shape,
                             const Conv2dParams& p, Tensor* grad_w, Tensor* grad_b) {
  const char* op = "conv2d_backward_weights";
  check_gpu_operands(op, {&grad_out_in, &x_in});
  check_floating(op, x_in.dtype());
  check_no_bf16_bias(op, x_in.dtype(), grad_b != nullptr);
  const Shape y_shape = conv2d_output_shape(x_in.shape(), w_shape, p);
  check_grad_out(op, grad_out_in, y_shape);
  if (!grad_w && !grad_b) return;
  const OnDevice on(grad_out_in);
  Tensor g = contig(grad_out_in);
  const DType dtype = g.dtype();
  Tensor gw = grad_w ? new_like(w_shape, g) : Tensor();
  Tensor gb = grad_b ? new_like({w_shape[0]}, g) : Tensor();
  if (g.numel() == 0) {  // an empty batch: nothing contributes
    if (gw.defined()) {
      TANDEM_CUDA_CHECK(cudaMemsetAsync(gw.raw_data(), 0, gw.nbytes(), on.stream()));
    }
    if (gb.defined()) {
      TANDEM_CUDA_CHECK(cudaMemsetAsync(gb.raw_data(), 0, gb.nbytes(), on.stream()));
    }
  } else {
    cudnnHandle_t handle = cudnn_handle(on.device());
    const Scalars k(dtype);
    const ConvSetup s(dtype, x_in.shape(), w_shape, y_shape, p, op);
    if (gw.defined()) {
      Tensor x = contig(x_in);
      const Choice c = backward_filter_choice(
          handle, s, key_of(Direction::BackwardFilter, on.device(), dtype, x.shape(), w_shape, p),
          op);
      s.conv.set_math(c.math);
      void* ws = workspace(on.device(), c.workspace);
      TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          handle, k.one(), s.x.get(), x.raw_data(), s.y.get(), g.raw_data(), s.conv.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws, c.workspace, k.zero(),
          s.w.get(), gw.raw_data()));
    }
    if (gb.defined()) {
      const TensorDesc bd(dtype, 1, w_shape[0], 1, 1, op);
      TANDEM_CUDNN_CHECK(cudnnConvolutionBackwardBias(handle, k.one(), s.y.get(), g.raw_data(),
                                                      k.zero(), bd.get(), gb.raw_data()));
    }
  }
  if (grad_w) *grad_w = gw;
  if (grad_b) *grad_b = gb;
}

}  // namespace tandem::ops::cuda
