// Tensor factories: empty, zeros, ones, full, arange, rand/randn/randint from a seeded generator,
// and tensors from host values.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/base/rng.h"
#include "tandem/tensor/tensor.h"

namespace tandem {

Tensor empty(const Shape& shape, const TensorOptions& options = {});
Tensor zeros(const Shape& shape, const TensorOptions& options = {});
Tensor ones(const Shape& shape, const TensorOptions& options = {});
Tensor full(const Shape& shape, double value, const TensorOptions& options = {});
Tensor arange(double start, double end, double step = 1.0, const TensorOptions& options = {});
Tensor empty_like(const Tensor& x);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);

// Uniform [low, high), standard normal, and integers in [low, high); `generator` defaults to
// the process-wide one.
Tensor rand(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& options = {},
               Generator* generator = nullptr);
Tensor randn(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape,
               const TensorOptions& options = {.dtype = DType::Int64},
               Generator* generator = nullptr);

// A tensor holding copies of `values` (converted to options.dtype) with the given shape.
Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                   const TensorOptions& options = {});
Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                   const TensorOptions& options = {});
Tensor from_vector(const std::vector<std::int64_t>& values, const Shape& shape,
                   const TensorOptions& options = {.dtype = DType::Int64});
// Copies nbytes of host memory holding elements of `dtype`.
Tensor from_host(const void* data, DType dtype, const Shape& shape, Device device = kCPU);
// A scalar (0-d) tensor.
Tensor scalar_tensor(double value, const TensorOptions& options = {});

}  // namespace tandem
