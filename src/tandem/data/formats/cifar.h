// CIFAR-10 binary batches: records of 1 label byte then 3072 pixel bytes (1024 red, 1024 green,
// 1024 blue, each 32 x 32 row-major), data_batch_1.bin .. data_batch_5.bin and test_batch.bin.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "tandem/data/dataset.h"

namespace tandem::data {

inline constexpr std::size_t kCifarRecordBytes = 1 + 3 * 32 * 32;  // 3073
inline constexpr std::array<float, 3> kCifar10Mean = {0.4914f, 0.4822f, 0.4465f};
inline constexpr std::array<float, 3> kCifar10Std = {0.2470f, 0.2435f, 0.2616f};

// Checks a batch file's bytes (non-empty, a multiple of 3073, every label below 10) and returns
// its record count; errors name `name` and the offset.
std::int64_t parse_cifar(std::span<const std::uint8_t> bytes, std::string_view name);

// Appends the records of a checked buffer. data: (N, 3, 32, 32) uint8 bytes; labels: (N).
void append_cifar(std::span<const std::uint8_t> bytes, std::vector<std::uint8_t>& data,
                  std::vector<std::int64_t>& labels);

// CIFAR-10 from a directory holding the .bin files, or holding cifar-10-batches-bin/ with them.
// Result: data (N, 3, 32, 32) uint8, targets (N) int64; N = 50000 (Train) or 10000 (Test).
TensorDataset cifar10(const std::filesystem::path& dir, Split split = Split::Train);

// The same as a named type: tandem::data::Cifar10("./data", Split::Train).
class Cifar10 : public TensorDataset {
 public:
  explicit Cifar10(const std::filesystem::path& dir, Split split = Split::Train)
      : TensorDataset(cifar10(dir, split)) {}
};

}  // namespace tandem::data
