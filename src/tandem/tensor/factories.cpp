// Factories. Values are produced on the host and copied when another device is asked for; zeros
// are set where the tensor lives.
#include "tandem/tensor/factories.h"

#include <cmath>
#include <cstring>

#include "tandem/base/dispatch.h"
#include "tandem/device/allocator.h"

namespace tandem {
namespace {

Tensor host_empty(const Shape& shape, DType dtype) {
  for (auto d : shape) {
    TANDEM_CHECK(d >= 0, "empty: negative dimension in shape ", show(shape));
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(
      static_cast<std::size_t>(numel(shape)) * element_size(dtype), kCPU);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

// Fills a new host tensor with gen(i) for each element i, then moves it where it belongs.
template <typename G>
Tensor generate(const Shape& shape, const TensorOptions& options, G&& gen) {
  Tensor t = host_empty(shape, options.dtype);
  visit_dtype(options.dtype, [&]<typename T>() {
    T* p = static_cast<T*>(t.raw_data());
    const std::int64_t n = t.numel();
    for (std::int64_t i = 0; i < n; ++i) p[i] = from_double<T>(gen(i));
  });
  Tensor out = copy_to(t, options.device);
  if (options.requires_grad) out.set_requires_grad(true);
  return out;
}

}  // namespace

Tensor empty(const Shape& shape, const TensorOptions& options) {
  Tensor t;
  if (options.device.is_cpu()) {
    t = host_empty(shape, options.dtype);
  } else {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = std::make_shared<Storage>(
        static_cast<std::size_t>(numel(shape)) * element_size(options.dtype), options.device);
    impl->shape = shape;
    impl->strides = contiguous_strides(shape);
    impl->dtype = options.dtype;
    t = Tensor(std::move(impl));
  }
  if (options.requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor zeros(const Shape& shape, const TensorOptions& options) {
  // All-zero bits are 0 in every dtype: a memset on the host, queued on the device elsewhere.
  if (options.device.is_cpu()) {
    Tensor t = host_empty(shape, options.dtype);
    if (t.nbytes()) std::memset(t.raw_data(), 0, t.nbytes());
    if (options.requires_grad) t.set_requires_grad(true);
    return t;
  }
  Tensor t = empty(shape, {.dtype = options.dtype, .device = options.device});
  device_zero(options.device, t.raw_data(), t.nbytes());
  if (options.requires_grad) t.set_requires_grad(true);
  return t;
}

Tensor full(const Shape& shape, double value, const TensorOptions& options) {
  return generate(shape, options, [value](std::int64_t) { return value; });
}

Tensor ones(const Shape& shape, const TensorOptions& options) { return full(shape, 1.0, options); }

Tensor arange(double start, double end, double step, const TensorOptions& options) {
  TANDEM_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
               "arange: invalid range start=", start, " end=", end, " step=", step);
  const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((end - start) / step)));
  return generate({n}, options, [&](std::int64_t i) { return start + step * static_cast<double>(i); });
}

Tensor empty_like(const Tensor& x) { return empty(x.shape(), {.dtype = x.dtype(), .device = x.device()}); }
Tensor zeros_like(const Tensor& x) { return zeros(x.shape(), {.dtype = x.dtype(), .device = x.device()}); }
Tensor ones_like(const Tensor& x) { return ones(x.shape(), {.dtype = x.dtype(), .device = x.device()}); }

Tensor rand(const Shape& shape, const TensorOptions& options, Generator* generator) {
  return uniform(shape, 0.0, 1.0, options, generator);
}

Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& options,
               Generator* generator) {
  Generator& g = generator ? *generator : default_generator();
  const bool dbl = options.dtype == DType::Float64;
  return generate(shape, options, [&](std::int64_t) {
    const double u = dbl ? g.uniform_double() : static_cast<double>(g.uniform());
    return low + (high - low) * u;
  });
}

Tensor randn(const Shape& shape, const TensorOptions& options, Generator* generator) {
  Generator& g = generator ? *generator : default_generator();
  return generate(shape, options, [&](std::int64_t) { return static_cast<double>(g.normal()); });
}

Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape,
               const TensorOptions& options, Generator* generator) {
  Generator& g = generator ? *generator : default_generator();
  return generate(shape, options,
                  [&](std::int64_t) { return static_cast<double>(g.randint(low, high)); });
}

template <typename V>
static Tensor from_values(const std::vector<V>& values, const Shape& shape,
                          const TensorOptions& options) {
  TANDEM_CHECK(static_cast<std::int64_t>(values.size()) == numel(shape), "from_vector: ",
               values.size(), " values for shape ", show(shape));
  return generate(shape, options, [&](std::int64_t i) {
    return static_cast<double>(values[static_cast<std::size_t>(i)]);
  });
}

Tensor from_vector(const std::vector<double>& v, const Shape& s, const TensorOptions& o) {
  return from_values(v, s, o);
}
Tensor from_vector(const std::vector<float>& v, const Shape& s, const TensorOptions& o) {
  return from_values(v, s, o);
}
Tensor from_vector(const std::vector<std::int64_t>& v, const Shape& s, const TensorOptions& o) {
  return from_values(v, s, o);
}

Tensor from_host(const void* data, DType dtype, const Shape& shape, Device device) {
  Tensor t = host_empty(shape, dtype);
  if (t.nbytes()) std::memcpy(t.raw_data(), data, t.nbytes());
  return copy_to(t, device);
}

Tensor scalar_tensor(double value, const TensorOptions& options) {
  return full({}, value, options);
}

}  // namespace tandem
