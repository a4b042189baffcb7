// Adapters between tandem's Store and Gloo's (file, Redis): Gloo's exceptions become tandem
// errors naming the store, the operation and the key.
#include "tandem/dist/gloo/gloo_store.h"

#include <filesystem>
#include <mutex>

// Debian's hiredis headers live in hiredis/; gloo's redis_store.h includes them so when told.
#define HIREDIS_NESTED_INCLUDE 1
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>

#include "tandem/base/check.h"

namespace tandem::dist {
namespace {

// A Gloo store behind tandem's interface (one mutex: Gloo's Redis connection is not shareable).
class FromGloo final : public Store {
 public:
  FromGloo(std::unique_ptr<gloo::rendezvous::Store> store, std::string description)
      : store_(std::move(store)), description_(std::move(description)) {}
  void set(const std::string& key, const std::string& value) override {
    guarded("set", key, [&] { store_->set(key, std::vector<char>(value.begin(), value.end())); });
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::vector<char> bytes;
    guarded("get", key, [&] {
      store_->wait({key}, timeout);
      bytes = store_->get(key);
    });
    return {bytes.begin(), bytes.end()};
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    guarded("wait", keys.empty() ? "" : keys.front(), [&] { store_->wait(keys, timeout); });
  }
  std::string describe() const override { return description_; }

 private:
  template <typename F>
  void guarded(const char* op, const std::string& key, F&& body) {
    std::lock_guard lock(mutex_);
    try {
      body();
    } catch (const std::exception& e) {
      TANDEM_FAIL(description_, ": ", op, " of key '", key, "' failed: ", e.what());
    }
  }

  std::mutex mutex_;
  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::string description_;
};

}  // namespace

std::shared_ptr<Store> make_file_store(const std::string& directory) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  TANDEM_CHECK(!ec, "file store: cannot create directory '", directory, "': ", ec.message());
  return std::make_shared<FromGloo>(std::make_unique<gloo::rendezvous::FileStore>(directory),
                                    "file store in '" + directory + "'");
}

std::shared_ptr<Store> make_redis_store(const std::string& host, std::uint16_t port) {
  const std::string where = "Redis store at " + host + ":" + std::to_string(port);
  try {
    return std::make_shared<FromGloo>(std::make_unique<gloo::rendezvous::RedisStore>(host, port),
                                      where);
  } catch (const std::exception& e) {
    TANDEM_FAIL("cannot connect to the ", where, " (is redis-server running there?): ", e.what());
  }
}

}  // namespace tandem::dist
