// Raw copies: strided → contiguous, between devices, and between dtypes. No autograd here.
#include <cstring>

#include "tandem/base/dispatch.h"
#include "tandem/device/allocator.h"
#include "tandem/tensor/factories.h"
#include "tandem/tensor/strided.h"
#include "tandem/tensor/tensor.h"

namespace tandem {

void copy_into(const Tensor& dst, const Tensor& src) {
  TANDEM_CHECK(dst.shape() == src.shape(), "copy: destination ", show(dst.shape()),
               " and source ", show(src.shape()), " differ in shape");
  if (dst.numel() == 0) return;
  if (dst.device() != src.device() || !dst.device().is_cpu()) {
    TANDEM_CHECK(dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous(),
                 "copy: a copy between ", src.device(), " and ", dst.device(),
                 " needs contiguous tensors of one dtype");
    device_copy(dst.raw_data(), dst.device(), src.raw_data(), src.device(), src.nbytes());
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
  if (x.device().is_cpu() || x.is_contiguous()) {
    copy_into(out, x);
    return out;
  }
  // A strided tensor on another device: gather on the host, then copy back.
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
