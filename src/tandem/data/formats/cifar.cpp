// CIFAR-10 binary parsing and loading.
#include "tandem/data/formats/cifar.h"

#include <string>
#include <vector>

#include "tandem/data/formats/bytes.h"
#include "tandem/tensor/factories.h"

namespace tandem::data {

std::int64_t parse_cifar(std::span<const std::uint8_t> bytes, std::string_view name) {
  const std::size_t size = bytes.size();
  TANDEM_CHECK(size > 0, name, ": empty file (offset 0); a CIFAR-10 batch holds records of ",
               kCifarRecordBytes, " bytes");
  TANDEM_CHECK(size % kCifarRecordBytes == 0, name, ": size ", size, " is not a multiple of the ",
               kCifarRecordBytes, "-byte record: the record at offset ",
               size / kCifarRecordBytes * kCifarRecordBytes, " is truncated (",
               size % kCifarRecordBytes, " of ", kCifarRecordBytes, " bytes)");
  const std::size_t records = size / kCifarRecordBytes;
  for (std::size_t r = 0; r < records; ++r) {
    const std::size_t at = r * kCifarRecordBytes;
    TANDEM_CHECK(bytes[at] < 10, name, ": label ", int{bytes[at]}, " at offset ", at, " (record ",
                 r, ") is outside [0, 10)");
  }
  return static_cast<std::int64_t>(records);
}

void append_cifar(std::span<const std::uint8_t> bytes, std::vector<std::uint8_t>& data,
                  std::vector<std::int64_t>& labels) {
  const std::size_t records = bytes.size() / kCifarRecordBytes;
  data.reserve(data.size() + records * (kCifarRecordBytes - 1));
  for (std::size_t r = 0; r < records; ++r) {
    const std::uint8_t* rec = bytes.data() + r * kCifarRecordBytes;
    labels.push_back(rec[0]);
    data.insert(data.end(), rec + 1, rec + kCifarRecordBytes);
  }
}

TensorDataset cifar10(const std::filesystem::path& dir, Split split) {
  std::filesystem::path root = dir;
  if (std::filesystem::is_directory(dir / "cifar-10-batches-bin"))
    root = dir / "cifar-10-batches-bin";
  std::vector<std::string> files;
  if (split == Split::Train) {
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    files.push_back("test_batch.bin");
  }
  std::vector<std::uint8_t> data;
  std::vector<std::int64_t> labels;
  for (const auto& file : files) {
    const std::filesystem::path path = root / file;
    TANDEM_CHECK(std::filesystem::is_regular_file(path), "cifar10: ", path.string(),
                 " does not exist (expected the CIFAR-10 binary version in ", dir.string(), ")");
    const std::vector<std::uint8_t> bytes = read_file(path);
    parse_cifar(bytes, path.string());
    append_cifar(bytes, data, labels);
  }
  const auto n = static_cast<std::int64_t>(labels.size());
  // data: (N, 3, 32, 32) uint8
  return TensorDataset(from_host(data.data(), DType::UInt8, {n, 3, 32, 32}),
                       from_vector(labels, {n}), 10);
}

}  // namespace tandem::data
