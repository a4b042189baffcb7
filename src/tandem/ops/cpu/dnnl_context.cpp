// Per-thread oneDNN engine, stream and scratchpad.
#include "tandem/ops/cpu/dnnl_context.h"

#include <vector>

namespace tandem::ops::cpu {

dnnl::engine& dnnl_engine() {
  thread_local dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

static dnnl::memory::data_type dnnl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return dnnl::memory::data_type::f32;
    case DType::BFloat16: return dnnl::memory::data_type::bf16;
    case DType::UInt8: return dnnl::memory::data_type::u8;
    default: TANDEM_FAIL("oneDNN: no oneDNN type for ", dtype);
  }
}

dnnl::memory::desc plain_md(const Shape& shape, DType dtype) {
  dnnl::memory::dims dims(shape.begin(), shape.end());
  dnnl::memory::dims strides(dims.size());
  const Strides s = contiguous_strides(shape);
  for (std::size_t i = 0; i < s.size(); ++i) strides[i] = s[i];
  return dnnl::memory::desc(dims, dnnl_type(dtype), strides);
}

dnnl::memory::desc plain_md(const Tensor& t) { return plain_md(t.shape(), t.dtype()); }

dnnl::memory as_memory(const Tensor& t) { return as_memory(t, plain_md(t)); }

dnnl::memory as_memory(const Tensor& t, const dnnl::memory::desc& md) {
  TANDEM_CHECK(t.is_contiguous(), "oneDNN: internal error, non-contiguous operand");
  return dnnl::memory(md, dnnl_engine(), t.raw_data());
}

std::string key_of(const Shape& shape) {
  std::string k;
  for (auto d : shape) {
    k += std::to_string(d);
    k += 'x';
  }
  return k;
}

dnnl::memory scratchpad_for(const dnnl::primitive_desc_base& pd) {
  thread_local std::vector<char, std::allocator<char>> buffer;
  const dnnl::memory::desc md = pd.scratchpad_desc();
  const std::size_t need = md.get_size();
  if (buffer.size() < need + 64) buffer.resize(need + 64);
  return dnnl::memory(md, dnnl_engine(), buffer.data());
}

}  // namespace tandem::ops::cpu
