// The Gloo backend: collectives over TCP between host (CPU) tensors. This header does not
// include Gloo; only dist/gloo/*.cpp do.
#pragma once

#include <memory>

#include "tandem/dist/process_group.h"

namespace tandem::dist {

// Connects the full mesh of Gloo TCP pairs through rendezvous.store (keys under "gloo/").
std::unique_ptr<ProcessGroup> make_gloo_process_group(Rendezvous rendezvous);

}  // namespace tandem::dist
