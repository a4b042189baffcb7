// oneDNN eltwise forward/backward, primitives cached per (algorithm, element count). Tensors are
// seen as flat 1-D buffers: an elementwise op does not care about shape.
#include "tandem/ops/cpu/eltwise.h"

#include "tandem/ops/cpu/common.h"
#include "tandem/ops/cpu/dnnl_context.h"

namespace tandem::ops::cpu {

using dnnl::memory;

Tensor eltwise_forward(dnnl::algorithm algorithm, const Tensor& x) {
  Tensor y = new_like(x.shape(), x);
  if (x.numel() == 0) return y;
  const memory::desc md = plain_md({x.numel()});
  const std::string key = "eltwise_fwd:" + std::to_string(static_cast<int>(algorithm)) + ":" +
                          std::to_string(x.numel());
  auto& entry = cached_primitive(key, [&] {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_training, algorithm, md);
    dnnl::eltwise_forward::primitive_desc pd(d, dnnl_engine());
    return CachedPrimitive{dnnl::eltwise_forward(pd), pd};
  });
  entry.primitive.execute(dnnl_stream(),
                          {{DNNL_ARG_SRC, as_memory(x, md)}, {DNNL_ARG_DST, as_memory(y, md)}});
  return y;
}

Tensor eltwise_backward(dnnl::algorithm algorithm, const Tensor& grad_out, const Tensor& at) {
  Tensor g = new_like(at.shape(), at);
  if (at.numel() == 0) return g;
  const memory::desc md = plain_md({at.numel()});
  const bool use_dst = algorithm == dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
  const std::string key = "eltwise_bwd:" + std::to_string(static_cast<int>(algorithm)) + ":" +
                          std::to_string(at.numel());
  auto& entry = cached_primitive(key, [&] {
    dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, algorithm, md);
    dnnl::eltwise_forward::primitive_desc hint(fd, dnnl_engine());
    dnnl::eltwise_backward::desc d(algorithm, md, md);
    dnnl::eltwise_backward::primitive_desc pd(d, dnnl_engine(), hint);
    return CachedPrimitive{dnnl::eltwise_backward(pd), pd};
  });
  entry.primitive.execute(dnnl_stream(), {{use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, as_memory(at, md)},
                                          {DNNL_ARG_DIFF_DST, as_memory(grad_out, md)},
                                          {DNNL_ARG_DIFF_SRC, as_memory(g, md)}});
  return g;
}

}  // namespace tandem::ops::cpu
