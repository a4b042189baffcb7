// Gloo's file and Redis stores (Debian's libgloo, built with Redis) as tandem Stores, and
// tandem's Store as a gloo::rendezvous::Store for Gloo's connectFullMesh. This header does not
// include Gloo; only dist/gloo/*.cpp do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tandem/dist/store.h"

namespace tandem::dist {

// Gloo's FileStore in `directory` (created if missing), on a file system every rank sees.
std::shared_ptr<Store> make_file_store(const std::string& directory);
// Gloo's RedisStore, connected to a running redis-server at host:port.
std::shared_ptr<Store> make_redis_store(const std::string& host, std::uint16_t port);

}  // namespace tandem::dist
