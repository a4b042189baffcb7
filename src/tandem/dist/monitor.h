// PeerMonitor: a small TCP mesh beside the collectives that tells, when one of them fails or
// times out, which rank is to blame: one that died (its socket closed), one that stopped (silent
// for seconds) or one that lags (it has not entered the collective the others wait in).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tandem/dist/socket.h"
#include "tandem/dist/store.h"

namespace tandem::dist {

class PeerMonitor {
 public:
  // Connects to every other rank through addresses published in `store` (key "monitor/<rank>");
  // `address` is where the others reach this rank. Fails after `timeout` naming absent ranks.
  PeerMonitor(int rank, int size, Store& store, const std::string& address,
              std::chrono::milliseconds timeout);
  ~PeerMonitor();  // says goodbye, so the others see a finished rank, not a dead one
  PeerMonitor(const PeerMonitor&) = delete;
  PeerMonitor& operator=(const PeerMonitor&) = delete;

  // This rank entered collective number `seq` (1, 2, ...); the others learn it within 0.5 s.
  void entered(std::uint64_t seq) { seq_.store(seq, std::memory_order_relaxed); }
  // After collective `seq` failed: one sentence per rank that explains it ("rank 2 exited or
  // died: its connection closed 0.2 s ago"), or an empty string when every rank looks healthy.
  // Waits for two monitor rounds first (< 0.5 s), so a death that caused the failure is seen.
  std::string diagnose(std::uint64_t seq);

 private:
  struct Peer {
    Socket socket;
    std::uint64_t seq = 0;     // the last collective it reported entering
    Clock::time_point heard;   // when it last sent anything
    Clock::time_point closed;  // when its socket closed
    bool goodbye = false, dead = false;
  };
  void loop();

  int rank_, size_;
  std::vector<Peer> peers_;  // [rank]; this rank's own entry is unused
  std::atomic<std::uint64_t> seq_{0};
  std::mutex mutex_;
  std::condition_variable round_done_;
  std::uint64_t rounds_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace tandem::dist
