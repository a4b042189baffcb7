// The batch transforms. Loops are plain and per sample; a batch of Fashion-MNIST takes
// microseconds, far below what training spends on it.
#include "tandem/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "tandem/data/mix.h"

namespace tandem::data {

Generator sample_generator(std::uint64_t seed, std::int64_t epoch, std::int64_t index,
                           std::uint64_t slot) {
  return Generator(mix(mix(seed, static_cast<std::uint64_t>(epoch)), slot),
                   static_cast<std::uint64_t>(index));
}

AnyTransform::AnyTransform(std::shared_ptr<const Transform> impl) : impl_(std::move(impl)) {
  TANDEM_CHECK(impl_ != nullptr, "AnyTransform: null transform");
}

namespace {

// Transforms work on host memory: the loader applies them before a batch's copy to its device.
void check_on_host(const char* transform, const Tensor& batch) {
  TANDEM_CHECK(batch.device().is_cpu(), transform, ": transforms run on the host, before a "
               "batch goes to its device; this one is on ", batch.device());
}

}  // namespace

Tensor writable(const Tensor& batch, const TransformContext& ctx) {
  if (ctx.owns_input && batch.is_contiguous()) return batch;
  Tensor out = ctx.alloc.empty(batch.shape(), batch.dtype());
  copy_into(out, batch);
  return out;
}

// ---- Compose ----

Tensor Compose::apply(const Tensor& batch, const TransformContext& ctx) const {
  Tensor x = batch;
  TransformContext step = ctx;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    step.slot = mix(ctx.slot, i + 1);
    Tensor y = steps_[i]->apply(x, step);
    // Once a step has produced new memory, later steps own it.
    if (y.storage() != batch.storage()) step.owns_input = true;
    x = std::move(y);
  }
  return x;
}

std::string Compose::name() const {
  std::string out = "Compose(";
  for (std::size_t i = 0; i < steps_.size(); ++i) out += (i ? ", " : "") + steps_[i]->name();
  return out + ")";
}

// ---- ToFloat ----

Tensor ToFloat::apply(const Tensor& batch, const TransformContext& ctx) const {
  check_on_host("ToFloat", batch);
  TANDEM_CHECK(batch.dtype() == DType::UInt8, "ToFloat: expects uint8 data, got ", batch.dtype(),
               " of shape ", show(batch.shape()));
  Tensor src = batch.is_contiguous() ? batch : contiguous_copy(batch);
  Tensor out = ctx.alloc.empty(batch.shape(), DType::Float32);
  const auto* s = src.data<std::uint8_t>();
  auto* d = out.data<float>();
  const std::int64_t n = out.numel();
  for (std::int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]) / 255.0f;
  return out;
}

// ---- Normalize ----

Normalize::Normalize(std::vector<float> mean, std::vector<float> std)
    : mean_(std::move(mean)), std_(std::move(std)) {
  TANDEM_CHECK(!mean_.empty() && mean_.size() == std_.size(), "Normalize: mean has ", mean_.size(),
               " entries and std ", std_.size(), "; they must match and be non-empty");
  for (std::size_t c = 0; c < std_.size(); ++c) {
    TANDEM_CHECK(std::isfinite(mean_[c]), "Normalize: mean[", c, "] = ", mean_[c],
                 " is not finite");
    TANDEM_CHECK(std::isfinite(std_[c]) && std_[c] > 0.0f, "Normalize: std[", c, "] = ", std_[c],
                 " must be positive and finite");
  }
}

Tensor Normalize::apply(const Tensor& batch, const TransformContext& ctx) const {
  check_on_host("Normalize", batch);
  TANDEM_CHECK(batch.dtype() == DType::Float32, "Normalize: expects float32 data (apply ToFloat ",
               "first), got ", batch.dtype());
  TANDEM_CHECK(batch.dim() >= 2, "Normalize: expects (B, C, ...) data, got shape ",
               show(batch.shape()));
  const std::int64_t channels = batch.size(1);
  const auto given = static_cast<std::int64_t>(mean_.size());
  TANDEM_CHECK(given == 1 || given == channels, "Normalize: ", given,
               " mean/std entries for data with ", channels, " channels, shape ",
               show(batch.shape()));
  Tensor out = writable(batch, ctx);
  float* d = out.data<float>();
  const std::int64_t outer = batch.size(0);
  const std::int64_t inner =
      channels ? out.numel() / std::max<std::int64_t>(outer * channels, 1) : 0;
  for (std::int64_t b = 0; b < outer; ++b) {
    for (std::int64_t c = 0; c < channels; ++c) {
      const auto k = static_cast<std::size_t>(given == 1 ? 0 : c);
      const float m = mean_[k], s = std_[k];
      float* p = d + (b * channels + c) * inner;
      for (std::int64_t i = 0; i < inner; ++i) p[i] = (p[i] - m) / s;
    }
  }
  return out;
}

std::string Normalize::name() const {
  std::ostringstream out;
  out << "Normalize(mean=[";
  for (std::size_t c = 0; c < mean_.size(); ++c) out << (c ? ", " : "") << mean_[c];
  out << "], std=[";
  for (std::size_t c = 0; c < std_.size(); ++c) out << (c ? ", " : "") << std_[c];
  out << "])";
  return out.str();
}

// ---- RandomCrop ----

RandomCrop::RandomCrop(std::int64_t height, std::int64_t width, std::int64_t padding)
    : height_(height), width_(width), padding_(padding) {
  TANDEM_CHECK(height > 0 && width > 0, "RandomCrop: size ", height, "x", width,
               " must be positive");
  TANDEM_CHECK(padding >= 0, "RandomCrop: padding ", padding, " is negative");
}

Tensor RandomCrop::apply(const Tensor& batch, const TransformContext& ctx) const {
  check_on_host("RandomCrop", batch);
  // batch: (B, C, H, W) -> out: (B, C, height_, width_)
  TANDEM_CHECK(batch.dim() == 4, "RandomCrop: expects (B, C, H, W) data, got shape ",
               show(batch.shape()));
  const std::int64_t n = batch.size(0), channels = batch.size(1), in_h = batch.size(2),
                     in_w = batch.size(3);
  const std::int64_t p = padding_;
  TANDEM_CHECK(height_ <= in_h + 2 * p && width_ <= in_w + 2 * p, "RandomCrop: a ", height_, "x",
               width_, " window does not fit a ", in_h, "x", in_w, " image padded by ", p);
  Tensor src = batch.is_contiguous() ? batch : contiguous_copy(batch);
  Tensor out = ctx.alloc.empty({n, channels, height_, width_}, batch.dtype());
  const std::size_t es = element_size(batch.dtype());
  const auto* s = static_cast<const std::uint8_t*>(src.raw_data());
  auto* d = static_cast<std::uint8_t*>(out.raw_data());
  if (p > 0) std::memset(d, 0, out.nbytes());
  for (std::int64_t b = 0; b < n; ++b) {
    Generator g = ctx.generator(static_cast<std::size_t>(b));
    const std::int64_t top = g.randint(0, in_h + 2 * p - height_ + 1);
    const std::int64_t left = g.randint(0, in_w + 2 * p - width_ + 1);
    // Output column x reads source column left + x - p; keep the part inside [0, in_w).
    const std::int64_t x_lo = std::max<std::int64_t>(0, p - left);
    const std::int64_t x_hi = std::min<std::int64_t>(width_, in_w + p - left);
    if (x_hi <= x_lo) continue;
    for (std::int64_t c = 0; c < channels; ++c) {
      for (std::int64_t y = 0; y < height_; ++y) {
        const std::int64_t sy = top + y - p;
        if (sy < 0 || sy >= in_h) continue;
        const std::int64_t src_el = ((b * channels + c) * in_h + sy) * in_w + (left + x_lo - p);
        const std::int64_t dst_el = ((b * channels + c) * height_ + y) * width_ + x_lo;
        std::memcpy(d + static_cast<std::size_t>(dst_el) * es,
                    s + static_cast<std::size_t>(src_el) * es,
                    static_cast<std::size_t>(x_hi - x_lo) * es);
      }
    }
  }
  return out;
}

std::string RandomCrop::name() const {
  return detail::concat("RandomCrop(", height_, "x", width_, ", padding=", padding_, ")");
}

// ---- RandomHorizontalFlip ----

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  TANDEM_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: probability ", p, " is outside [0, 1]");
}

namespace {

template <typename T>
void reverse_rows(void* data, std::int64_t rows, std::int64_t width) {
  T* p = static_cast<T*>(data);
  for (std::int64_t r = 0; r < rows; ++r) std::reverse(p + r * width, p + (r + 1) * width);
}

}  // namespace

Tensor RandomHorizontalFlip::apply(const Tensor& batch, const TransformContext& ctx) const {
  check_on_host("RandomHorizontalFlip", batch);
  // batch: (B, ..., W)
  TANDEM_CHECK(batch.dim() >= 2, "RandomHorizontalFlip: expects (B, ..., W) data, got shape ",
               show(batch.shape()));
  Tensor out = writable(batch, ctx);
  const std::int64_t n = out.size(0), width = out.size(-1);
  if (n == 0 || width == 0) return out;
  const std::int64_t rows = out.numel() / n / width;  // rows of one sample
  const std::size_t es = element_size(out.dtype());
  auto* base = static_cast<std::uint8_t*>(out.raw_data());
  for (std::int64_t b = 0; b < n; ++b) {
    Generator g = ctx.generator(static_cast<std::size_t>(b));
    if (!(g.uniform_double() < p_)) continue;
    void* sample = base + static_cast<std::size_t>(b * rows * width) * es;
    switch (es) {
      case 1:
        reverse_rows<std::uint8_t>(sample, rows, width);
        break;
      case 2:
        reverse_rows<std::uint16_t>(sample, rows, width);
        break;
      case 4:
        reverse_rows<std::uint32_t>(sample, rows, width);
        break;
      case 8:
        reverse_rows<std::uint64_t>(sample, rows, width);
        break;
      default:
        TANDEM_FAIL("RandomHorizontalFlip: unsupported element size ", es);
    }
  }
  return out;
}

std::string RandomHorizontalFlip::name() const {
  return detail::concat("RandomHorizontalFlip(p=", p_, ")");
}

// ---- one sample ----

Tensor apply_to_sample(const Transform& transform, const Tensor& sample, std::int64_t index,
                       std::uint64_t seed, std::int64_t epoch) {
  check_on_host(transform.name().c_str(), sample);
  Tensor src = sample.is_contiguous() ? sample : contiguous_copy(sample);
  Shape shape{1};
  shape.insert(shape.end(), src.shape().begin(), src.shape().end());
  Tensor batch = make_view(src, shape, contiguous_strides(shape), src.offset());
  const std::int64_t indices[1] = {index};
  TransformContext ctx{.indices = indices, .seed = seed, .epoch = epoch};
  Tensor out = transform.apply(batch, ctx);
  Shape result(out.shape().begin() + 1, out.shape().end());
  Strides strides(out.strides().begin() + 1, out.strides().end());
  return make_view(out, std::move(result), std::move(strides), out.offset());
}

}  // namespace tandem::data
