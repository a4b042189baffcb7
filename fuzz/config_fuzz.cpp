// libFuzzer target: the `tandem train` config file reader, JSON or TOML (chosen by the first
// byte's low bit), then validation. Only tandem::Error may come out.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tandem/base/check.h"
#include "tandem/train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  tandem::train::TrainConfig config;
  try {
    if (data[0] & 1) {
      tandem::train::apply_toml(config, text, "fuzz.toml");
    } else {
      tandem::train::apply_json(config, text, "fuzz.json");
    }
    tandem::train::validate(config);
    if (config.batch_size < 1 || config.keep_checkpoints < 1) __builtin_trap();
  } catch (const tandem::Error&) {
  }
  return 0;
}
