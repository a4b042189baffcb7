// libFuzzer target: the safetensors reader on arbitrary bytes. Only tandem::Error may come out;
// what it accepts must fit in the input (the header's claims checked before any allocation).
#include <cstddef>
#include <cstdint>

#include "tandem/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tandem::io::LoadedTensors loaded =
        tandem::io::from_safetensors_buffer(data, size, "fuzz.safetensors");
    std::size_t bytes = 0;
    for (const auto& [name, tensor] : loaded.tensors) {
      if (name.empty() || !tensor.defined() || !tensor.is_contiguous()) __builtin_trap();
      bytes += tensor.nbytes();
    }
    if (bytes > size) __builtin_trap();
  } catch (const tandem::Error&) {
  }
  return 0;
}
