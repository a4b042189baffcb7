// TCP helpers: every blocking step is a poll(2) bounded by the caller's deadline.
#include "tandem/dist/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "tandem/base/check.h"

namespace tandem::dist {
namespace {

std::string errno_text(int error = errno) { return std::strerror(error); }

// Milliseconds left until `deadline`, clamped to [0, 1000] so callers re-check their state.
int poll_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1000));
}

// Waits until `fd` is ready for `events` or the deadline passes; false on timeout.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_ms(deadline));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let the read/write report the error
    if (Clock::now() >= deadline) return false;
  }
}

void set_nonblocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

void resolve(const std::string& host, std::uint16_t port, int socktype, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &out.list);
  TANDEM_CHECK(rc == 0, "cannot resolve host '", host, "': ", ::gai_strerror(rc));
}

// One connection attempt to `ai`, bounded by the deadline; invalid Socket on failure.
Socket try_connect(const addrinfo* ai, Clock::time_point deadline, int& error) {
  Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
  if (!s.valid()) {
    error = errno;
    return {};
  }
  set_nonblocking(s.fd(), true);
  if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      error = errno;
      return {};
    }
    if (!wait_ready(s.fd(), POLLOUT, deadline)) {
      error = ETIMEDOUT;
      return {};
    }
    socklen_t len = sizeof error;
    ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) return {};
  }
  set_nonblocking(s.fd(), false);
  set_nodelay(s.fd());
  return s;
}

}  // namespace

Socket::~Socket() { close(); }
Socket::Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}
void Socket::close() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}
void Socket::shutdown() const {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Socket listen_on(std::uint16_t port, int backlog) {
  Socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  bool v6 = s.valid();
  if (!v6) s = Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  TANDEM_CHECK(s.valid(), "listen: socket() failed: ", errno_text());
  const int one = 1, zero = 0;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = 0;
  if (v6) {
    ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 too
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_any;
    addr.sin6_port = htons(port);
    rc = ::bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(port);
    rc = ::bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  }
  TANDEM_CHECK(rc == 0, "listen: cannot bind port ", port, ": ", errno_text(),
               " (is another job using it? choose another MASTER_PORT)");
  TANDEM_CHECK(::listen(s.fd(), backlog) == 0, "listen on port ", port, " failed: ", errno_text());
  return s;
}

std::uint16_t local_port(const Socket& socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  TANDEM_CHECK(::getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len) == 0,
               "getsockname failed: ", errno_text());
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

Socket accept_until(const Socket& listener, Clock::time_point deadline) {
  if (!wait_ready(listener.fd(), POLLIN, deadline)) return {};
  Socket s(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
  if (s.valid()) set_nodelay(s.fd());
  return s;
}

Socket connect_until(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                     const std::string& what) {
  const auto start = Clock::now();
  int error = 0;
  for (auto pause = std::chrono::milliseconds(10);;
       pause = std::min(pause * 2, decltype(pause)(200))) {
    AddrInfo info;
    resolve(host, port, SOCK_STREAM, info);
    for (const addrinfo* ai = info.list; ai; ai = ai->ai_next) {
      Socket s = try_connect(ai, deadline, error);
      if (s.valid()) return s;
    }
    if (Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  TANDEM_FAIL("cannot connect to the ", what, " at ", host, ":", port, " after ",
              waited.count() / 1000.0, " s: ", errno_text(error));
}

std::string local_address_toward(const std::string& host) {
  AddrInfo info;
  resolve(host, 9, SOCK_DGRAM, info);
  Socket s(::socket(info.list->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  TANDEM_CHECK(s.valid(), "socket() failed: ", errno_text());
  TANDEM_CHECK(::connect(s.fd(), info.list->ai_addr, info.list->ai_addrlen) == 0,
               "no route to host '", host, "': ", errno_text());
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  TANDEM_CHECK(::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) == 0,
               "getsockname failed: ", errno_text());
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw =
      addr.ss_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&addr)->sin_addr);
  TANDEM_CHECK(::inet_ntop(addr.ss_family, raw, text, sizeof text) != nullptr,
               "inet_ntop failed: ", errno_text());
  return text;
}

IoStatus write_all(const Socket& socket, const void* data, std::size_t size,
                   Clock::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    if (!wait_ready(socket.fd(), POLLOUT, deadline)) return IoStatus::TimedOut;
    const ssize_t n = ::send(socket.fd(), p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return IoStatus::Closed;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return IoStatus::Ok;
}

IoStatus read_all(const Socket& socket, void* data, std::size_t size, Clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    if (!wait_ready(socket.fd(), POLLIN, deadline)) return IoStatus::TimedOut;
    const ssize_t n = ::recv(socket.fd(), p, size, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return IoStatus::Closed;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return IoStatus::Ok;
}

}  // namespace tandem::dist
