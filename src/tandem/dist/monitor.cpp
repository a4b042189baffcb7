// The monitor's wire format: after a 4-byte hello (the connecting rank), 16-byte beats
// {seq u64, goodbye u64} every kBeat from each rank to every other, read by one thread per rank.
#include "tandem/dist/monitor.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <sstream>

#include "tandem/base/check.h"

namespace tandem::dist {
namespace {

constexpr auto kBeat = std::chrono::milliseconds(500);
constexpr auto kSilent = std::chrono::seconds(3);  // no beat for this long: stopped or hung

struct Beat {
  std::uint64_t seq = 0;
  std::uint64_t goodbye = 0;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string fixed1(double v) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << v;
  return out.str();
}

}  // namespace

PeerMonitor::PeerMonitor(int rank, int size, Store& store, const std::string& address,
                         std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), peers_(static_cast<std::size_t>(size)) {
  const auto deadline = deadline_in(timeout);
  Socket listener = listen_on(0);
  store.set("monitor/" + std::to_string(rank),
            address + " " + std::to_string(local_port(listener)));
  for (int j = 0; j < rank; ++j) {  // connect to the lower ranks, accept the higher ones
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::istringstream where(store.get("monitor/" + std::to_string(j), left));
    std::string host;
    std::uint16_t port = 0;
    where >> host >> port;
    Socket s = connect_until(host, port, deadline, "monitor of rank " + std::to_string(j));
    const std::uint32_t hello = static_cast<std::uint32_t>(rank);
    TANDEM_CHECK(write_all(s, &hello, sizeof hello, deadline) == IoStatus::Ok,
                 "process group: rank ", j, " closed its monitor connection during start-up");
    peers_[static_cast<std::size_t>(j)].socket = std::move(s);
  }
  for (int k = rank + 1; k < size; ++k) {
    Socket s = accept_until(listener, deadline);
    std::uint32_t hello = 0;
    TANDEM_CHECK(s.valid() && read_all(s, &hello, sizeof hello, deadline) == IoStatus::Ok &&
                     static_cast<int>(hello) > rank && static_cast<int>(hello) < size,
                 "process group: only ", k - rank - 1, " of ranks ", rank + 1, "..", size - 1,
                 " connected to rank ", rank, "'s monitor within ", timeout.count() / 1000.0, " s");
    peers_[hello].socket = std::move(s);
  }
  for (Peer& p : peers_) p.heard = Clock::now();
  thread_ = std::thread([this] { loop(); });
}

PeerMonitor::~PeerMonitor() {
  stopping_ = true;
  thread_.join();
}

void PeerMonitor::loop() {
  std::vector<std::string> pending(peers_.size());  // partial beats per peer
  auto next_beat = Clock::now();
  for (;;) {
    const bool last = stopping_.load();
    if (last || Clock::now() >= next_beat) {
      const Beat beat{seq_.load(std::memory_order_relaxed), last ? 1u : 0u};
      for (Peer& p : peers_) {  // only this thread writes the sockets
        if (p.socket.valid()) write_all(p.socket, &beat, sizeof beat, deadline_in(kBeat / 5));
      }
      next_beat = Clock::now() + kBeat;
    }
    if (last) return;
    std::vector<pollfd> fds;
    std::vector<std::size_t> who;
    for (std::size_t j = 0; j < peers_.size(); ++j) {
      if (peers_[j].socket.valid()) {
        fds.push_back({peers_[j].socket.fd(), POLLIN, 0});
        who.push_back(j);
      }
    }
    ::poll(fds.data(), fds.size(), 100);
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Peer& p = peers_[who[i]];
      char buffer[256];
      const ssize_t n = ::recv(p.socket.fd(), buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        p.dead = !p.goodbye;
        p.closed = Clock::now();
        p.socket.close();
        continue;
      }
      p.heard = Clock::now();
      std::string& buf = pending[who[i]];
      buf.append(buffer, static_cast<std::size_t>(n));
      while (buf.size() >= sizeof(Beat)) {
        Beat beat;
        std::memcpy(&beat, buf.data(), sizeof beat);
        buf.erase(0, sizeof beat);
        p.seq = beat.seq;
        p.goodbye = p.goodbye || beat.goodbye != 0;
      }
    }
    ++rounds_;
    round_done_.notify_all();
  }
}

std::string PeerMonitor::diagnose(std::uint64_t seq) {
  const auto settled = Clock::now() + kBeat + kBeat / 5;  // every live peer has beaten since
  std::unique_lock lock(mutex_);
  const std::uint64_t start = rounds_;
  round_done_.wait_until(lock, settled + std::chrono::seconds(1),
                         [&] { return rounds_ >= start + 2 && Clock::now() >= settled; });
  std::vector<std::string> dead, silent, behind;
  for (int j = 0; j < size_; ++j) {
    const Peer& p = peers_[static_cast<std::size_t>(j)];
    const std::string name = "rank " + std::to_string(j);
    if (j == rank_) continue;
    if (p.dead) {
      dead.push_back(name + " exited or died (its connection closed " +
                     fixed1(seconds_since(p.closed)) + " s ago)");
    } else if (p.goodbye) {
      dead.push_back(name + " has already left the job");
    } else if (Clock::now() - p.heard > kSilent) {
      silent.push_back(name + " is stopped or hung (silent for " + fixed1(seconds_since(p.heard)) +
                       " s)");
    } else if (p.seq < seq) {
      behind.push_back(name + " has not reached this collective (it is in collective #" +
                       std::to_string(p.seq) + ")");
    }
  }
  std::string out;
  for (const auto* list : {&dead, &silent, &behind}) {
    for (const auto& s : *list) out += (out.empty() ? "" : "; ") + s;
  }
  return out;
}

}  // namespace tandem::dist
