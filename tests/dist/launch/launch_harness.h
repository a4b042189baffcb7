// Harness of the `tandem launch` tests: running the binary with its output in files, and two
// network namespaces joined by a veth pair (two "machines" on one host).
#pragma once

#include <cstdlib>

#include "../dist_harness.h"

namespace tandem::dist::testing {

// A finished command: its exit status and what it printed.
struct Launched {
  int status = -1;
  std::string out, err;
};

// Runs `command` through the shell (killed after two minutes at most), its output in dir/out and
// dir/err; `env` ("A=1 B=2 ") is put before it.
inline Launched run_command(const std::string& command, const TempDir& dir,
                            const std::string& env = "") {
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  const int raw =
      std::system((env + "timeout -s KILL 120 " + command + " > " + out + " 2> " + err).c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(out), read_text(err)};
}

// `tandem launch FLAGS --master-port (free) -- dist_worker WORKER_ARGS DIR`.
inline Launched launch(const std::string& flags, const std::string& worker_args,
                       const TempDir& dir) {
  return run_command(std::string(TANDEM_BINARY) + " launch " + flags + " --master-port " +
                         std::to_string(free_port()) + " --grace 2 -- " + TANDEM_DIST_WORKER + " " +
                         worker_args + " " + dir.path().string(),
                     dir, "TANDEM_TEST_TIMEOUT_MS=5000 ");
}

// Two network namespaces joined by a veth pair: two "machines" on one host, removed on scope exit.
class TwoHosts {
 public:
  TwoHosts() {
    const std::string id = std::to_string(::getpid() % 100000);
    a_ = "tnA" + id;
    b_ = "tnB" + id;
    const int subnet = 16 + ::getpid() % 200;
    addr_a_ = "10.213." + std::to_string(subnet) + ".1";
    addr_b_ = "10.213." + std::to_string(subnet) + ".2";
    const std::string va = "tva" + id, vb = "tvb" + id;
    const std::string script =
        "set -e; ip netns add " + a_ + "; ip netns add " + b_ + "; ip link add " + va +
        " type veth peer name " + vb + "; ip link set " + va + " netns " + a_ + "; ip link set " +
        vb + " netns " + b_ + "; ip -n " + a_ + " addr add " + addr_a_ + "/24 dev " + va +
        "; ip -n " + b_ + " addr add " + addr_b_ + "/24 dev " + vb + "; for n in " + a_ + " " + b_ +
        "; do ip -n $n link set lo up; done; ip -n " + a_ + " link set " + va + " up; ip -n " + b_ +
        " link set " + vb + " up";
    const std::string log = (dir_ / "ip.log").string();
    ok_ = std::system(("(" + script + ") > " + log + " 2>&1").c_str()) == 0;
    reason_ = read_text(log);
  }
  ~TwoHosts() {
    std::system(
        ("ip netns del " + a_ + " 2>/dev/null; ip netns del " + b_ + " 2>/dev/null").c_str());
  }
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;
  bool ok() const { return ok_; }
  // Why the test is skipped when ok() is false.
  std::string skip_message() const {
    return "cannot create network namespaces and a veth pair here (needs root or CAP_NET_ADMIN "
           "and iproute2): " +
           reason_;
  }
  const std::string& ns(int node) const { return node == 0 ? a_ : b_; }
  const std::string& master() const { return addr_a_; }

 private:
  TempDir dir_;
  std::string a_, b_, addr_a_, addr_b_, reason_;
  bool ok_ = false;
};

// Runs `tandem launch --nnodes 2 --node-rank K --master-addr (namespace 0) --master-port (free)
// FLAGS -- COMMAND` in each namespace (node K in namespace K) and waits for both.
inline AttemptResult run_two_nodes(const TwoHosts& hosts, const std::string& flags,
                                   const std::string& command,
                                   std::vector<std::pair<std::string, std::string>> env = {}) {
  const std::string port = std::to_string(free_port());
  std::vector<WorkerSpec> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back({{"ip", "netns", "exec", hosts.ns(node), "/bin/sh", "-c",
                      std::string(TANDEM_BINARY) + " launch --nnodes 2 --node-rank " +
                          std::to_string(node) + " --master-addr " + hosts.master() +
                          " --master-port " + port + " " + flags + " -- " + command},
                     env,
                     "node " + std::to_string(node)});
  }
  return run_workers(nodes, {.time_limit = std::chrono::seconds(90)});
}

}  // namespace tandem::dist::testing
