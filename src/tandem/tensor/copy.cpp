// Raw copies: strided → contiguous, between devices, and between dtypes; a device's strided copies
// through the kernel it registers. No autograd here.
#include <array>
#include <atomic>
#include <cstring>

#include "tandem/base/dispatch.h"
#include "tandem/device/allocator.h"
#include "tandem/tensor/factories.h"
#include "tandem/tensor/strided.h"
#include "tandem/tensor/tensor.h"

namespace tandem {
namespace {

// Per DeviceType (CPU, CUDA): the registered strided copy; the CPU's is copy_into's own loop.
constexpr std::size_t kDeviceTypes = static_cast<std::size_t>(DeviceType::CUDA) + 1;
std::array<std::atomic<StridedCopy>, kDeviceTypes> strided_copies{};

StridedCopy strided_copy_of(Device device) {
  return device.is_cpu() ? nullptr : strided_copies[static_cast<std::size_t>(device.type)].load();
}

}  // namespace

void register_strided_copy(DeviceType type, StridedCopy copy) {
  strided_copies[static_cast<std::size_t>(type)].store(copy);
}

void copy_into(const Tensor& dst, const Tensor& src) {
  TANDEM_CHECK(dst.shape() == src.shape(), "copy: destination ", show(dst.shape()),
               " and source ", show(src.shape()), " differ in shape");
  if (dst.numel() == 0) return;
  if (dst.device() != src.device() || !dst.device().is_cpu()) {
    TANDEM_CHECK(dst.dtype() == src.dtype(), "copy: a copy between ", src.device(), " and ",
                 dst.device(), " needs tensors of one dtype (", src.dtype(), " to ", dst.dtype(),
                 ")");
    if (dst.is_contiguous() && src.is_contiguous()) {
      device_copy(dst.raw_data(), dst.device(), src.raw_data(), src.device(), src.nbytes());
      return;
    }
    if (dst.device() == src.device()) {
      const StridedCopy strided = strided_copy_of(dst.device());
      TANDEM_CHECK(strided != nullptr, "copy: a copy on ", dst.device(),
                   " between strided tensors needs its kernels, which this build lacks");
      strided(dst, src);
      return;
    }
    // Across devices: the source gathered where it is, the destination scattered where it is.
    const Tensor packed = src.is_contiguous() ? src : contiguous_copy(src);
    if (dst.is_contiguous()) {
      copy_into(dst, packed);
      return;
    }
    const Tensor landed = empty(dst.shape(), {.dtype = dst.dtype(), .device = dst.device()});
    copy_into(landed, packed);
    copy_into(dst, landed);
    return;
  }
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  visit_dtype(dst.dtype(), [&]<typename D>() {
    visit_dtype(src.dtype(), [&]<typename S>() {
      D* d = static_cast<D*>(dst.raw_data());
      const S* s = static_cast<const S*>(src.raw_data());
      if (dst.is_contiguous() && src.is_contiguous()) {  // a conversion in one flat loop
        for (std::int64_t i = 0, n = dst.numel(); i < n; ++i) {
          d[i] = from_double<D>(to_double(s[i]));
        }
        return;
      }
      strided_loop<2>(dst.shape(), {dst.strides(), src.strides()}, {0, 0},
                      [&](const std::array<std::int64_t, 2>& o) {
                        if constexpr (std::is_same_v<D, S>) {
                          d[o[0]] = s[o[1]];
                        } else {
                          d[o[0]] = from_double<D>(to_double(s[o[1]]));
                        }
                      });
    });
  });
}

Tensor contiguous_copy(const Tensor& x) {
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = x.device()});
  if (x.device().is_cpu() || x.is_contiguous() || strided_copy_of(x.device()) != nullptr) {
    copy_into(out, x);
    return out;
  }
  // A strided tensor on a device without a strided copy: gather on the host, then copy back.
  Tensor host = empty(x.shape(), {.dtype = x.dtype()});
  Tensor base = make_view(
      x, {static_cast<std::int64_t>(x.storage()->nbytes() / element_size(x.dtype()))}, {1}, 0);
  Tensor host_base = copy_to(base, kCPU);
  copy_into(host, make_view(host_base, x.shape(), x.strides(), x.offset()));
  copy_into(out, host);
  return out;
}

Tensor copy_to(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  Tensor src = x.is_contiguous() ? x : contiguous_copy(x);
  Tensor out = empty(x.shape(), {.dtype = x.dtype(), .device = device});
  copy_into(out, src);
  return out;
}

Tensor convert_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  TANDEM_CHECK(x.device().is_cpu(), "to(", dtype, "): dtype conversion on ", x.device(),
               " is done by the ops layer");
  Tensor out = empty(x.shape(), {.dtype = dtype});
  copy_into(out, x);
  return out;
}

}  // namespace tandem
