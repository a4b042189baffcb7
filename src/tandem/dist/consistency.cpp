// The fingerprint check: rank 0's description goes to everyone, each rank lists how it differs,
// the ranks exchange "do I differ" flags, and each differing rank's list is broadcast so that
// every rank's error says the same thing.
#include "tandem/dist/consistency.h"

#include <map>
#include <sstream>

#include "tandem/base/check.h"
#include "tandem/tensor/factories.h"

namespace tandem::dist {
namespace {

std::string describe(const ParamInfo& p) {
  std::ostringstream out;
  out << show(p.shape) << " " << dtype_name(p.dtype);
  return out.str();
}

// "name<TAB>shape dtype" per line, in order.
std::string fingerprint(const std::vector<ParamInfo>& params) {
  std::string out;
  for (const ParamInfo& p : params) out += p.name + "\t" + describe(p) + "\n";
  return out;
}

std::vector<std::pair<std::string, std::string>> parse(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const std::size_t tab = line.find('\t');
    out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

// How this rank's parameters differ from rank 0's (empty when they do not).
std::string differences(const std::string& mine, const std::string& reference, int rank) {
  const auto a = parse(mine), b = parse(reference);
  const std::map<std::string, std::string> ours(a.begin(), a.end()), theirs(b.begin(), b.end());
  std::vector<std::string> diffs;
  const std::string here = "rank " + std::to_string(rank);
  for (const auto& [name, what] : a) {
    const auto it = theirs.find(name);
    if (it == theirs.end()) {
      diffs.push_back(name + " is on " + here + " but not on rank 0");
    } else if (it->second != what) {
      diffs.push_back(name + " is " + what + " on " + here + " but " + it->second + " on rank 0");
    }
  }
  for (const auto& [name, what] : b) {
    if (!ours.count(name)) diffs.push_back(name + " is on rank 0 but not on " + here);
  }
  if (diffs.empty() && mine != reference)
    diffs.push_back("the parameters are in another order on " + here);
  std::string out;
  for (const auto& d : diffs) out += (out.empty() ? "" : "; ") + d;
  return out;
}

}  // namespace

std::string broadcast_string(ProcessGroup& group, const std::string& text, int root) {
  Tensor length = empty({1}, {.dtype = DType::Int64});
  length.data<std::int64_t>()[0] = static_cast<std::int64_t>(text.size());
  group.broadcast(length, root);
  const std::int64_t n = length.data<std::int64_t>()[0];
  if (n == 0) return {};
  Tensor bytes = empty({n}, {.dtype = DType::UInt8});
  if (group.rank() == root) std::copy(text.begin(), text.end(), bytes.data<std::uint8_t>());
  group.broadcast(bytes, root);
  const auto* p = bytes.data<std::uint8_t>();
  return std::string(p, p + n);
}

void check_same_model(ProcessGroup& group, const std::vector<ParamInfo>& params,
                      const std::string& bucket_layout) {
  const std::string mine = fingerprint(params);
  std::string diff = differences(mine, broadcast_string(group, mine), group.rank());
  if (diff.empty() && broadcast_string(group, bucket_layout) != bucket_layout) {
    diff = "the gradient buckets differ from rank 0's (the same parameters, grouped otherwise)";
  } else if (!diff.empty()) {
    broadcast_string(group, bucket_layout);  // keep the collectives in step with the others
  }
  Tensor flag = empty({1}, {.dtype = DType::Int64});
  Tensor flags = empty({group.size()}, {.dtype = DType::Int64});
  flag.data<std::int64_t>()[0] = diff.empty() ? 0 : 1;
  group.all_gather(flag, flags);
  std::string message;
  for (int r = 0; r < group.size(); ++r) {
    if (flags.data<std::int64_t>()[r] == 0) continue;
    const std::string theirs = broadcast_string(group, r == group.rank() ? diff : std::string(), r);
    message += (message.empty() ? "" : " | ") + theirs;
  }
  TANDEM_CHECK(message.empty(),
               "the ranks do not train the same model (checked before the first "
               "step): ",
               message);
}

}  // namespace tandem::dist
