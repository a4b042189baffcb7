// The --data spellings.
#include "tandem/data/data_spec.h"

#include <charconv>
#include <string>

#include "tandem/data/formats/cifar.h"
#include "tandem/data/formats/csv.h"
#include "tandem/data/formats/idx.h"
#include "tandem/data/synthetic.h"

namespace tandem::data {
namespace {

struct Spec {
  std::string_view kind;
  std::string_view argument;  // after the first ':'; empty when there is none
  bool has_argument = false;
};

Spec split_spec(std::string_view spec) {
  const std::size_t colon = spec.find(':');
  if (colon == std::string_view::npos) return {spec, {}, false};
  return {spec.substr(0, colon), spec.substr(colon + 1), true};
}

std::vector<std::string_view> split_on(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

template <typename T>
T parse_integer(std::string_view text, std::string_view spec, const char* what, T minimum) {
  T value{};
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  TANDEM_CHECK(
      ec == std::errc() && ptr == text.data() + text.size() && !text.empty() && value >= minimum,
      "data spec '", spec, "': ", what, " '", text, "' is not an integer >= ", minimum);
  return value;
}

SyntheticOptions synthetic_options(std::string_view argument, std::string_view spec, Split split) {
  const auto parts = split_on(argument, ':');
  TANDEM_CHECK(parts.size() == 3 || parts.size() == 4, "data spec '", spec,
               "': expected synthetic:SHAPE:CLASSES:COUNT[:SEED], e.g. synthetic:1x28x28:10:60000");
  SyntheticOptions options;
  options.shape.clear();
  for (std::string_view size : split_on(parts[0], 'x')) {
    options.shape.push_back(parse_integer<std::int64_t>(size, spec, "size", 1));
  }
  options.classes = parse_integer<std::int64_t>(parts[1], spec, "class count", 1);
  options.count = parse_integer<std::int64_t>(parts[2], spec, "sample count", 1);
  if (parts.size() == 4) options.seed = parse_integer<std::uint64_t>(parts[3], spec, "seed", 0);
  options.split = split;
  options.dtype = options.shape.size() == 1 ? DType::Float32 : DType::UInt8;
  return options;
}

constexpr const char* kSpellings =
    "fashion-mnist[:DIR], mnist:DIR, cifar10:DIR, csv:FILE, synthetic:SHAPE:CLASSES:COUNT[:SEED]";

}  // namespace

std::shared_ptr<const Dataset> parse_data_spec(std::string_view spec, Split split) {
  const Spec s = split_spec(spec);
  if (s.kind == "fashion-mnist") {
    return std::make_shared<const TensorDataset>(fashion_mnist(std::string(s.argument), split));
  }
  if (s.kind == "mnist") {
    TANDEM_CHECK(!s.argument.empty(), "data spec '", spec, "': mnist needs a directory, mnist:DIR");
    return std::make_shared<const TensorDataset>(mnist(std::string(s.argument), split));
  }
  if (s.kind == "cifar10") {
    TANDEM_CHECK(!s.argument.empty(), "data spec '", spec,
                 "': cifar10 needs a directory, cifar10:DIR");
    return std::make_shared<const TensorDataset>(cifar10(std::string(s.argument), split));
  }
  if (s.kind == "csv") {
    TANDEM_CHECK(!s.argument.empty(), "data spec '", spec, "': csv needs a file, csv:FILE");
    return std::make_shared<const TensorDataset>(csv_dataset(std::string(s.argument)));
  }
  if (s.kind == "synthetic") {
    return std::make_shared<const SyntheticDataset>(synthetic_options(s.argument, spec, split));
  }
  TANDEM_FAIL("data spec '", spec, "': unknown kind '", s.kind, "' (expected one of ", kSpellings,
              ")");
}

std::vector<AnyTransform> default_transforms(std::string_view spec, bool normalize) {
  const Spec s = split_spec(spec);
  const bool image_dataset = s.kind == "fashion-mnist" || s.kind == "mnist" || s.kind == "cifar10";
  if (image_dataset && !normalize) return {ToFloat()};
  if (s.kind == "fashion-mnist") {
    return {ToFloat(), Normalize({kFashionMnistMean}, {kFashionMnistStd})};
  }
  if (s.kind == "mnist") return {ToFloat(), Normalize({kMnistMean}, {kMnistStd})};
  if (s.kind == "cifar10") {
    return {ToFloat(), Normalize({kCifar10Mean.begin(), kCifar10Mean.end()},
                                 {kCifar10Std.begin(), kCifar10Std.end()})};
  }
  if (s.kind == "synthetic" &&
      split_on(s.argument, ':').front().find('x') != std::string_view::npos) {
    return {ToFloat()};
  }
  return {};
}

}  // namespace tandem::data
