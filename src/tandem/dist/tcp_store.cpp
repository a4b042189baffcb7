// TCP store wire format (little-endian, one request then one reply per round trip):
//   request: op u8 | timeout_ms u32 | nkeys u32 | (len u32, key)* | [len u32, value]  (value: set)
//   reply:   status u8 (1: done, 0: timed out) | [len u32, value]                       (value:
//   get)
#include "tandem/dist/tcp_store.h"

#include <algorithm>
#include <cstring>

#include "tandem/base/check.h"

namespace tandem::dist {
namespace {

enum Op : std::uint8_t { kSet = 1, kGet = 2, kWait = 3 };
constexpr auto kMessageTimeout = std::chrono::seconds(30);  // for the bytes of one message

void put_u32(std::string& out, std::uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), 4);
}
void put_bytes(std::string& out, const std::string& s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

bool read_u32(const Socket& s, std::uint32_t& v, Clock::time_point deadline) {
  return read_all(s, &v, 4, deadline) == IoStatus::Ok;
}
bool read_bytes(const Socket& s, std::string& out, Clock::time_point deadline) {
  std::uint32_t n = 0;
  if (!read_u32(s, n, deadline)) return false;
  out.resize(n);
  return n == 0 || read_all(s, out.data(), n, deadline) == IoStatus::Ok;
}

std::string join(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

}  // namespace

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::string> full;
  for (const auto& k : keys) full.push_back(prefix_ + k);
  inner_->wait(full, timeout);
}

// ---- server ----

TcpStoreServer::TcpStoreServer(std::uint16_t port) : listener_(listen_on(port)) {
  port_ = local_port(listener_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& c : clients_) c->shutdown();
  }
  changed_.notify_all();
  acceptor_.join();
  for (std::thread& t : threads_) t.join();
}

void TcpStoreServer::accept_loop() {
  for (;;) {
    Socket s = accept_until(listener_, deadline_in(std::chrono::milliseconds(100)));
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (!s.valid()) continue;
    clients_.push_back(std::make_unique<Socket>(std::move(s)));
    const std::size_t index = clients_.size() - 1;
    threads_.emplace_back([this, index] { serve(index); });
  }
}

void TcpStoreServer::serve(std::size_t index) {
  const Socket* client = nullptr;
  {
    std::lock_guard lock(mutex_);
    client = clients_[index].get();  // owned until the destructor has joined this thread
  }
  const Socket& s = *client;
  for (;;) {
    std::uint8_t op = 0;
    IoStatus st = IoStatus::TimedOut;
    while (st == IoStatus::TimedOut) {
      st = read_all(s, &op, 1, deadline_in(std::chrono::milliseconds(200)));
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    if (st != IoStatus::Ok) return;  // the rank disconnected
    const auto deadline = Clock::now() + kMessageTimeout;
    std::uint32_t timeout_ms = 0, nkeys = 0;
    if (!read_u32(s, timeout_ms, deadline) || !read_u32(s, nkeys, deadline)) return;
    std::vector<std::string> keys(nkeys);
    for (auto& k : keys) {
      if (!read_bytes(s, k, deadline)) return;
    }
    std::string reply;
    if (op == kSet) {
      std::string value;
      if (nkeys != 1 || !read_bytes(s, value, deadline)) return;
      {
        std::lock_guard lock(mutex_);
        values_.emplace(keys[0], std::move(value));
      }
      changed_.notify_all();
      reply.push_back(1);
    } else if (op == kGet || op == kWait) {
      std::unique_lock lock(mutex_);
      const bool done =
          changed_.wait_until(lock, Clock::now() + std::chrono::milliseconds(timeout_ms), [&] {
            return stopping_ || std::all_of(keys.begin(), keys.end(),
                                            [&](const auto& k) { return values_.count(k) > 0; });
          });
      if (stopping_) return;
      reply.push_back(done ? 1 : 0);
      if (done && op == kGet && nkeys == 1) put_bytes(reply, values_.at(keys[0]));
    } else {
      return;  // not a tandem client
    }
    if (write_all(s, reply.data(), reply.size(), Clock::now() + kMessageTimeout) != IoStatus::Ok)
      return;
  }
}

// ---- client ----

TcpStore::TcpStore(std::string host, std::uint16_t port, std::chrono::milliseconds connect_timeout)
    : host_(std::move(host)), port_(port) {
  socket_ = connect_until(host_, port_, deadline_in(connect_timeout),
                          "rendezvous store (served by rank 0)");
}

std::string TcpStore::describe() const {
  return "TCP store at " + host_ + ":" + std::to_string(port_) + " (served by rank 0)";
}

std::uint8_t TcpStore::call(const std::string& request, std::chrono::milliseconds wait,
                            std::string* value, const char* op) {
  std::lock_guard lock(mutex_);
  TANDEM_CHECK(socket_.valid(), describe(), ": ", op, " after an earlier failure");
  const auto deadline = Clock::now() + wait + kMessageTimeout;
  IoStatus st = write_all(socket_, request.data(), request.size(), deadline);
  std::uint8_t status = 0;
  if (st == IoStatus::Ok) st = read_all(socket_, &status, 1, deadline);
  if (st == IoStatus::Ok && value && status == 1) {
    st = read_bytes(socket_, *value, deadline) ? IoStatus::Ok : IoStatus::Closed;
  }
  if (st != IoStatus::Ok) {
    socket_.close();
    TANDEM_FAIL(describe(), ": ", op, " failed: ",
                st == IoStatus::Closed ? "the connection closed (rank 0 exited or died)"
                                       : "no answer (rank 0 is stalled)");
  }
  return status;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  std::string request(1, static_cast<char>(kSet));
  put_u32(request, 0);
  put_u32(request, 1);
  put_bytes(request, key);
  put_bytes(request, value);
  call(request, std::chrono::milliseconds(0), nullptr, "set");
}

std::string TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::string request(1, static_cast<char>(kGet));
  put_u32(request, static_cast<std::uint32_t>(timeout.count()));
  put_u32(request, 1);
  put_bytes(request, key);
  std::string value;
  TANDEM_CHECK(call(request, timeout, &value, "get") == 1, describe(), ": key '", key,
               "' not set within ", timeout.count() / 1000.0, " s");
  return value;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::string request(1, static_cast<char>(kWait));
  put_u32(request, static_cast<std::uint32_t>(timeout.count()));
  put_u32(request, static_cast<std::uint32_t>(keys.size()));
  for (const auto& k : keys) put_bytes(request, k);
  TANDEM_CHECK(call(request, timeout, nullptr, "wait") == 1, describe(), ": keys ", join(keys),
               " not all set within ", timeout.count() / 1000.0, " s");
}

}  // namespace tandem::dist
