// Location and lookup of the golden files.
#include "golden.h"

#include "tandem/base/check.h"
#include "tandem/tensor/factories.h"

namespace tandem::testing {

std::string golden_path(const std::string& name) {
  return std::string(TANDEM_GOLDEN_DIR) + "/" + name;
}

GoldenFile::GoldenFile(const std::string& name)
    : name_(name), loaded_(io::load_safetensors(golden_path(name))) {}

bool GoldenFile::has(const std::string& key) const {
  for (const auto& [k, t] : loaded_.tensors) {
    if (k == key) return true;
  }
  return false;
}

Tensor GoldenFile::get(const std::string& key) const {
  for (const auto& [k, t] : loaded_.tensors) {
    if (k == key) return t;
  }
  TANDEM_FAIL("golden file ", name_, ": no tensor \"", key, "\" (rerun tools/gen_golden.py?)");
}

Tensor GoldenFile::input(const std::string& key) const {
  Tensor t = contiguous_copy(get(key));
  t.set_requires_grad(true);
  return t;
}

std::vector<std::int64_t> GoldenFile::ints(const std::string& key) const {
  Tensor t = get(key);
  TANDEM_CHECK(t.dtype() == DType::Int64, "golden file ", name_, ": \"", key, "\" is ", t.dtype(),
               ", not int64");
  return t.to_vector<std::int64_t>();
}

std::int64_t GoldenFile::integer(const std::string& key) const {
  const auto v = ints(key);
  TANDEM_CHECK(v.size() == 1, "golden file ", name_, ": \"", key, "\" holds ", v.size(),
               " values, not one");
  return v[0];
}

std::array<std::int64_t, 2> GoldenFile::pair(const std::string& key) const {
  const auto v = ints(key);
  TANDEM_CHECK(v.size() == 2, "golden file ", name_, ": \"", key, "\" holds ", v.size(),
               " values, not two");
  return {v[0], v[1]};
}

std::set<std::string> GoldenFile::cases() const {
  std::set<std::string> out;
  for (const auto& [k, t] : loaded_.tensors) out.insert(k.substr(0, k.find('.')));
  return out;
}

}  // namespace tandem::testing
