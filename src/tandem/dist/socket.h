// TCP helpers for the dist layer's own sockets (the rendezvous store, the peer monitor): an owned
// descriptor, listen/accept/connect with deadlines, whole-message reads and writes with deadlines.
// Not a networking library: IPv4/IPv6 stream sockets only, every failure a tandem::Error.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem::dist {

using Clock = std::chrono::steady_clock;

// A socket closed on scope exit; movable.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  // Wakes a thread blocked reading this socket (shutdown(2) both ways); the fd stays open.
  void shutdown() const;

 private:
  int fd_ = -1;
};

// A socket listening on `port` (0: any free port) on every interface.
Socket listen_on(std::uint16_t port, int backlog = 64);
// The port a listening socket is bound to.
std::uint16_t local_port(const Socket& socket);
// Accepts one connection, or returns an invalid Socket when nothing arrived before `deadline`.
Socket accept_until(const Socket& listener, Clock::time_point deadline);
// Connects to host:port, retrying refused/unreachable attempts until `deadline` (the server may
// not be up yet). The error names `what` (e.g. "rendezvous store"), the address and the wait.
Socket connect_until(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                     const std::string& what);
// The local address this host would use to reach `host` (no packet is sent): the address peers
// can reach this process at, for loopback as for a real network.
std::string local_address_toward(const std::string& host);

enum class IoStatus : std::uint8_t { Ok, Closed, TimedOut };
// Writes all of `size` bytes, or reports why not (a peer that closed; the deadline).
IoStatus write_all(const Socket& socket, const void* data, std::size_t size,
                   Clock::time_point deadline);
// Reads exactly `size` bytes, or reports why not.
IoStatus read_all(const Socket& socket, void* data, std::size_t size, Clock::time_point deadline);

// A deadline `timeout` from now.
inline Clock::time_point deadline_in(std::chrono::milliseconds timeout) {
  return Clock::now() + timeout;
}

}  // namespace tandem::dist
