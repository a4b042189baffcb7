// Pooling modules over (N, C, H, W): MaxPool2d, AvgPool2d (stride defaults to the kernel size, as
// torch) and AdaptiveAvgPool2d (a fixed output size whatever the input size).
#pragma once

#include <optional>
#include <string>

#include "tandem/nn/module.h"
#include "tandem/nn/modules/size2.h"
#include "tandem/ops/ops.h"

namespace tandem::nn {

struct MaxPool2dOptions {
  Size2 kernel_size = 2;
  std::optional<Size2> stride;  // defaults to kernel_size
  Size2 padding = 0;
  bool ceil_mode = false;
};

struct MaxPool2d : Module {
  MaxPool2dOptions options;

  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                     Size2 padding = 0);
  explicit MaxPool2d(const MaxPool2dOptions& options);
  // x (N, C, H, W) -> (N, C, P, Q)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  ops::Pool2dParams params() const;
};

struct AvgPool2dOptions {
  Size2 kernel_size = 2;
  std::optional<Size2> stride;  // defaults to kernel_size
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};

struct AvgPool2d : Module {
  AvgPool2dOptions options;

  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt,
                     Size2 padding = 0);
  explicit AvgPool2d(const AvgPool2dOptions& options);
  // x (N, C, H, W) -> (N, C, P, Q)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  ops::Pool2dParams params() const;
};

struct AdaptiveAvgPool2d : Module {
  Size2 output_size;

  explicit AdaptiveAvgPool2d(Size2 size) : output_size(size) {}
  // x (N, C, H, W) -> (N, C, output_size.h, output_size.w)
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
};

}  // namespace tandem::nn
