// Pooling modules: option checks and the mapping onto the pooling functions' parameters.
#include "tandem/nn/modules/pooling.h"

#include "tandem/autograd/functions.h"

namespace tandem::nn {
namespace {

void check_window(const char* module, Size2 kernel, Size2 stride, Size2 padding) {
  TANDEM_CHECK(kernel.h > 0 && kernel.w > 0, module, ": kernel_size ", kernel, " must be positive");
  TANDEM_CHECK(stride.h > 0 && stride.w > 0, module, ": stride ", stride, " must be positive");
  TANDEM_CHECK(
      padding.h >= 0 && padding.w >= 0 && 2 * padding.h <= kernel.h && 2 * padding.w <= kernel.w,
      module, ": padding ", padding, " should be at most half of kernel_size ", kernel);
}

void check_input(const char* module, const Tensor& x) {
  TANDEM_CHECK(x.dim() == 4, module, ": expected input (N, C, H, W), got ", show(x.shape()));
}

}  // namespace

MaxPool2d::MaxPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding)
    : MaxPool2d(
          MaxPool2dOptions{.kernel_size = kernel_size, .stride = stride, .padding = padding}) {}

MaxPool2d::MaxPool2d(const MaxPool2dOptions& o) : options(o) {
  check_window("MaxPool2d", o.kernel_size, o.stride.value_or(o.kernel_size), o.padding);
}

ops::Pool2dParams MaxPool2d::params() const {
  return {.kernel = options.kernel_size.array(),
          .stride = options.stride.value_or(options.kernel_size).array(),
          .padding = options.padding.array(),
          .ceil_mode = options.ceil_mode};
}

Tensor MaxPool2d::forward(const Tensor& x) {
  check_input("MaxPool2d", x);
  return tandem::max_pool2d(x, params());
}

AvgPool2d::AvgPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding)
    : AvgPool2d(
          AvgPool2dOptions{.kernel_size = kernel_size, .stride = stride, .padding = padding}) {}

AvgPool2d::AvgPool2d(const AvgPool2dOptions& o) : options(o) {
  check_window("AvgPool2d", o.kernel_size, o.stride.value_or(o.kernel_size), o.padding);
}

ops::Pool2dParams AvgPool2d::params() const {
  return {.kernel = options.kernel_size.array(),
          .stride = options.stride.value_or(options.kernel_size).array(),
          .padding = options.padding.array(),
          .ceil_mode = options.ceil_mode,
          .count_include_pad = options.count_include_pad};
}

Tensor AvgPool2d::forward(const Tensor& x) {
  check_input("AvgPool2d", x);
  return tandem::avg_pool2d(x, params());
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  TANDEM_CHECK(x.dim() == 4, "AdaptiveAvgPool2d", output_size,
               ": expected input (N, C, H, W), got ", show(x.shape()));
  TANDEM_CHECK(output_size.h > 0 && output_size.w > 0, "AdaptiveAvgPool2d: output_size ",
               output_size, " must be positive");
  return tandem::adaptive_avg_pool2d(x, output_size.array());
}

}  // namespace tandem::nn
