// safetensors files (the format PyTorch's `safetensors` package reads and writes): save a state
// dict atomically, load one after validating every header field. Not a checkpoint format by
// itself (no optimizer state, no checksum); io/checkpoint builds on these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tandem/nn/module.h"

namespace tandem::io {

// Free-form string pairs stored under the header's "__metadata__" key.
using Metadata = std::map<std::string, std::string>;

struct LoadedTensors {
  nn::StateDict tensors;  // in file order (by data offset), CPU, contiguous
  Metadata metadata;
};

// The largest header tandem accepts (the reference reader's limit).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Writes `tensors` (names and shapes as given; each copied to the CPU, contiguous) to `path`:
// first to `path.tmp-<pid>`, fsynced, then renamed over `path`, and the directory fsynced, so a
// crash never leaves a half-written file under the final name. Tensor data is laid out in the
// order given.
void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const Metadata& metadata = {});
// Reads and validates a whole file; any inconsistency throws tandem::Error naming the file, the
// field and the value.
LoadedTensors load_safetensors(const std::string& path);

// The same bytes as save_safetensors writes, in memory.
std::vector<std::uint8_t> to_safetensors_buffer(const nn::StateDict& tensors,
                                                const Metadata& metadata = {});
// Parses bytes in memory with the same checks as load_safetensors; `source` names the buffer in
// errors.
LoadedTensors from_safetensors_buffer(const std::uint8_t* data, std::size_t size,
                                      const std::string& source = "<memory>");
inline LoadedTensors from_safetensors_buffer(const std::vector<std::uint8_t>& bytes,
                                             const std::string& source = "<memory>") {
  return from_safetensors_buffer(bytes.data(), bytes.size(), source);
}

}  // namespace tandem::io
