// NcclClique in a build without NCCL or without CUDA: nccl_clique_built() is false and making a
// clique fails with that reason (DataParallel then reduces GPU replicas through the host).
#include "tandem/base/check.h"
#include "tandem/dist/nccl/nccl_clique.h"

namespace tandem::dist {

bool nccl_clique_built() { return false; }
std::string nccl_version() { return ""; }

struct NcclClique::Impl {};

NcclClique::NcclClique(const std::vector<int>& cuda_devices) {
  TANDEM_FAIL("nccl: cannot reduce over ", cuda_devices.size(),
              " GPUs in this process: tandem was built without NCCL");
}

NcclClique::~NcclClique() = default;
std::size_t NcclClique::size() const { return 0; }
int NcclClique::device(std::size_t) const { TANDEM_FAIL("nccl: built without NCCL"); }
void NcclClique::reduce_sum(std::size_t, const Tensor&, std::size_t) {
  TANDEM_FAIL("nccl: built without NCCL");
}
void NcclClique::on_communication_stream(std::size_t, const std::function<void()>&) {
  TANDEM_FAIL("nccl: built without NCCL");
}
void NcclClique::join(std::size_t) { TANDEM_FAIL("nccl: built without NCCL"); }
void NcclClique::abort() {}
bool NcclClique::aborted() const { return true; }

}  // namespace tandem::dist
