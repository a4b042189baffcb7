// IDX files, the format of MNIST and Fashion-MNIST: bytes 0-1 zero, byte 2 the element type,
// byte 3 the rank R, then R big-endian uint32 sizes, then the elements. Only type 0x08 (unsigned
// byte) is read: the one these datasets use. Raw or gzip-compressed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>

#include "tandem/data/dataset.h"

namespace tandem::data {

// Mean and standard deviation of the training images' pixels scaled to [0, 1].
inline constexpr float kMnistMean = 0.1307f, kMnistStd = 0.3081f;
inline constexpr float kFashionMnistMean = 0.2860f, kFashionMnistStd = 0.3530f;

// Debian's dataset-fashion-mnist package puts the four .gz files here.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct IdxHeader {
  Shape dims;                   // the R sizes
  std::size_t data_offset = 0;  // where the elements start; they run exactly to the end
};

// Validates a whole (inflated) IDX buffer; errors name `name` and the byte offset.
IdxHeader parse_idx(std::span<const std::uint8_t> bytes, std::string_view name);

// An image IDX buffer (N, H, W) and a label IDX buffer (N) checked against each other, every label
// in [0, num_classes). Result: data (N, 1, H, W) uint8, targets (N) int64.
TensorDataset idx_dataset(std::span<const std::uint8_t> images, std::string_view images_name,
                          std::span<const std::uint8_t> labels, std::string_view labels_name,
                          std::int64_t num_classes);

// The same from two files, each raw or gzip.
TensorDataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                       std::int64_t num_classes = 10);

// MNIST from a directory with the canonical names (train-images-idx3-ubyte[.gz],
// train-labels-idx1-ubyte[.gz], t10k-...; the "train-images.idx3-ubyte" spelling also works).
TensorDataset mnist(const std::filesystem::path& dir, Split split = Split::Train);
// Fashion-MNIST, same names; an empty `dir` means kFashionMnistDir.
TensorDataset fashion_mnist(const std::filesystem::path& dir = "", Split split = Split::Train);

}  // namespace tandem::data
