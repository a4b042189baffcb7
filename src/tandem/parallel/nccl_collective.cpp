// The NCCL RankCollective: a thin adapter over dist::NcclClique.
#include "tandem/parallel/nccl_collective.h"

#include <string>
#include <utility>

#include "tandem/base/check.h"
#include "tandem/dist/nccl/nccl_clique.h"

namespace tandem::parallel {
namespace {

class NcclCollective final : public RankCollective {
 public:
  explicit NcclCollective(const std::vector<int>& gpus) : clique_(gpus) {}
  const char* name() const override { return "nccl"; }
  void reduce_sum(std::size_t rank, const Tensor& t, std::size_t root) override {
    clique_.reduce_sum(rank, t, root);
  }
  void after_sums(std::size_t rank, std::function<void()> work) override {
    clique_.on_communication_stream(rank, work);
  }
  void join(std::size_t rank) override { clique_.join(rank); }
  void abort() override { clique_.abort(); }

 private:
  dist::NcclClique clique_;
};

}  // namespace

bool nccl_collective_built() { return dist::nccl_clique_built(); }

std::unique_ptr<RankCollective> make_nccl_collective(const std::vector<Device>& devices) {
  std::vector<int> gpus;
  for (const Device& d : devices) {
    TANDEM_CHECK(d.is_cuda(), "DataParallel: NCCL sums GPU replicas only, not ", d);
    gpus.push_back(d.index);
  }
  try {
    return std::make_unique<NcclCollective>(gpus);
  } catch (const Error& e) {
    // The way out, said before the error's [file:line].
    std::string message = e.what();
    const std::string hint =
        "; --gpu-reduction host (nn::GpuReduction::Host) sums the GPUs' gradients through the "
        "host instead";
    const std::size_t at = message.rfind(" [");
    message.insert(at == std::string::npos ? message.size() : at, hint);
    throw Error(message);
  }
}

}  // namespace tandem::parallel
