// Store: the key-value rendezvous the ranks meet through (addresses, NCCL's unique id, the
// monitor's ports). Keys are written once, as in Gloo's file and Redis stores; every read waits
// with a timeout. Implementations: TcpStore (tcp_store.h), file and Redis (gloo/gloo_store.h).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace tandem::dist {

class Store {
 public:
  virtual ~Store() = default;
  // Sets `key` (once; a key is never overwritten).
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for another rank to set it.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Waits up to `timeout` until every key is set; the error names the keys still missing.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // For messages: "TCP store at 10.0.0.1:29500 (served by rank 0)".
  virtual std::string describe() const = 0;
};

// Every key of `inner` under "prefix/" (one job attempt's namespace in a shared store).
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {}
  void set(const std::string& key, const std::string& value) override {
    inner_->set(prefix_ + key, value);
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    return inner_->get(prefix_ + key, timeout);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::string describe() const override { return inner_->describe(); }

 private:
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

}  // namespace tandem::dist
