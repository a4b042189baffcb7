// Conv2d: parameter shapes and checks, PyTorch's default initialisation, forward via conv2d.
#include "tandem/nn/modules/conv.h"

#include <cmath>

#include "tandem/autograd/functions.h"
#include "tandem/nn/init.h"
#include "tandem/tensor/factories.h"

namespace tandem::nn {

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size, Size2 stride,
               Size2 padding)
    : Conv2d(Conv2dOptions{.in_channels = in_channels,
                           .out_channels = out_channels,
                           .kernel_size = kernel_size,
                           .stride = stride,
                           .padding = padding}) {}

Conv2d::Conv2d(const Conv2dOptions& o) : options(o) {
  TANDEM_CHECK(o.in_channels > 0 && o.out_channels > 0, "Conv2d: channels must be positive, got ",
               "in_channels=", o.in_channels, " out_channels=", o.out_channels);
  TANDEM_CHECK(o.kernel_size.h > 0 && o.kernel_size.w > 0, "Conv2d: kernel_size ", o.kernel_size,
               " must be positive");
  TANDEM_CHECK(o.stride.h > 0 && o.stride.w > 0, "Conv2d: stride ", o.stride, " must be positive");
  TANDEM_CHECK(o.padding.h >= 0 && o.padding.w >= 0, "Conv2d: padding ", o.padding,
               " must be non-negative");
  TANDEM_CHECK(o.dilation.h > 0 && o.dilation.w > 0, "Conv2d: dilation ", o.dilation,
               " must be positive");
  TANDEM_CHECK(o.groups > 0 && o.in_channels % o.groups == 0 && o.out_channels % o.groups == 0,
               "Conv2d: groups=", o.groups, " must divide in_channels=", o.in_channels,
               " and out_channels=", o.out_channels);
  weight = register_parameter("weight", empty({o.out_channels, o.in_channels / o.groups,
                                               o.kernel_size.h, o.kernel_size.w}));
  bias = register_parameter("bias", o.bias ? empty({o.out_channels}) : Tensor());
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, {.a = std::sqrt(5.0)});
  if (bias.defined()) {
    const auto fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  TANDEM_CHECK(x.dim() == 4 && x.size(1) == options.in_channels, "Conv2d(", options.in_channels,
               ", ", options.out_channels, "): expected input (N, ", options.in_channels,
               ", H, W), got ", show(x.shape()));
  return tandem::conv2d(x, weight, bias,
                        {.stride = options.stride.array(),
                         .padding = options.padding.array(),
                         .dilation = options.dilation.array(),
                         .groups = options.groups});
}

}  // namespace tandem::nn
