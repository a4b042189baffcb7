// IDX parsing and the MNIST-family loaders.
#include "tandem/data/formats/idx.h"

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tandem/data/formats/bytes.h"
#include "tandem/tensor/factories.h"

namespace tandem::data {
namespace {

constexpr std::uint8_t kUnsignedByte = 0x08;
constexpr std::uint8_t kMaxRank = 8;

std::string hex_byte(std::uint8_t v) {
  constexpr char kHex[] = "0123456789abcdef";
  return std::string("0x") + kHex[v >> 4] + kHex[v & 15];
}

// The first of `candidates` that exists in `dir`; throws listing them when none does.
std::filesystem::path find_file(const std::filesystem::path& dir,
                                const std::vector<std::string>& candidates, const char* who) {
  for (const auto& name : candidates) {
    std::filesystem::path p = dir / name;
    if (std::filesystem::is_regular_file(p)) return p;
  }
  std::string tried;
  for (const auto& name : candidates) tried += (tried.empty() ? "" : ", ") + name;
  TANDEM_FAIL(who, ": ", dir.string(), " has none of ", tried);
}

TensorDataset mnist_family(const std::filesystem::path& dir, Split split, const char* who) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const auto images = find_file(dir,
                                {prefix + "-images-idx3-ubyte.gz", prefix + "-images-idx3-ubyte",
                                 prefix + "-images.idx3-ubyte"},
                                who);
  const auto labels = find_file(dir,
                                {prefix + "-labels-idx1-ubyte.gz", prefix + "-labels-idx1-ubyte",
                                 prefix + "-labels.idx1-ubyte"},
                                who);
  return load_idx(images, labels, 10);
}

}  // namespace

IdxHeader parse_idx(std::span<const std::uint8_t> bytes, std::string_view name) {
  const std::size_t size = bytes.size();
  TANDEM_CHECK(size >= 4, name, ": truncated IDX header at offset ", size,
               ": the magic number needs bytes 0-3, the file has ", size);
  TANDEM_CHECK(bytes[0] == 0 && bytes[1] == 0, name, ": bad IDX magic at offset 0: bytes ",
               hex_byte(bytes[0]), " ", hex_byte(bytes[1]), " (expected 0x00 0x00)");
  TANDEM_CHECK(bytes[2] == kUnsignedByte, name, ": IDX element type ", hex_byte(bytes[2]),
               " at offset 2 is not supported (only 0x08, unsigned byte)");
  const std::uint8_t rank = bytes[3];
  TANDEM_CHECK(rank >= 1 && rank <= kMaxRank, name, ": IDX rank ", int{rank},
               " at offset 3 is outside [1, ", int{kMaxRank}, "]");
  IdxHeader header;
  std::uint64_t count = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t at = 4 + 4 * k;
    TANDEM_CHECK(at + 4 <= size, name, ": truncated IDX header at offset ", size, ": size ", k,
                 " of ", int{rank}, " needs bytes ", at, "-", at + 3);
    const std::uint32_t d = read_be32(bytes.data() + at);
    TANDEM_CHECK(d <= static_cast<std::uint32_t>(std::numeric_limits<std::int32_t>::max()), name,
                 ": IDX size ", k, " = ", d, " at offset ", at, " is too large");
    header.dims.push_back(d);
    // Keep the running product below 2^62: a real file never comes close.
    TANDEM_CHECK(d == 0 || count <= (std::uint64_t{1} << 62) / d, name, ": IDX sizes up to offset ",
                 at, " multiply to more than 2^62 elements");
    count *= d;
  }
  header.data_offset = 4 + 4 * std::size_t{rank};
  const std::size_t available = size - header.data_offset;
  TANDEM_CHECK(available >= count, name, ": truncated IDX data at offset ", size, ": sizes ",
               show(header.dims), " need ", count, " bytes from offset ", header.data_offset,
               ", the file has ", available);
  TANDEM_CHECK(available == count, name, ": ", available - count,
               " unexpected bytes after the IDX data at offset ", header.data_offset + count);
  return header;
}

namespace {

// The dataset from checked IDX files; `owner`, when given, holds `images` and lends its memory to
// the image tensor instead of a copy (fresh pages are costly, and a copy doubles the peak memory
// while loading).
TensorDataset idx_dataset_over(std::span<const std::uint8_t> images, std::string_view images_name,
                               std::span<const std::uint8_t> labels, std::string_view labels_name,
                               std::int64_t num_classes,
                               std::shared_ptr<std::vector<std::uint8_t>> owner) {
  TANDEM_CHECK(num_classes >= 1, "idx_dataset: num_classes ", num_classes, " must be positive");
  const IdxHeader ih = parse_idx(images, images_name);
  const IdxHeader lh = parse_idx(labels, labels_name);
  TANDEM_CHECK(ih.dims.size() == 3, images_name, ": IDX rank ", ih.dims.size(),
               " at offset 3; images need rank 3 (N, H, W)");
  TANDEM_CHECK(lh.dims.size() == 1, labels_name, ": IDX rank ", lh.dims.size(),
               " at offset 3; labels need rank 1 (N)");
  const std::int64_t n = ih.dims[0];
  TANDEM_CHECK(lh.dims[0] == n, images_name, " holds ", n, " images (count at offset 4) but ",
               labels_name, " holds ", lh.dims[0], " labels (count at offset 4)");
  const std::uint8_t* label_bytes = labels.data() + lh.data_offset;
  std::vector<std::int64_t> targets(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t v = label_bytes[i];
    TANDEM_CHECK(v < num_classes, labels_name, ": label ", int{v}, " at offset ",
                 lh.data_offset + static_cast<std::size_t>(i), " (sample ", i, ") is outside [0, ",
                 num_classes, ")");
    targets[static_cast<std::size_t>(i)] = v;
  }
  // data: (N, 1, H, W) uint8
  const Shape shape{n, 1, ih.dims[1], ih.dims[2]};
  Tensor data;
  if (owner) {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = std::make_shared<Storage>(owner->data(), owner->size(), kCPU,
                                              [owner](void*) mutable { owner.reset(); });
    impl->shape = shape;
    impl->strides = contiguous_strides(shape);
    impl->offset = static_cast<std::int64_t>(ih.data_offset);
    impl->dtype = DType::UInt8;
    data = Tensor(std::move(impl));
  } else {
    data = from_host(images.data() + ih.data_offset, DType::UInt8, shape);
  }
  return TensorDataset(std::move(data), from_vector(targets, {n}), num_classes);
}

}  // namespace

TensorDataset idx_dataset(std::span<const std::uint8_t> images, std::string_view images_name,
                          std::span<const std::uint8_t> labels, std::string_view labels_name,
                          std::int64_t num_classes) {
  return idx_dataset_over(images, images_name, labels, labels_name, num_classes, nullptr);
}

TensorDataset load_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                       std::int64_t num_classes) {
  const auto name_of = [](const std::filesystem::path& p, std::span<const std::uint8_t> raw) {
    return is_gzip(raw) ? p.string() + " (inflated)" : p.string();
  };
  auto image_bytes = std::make_shared<std::vector<std::uint8_t>>(read_file(images));
  const std::string image_name = name_of(images, *image_bytes);
  if (is_gzip(*image_bytes)) *image_bytes = gunzip(*image_bytes, images.string());
  std::vector<std::uint8_t> label_bytes = read_file(labels);
  const std::string label_name = name_of(labels, label_bytes);
  if (is_gzip(label_bytes)) label_bytes = gunzip(label_bytes, labels.string());
  return idx_dataset_over(*image_bytes, image_name, label_bytes, label_name, num_classes,
                          image_bytes);
}

TensorDataset mnist(const std::filesystem::path& dir, Split split) {
  TANDEM_CHECK(!dir.empty(), "mnist: no directory given (mnist:DIR)");
  return mnist_family(dir, split, "mnist");
}

TensorDataset fashion_mnist(const std::filesystem::path& dir, Split split) {
  return mnist_family(dir.empty() ? std::filesystem::path(kFashionMnistDir) : dir, split,
                      "fashion-mnist");
}

}  // namespace tandem::data
