// Conv2d: 2-D convolution over (N, C, H, W) with weight (K, C/groups, R, S) and bias (K), as
// torch.nn.Conv2d (zero padding only), initialised as PyTorch does.
#pragma once

#include <cstdint>
#include <string>

#include "tandem/nn/module.h"
#include "tandem/nn/modules/size2.h"

namespace tandem::nn {

struct Conv2dOptions {
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  Size2 kernel_size = 1;
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};

struct Conv2d : Module {
  Conv2dOptions options;
  Tensor weight;  // (out_channels, in_channels / groups, kernel_h, kernel_w)
  Tensor bias;    // (out_channels), undefined when options.bias is false

  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Size2 kernel_size, Size2 stride = 1,
         Size2 padding = 0);
  explicit Conv2d(const Conv2dOptions& options);

  // x (N, C, H, W) -> (N, K, P, Q)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  // weight ~ kaiming_uniform_(a = sqrt(5)), bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  void reset_parameters();
};

}  // namespace tandem::nn
