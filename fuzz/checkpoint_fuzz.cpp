// libFuzzer target: the checkpoint reader with the input as manifest.json, beside fixed intact
// files (fuzz/checkpoint_files/, copied once into a temporary directory). Only tandem::Error may
// come out; the manifest's names and sizes must never make it read outside the checkpoint.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tandem/io/checkpoint.h"

namespace {

// A temporary <root>/step-00000001 holding the fixed files; removed when the fuzzer exits.
struct CheckpointDir {
  std::filesystem::path root;
  std::filesystem::path dir;
  CheckpointDir() {
    char pattern[] = "/tmp/tandem-fuzz-checkpoint-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) std::abort();
    root = pattern;
    dir = root / "step-00000001";
    std::filesystem::create_directory(dir);
    for (const char* name : {"model.safetensors", "state.safetensors", "state.json"}) {
      std::filesystem::copy_file(std::filesystem::path(TANDEM_FUZZ_CHECKPOINT_FILES) / name,
                                 dir / name);
    }
  }
  ~CheckpointDir() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const CheckpointDir checkpoint;
  const std::filesystem::path& dir = checkpoint.dir;
  {
    std::ofstream out(dir / "manifest.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    const tandem::io::CheckpointContents contents = tandem::io::read_checkpoint(dir.string());
    if (contents.model.empty()) __builtin_trap();  // the fixed model file holds two tensors
  } catch (const tandem::Error&) {
  }
  return 0;
}
