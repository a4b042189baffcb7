// The TCP key-value store rank 0 serves (as torchrun's c10d store): TcpStoreServer holds the
// keys, one thread per connected rank; TcpStore is the client every rank (rank 0 too) uses.
// Waits happen on the server, so a get() costs one round trip however long it waits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tandem/dist/socket.h"
#include "tandem/dist/store.h"

namespace tandem::dist {

class TcpStoreServer {
 public:
  // Listens on `port` on every interface (0: a free port, see port()).
  explicit TcpStoreServer(std::uint16_t port);
  ~TcpStoreServer();  // closes every connection and joins the threads
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  void accept_loop();
  void serve(std::size_t index);

  Socket listener_;
  std::uint16_t port_ = 0;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  std::vector<std::unique_ptr<Socket>> clients_;  // stable addresses
  std::vector<std::thread> threads_;
  bool stopping_ = false;
  std::thread acceptor_;
};

class TcpStore final : public Store {
 public:
  // Connects to host:port, retrying until `connect_timeout` (rank 0 may not be listening yet).
  TcpStore(std::string host, std::uint16_t port, std::chrono::milliseconds connect_timeout);
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::string describe() const override;

 private:
  // Sends a request and reads the one-byte status (and a value, if `value`), under the mutex.
  std::uint8_t call(const std::string& request, std::chrono::milliseconds wait, std::string* value,
                    const char* op);

  std::string host_;
  std::uint16_t port_;
  std::mutex mutex_;
  Socket socket_;
};

}  // namespace tandem::dist
