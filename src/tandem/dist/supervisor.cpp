// One attempt of a launched job: fork/exec the workers with piped output, then a single poll
// loop that relays output line by line, reaps exits, forwards signals and enforces the grace.
#include "tandem/dist/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>

#include "tandem/base/check.h"

extern char** environ;

namespace tandem::dist {
namespace {

int g_signal_pipe[2] = {-1, -1};  // the handler's self-pipe (written with the signal number)

void on_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}

// SIGINT/SIGTERM go to the self-pipe for the duration of one attempt.
class SignalRelay {
 public:
  SignalRelay() {
    TANDEM_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0,
                 "launch: pipe failed: ", std::strerror(errno));
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalRelay() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
  }
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

struct Stream {
  int fd = -1;     // read end of the worker's stdout or stderr pipe
  int out_fd = 1;  // where its lines go
  std::string partial;
};

struct Running {
  pid_t pid = -1;
  std::string label;
  bool reaped = false;
  Stream streams[2];
};

std::vector<std::string> environment_with(const WorkerSpec& spec) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    const std::size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : spec.env) vars[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Running spawn(const WorkerSpec& spec) {
  TANDEM_CHECK(!spec.argv.empty(), "launch: empty worker command");
  std::vector<std::string> args = spec.argv, env = environment_with(spec);
  std::vector<char*> argv = pointers(args), envp = pointers(env);
  int out[2], err[2];
  TANDEM_CHECK(::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(err, O_CLOEXEC) == 0,
               "launch: pipe failed: ", std::strerror(errno));
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : spec.cpus) {
    TANDEM_CHECK(c >= 0 && c < CPU_SETSIZE, "launch: no CPU ", c);
    CPU_SET(c, &cpus);
  }
  // SIGINT/SIGTERM stay blocked across the fork, so a signal meant for the new worker waits
  // until it has the default handlers again instead of running the launcher's.
  sigset_t relayed, before;
  sigemptyset(&relayed);
  sigaddset(&relayed, SIGINT);
  sigaddset(&relayed, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &relayed, &before);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {  // the worker: only async-signal-safe calls until exec
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    ::setpgid(0, 0);
    if (!spec.cpus.empty()) ::sched_setaffinity(0, sizeof cpus, &cpus);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the launcher died: so does the worker
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execvpe(argv[0], argv.data(), envp.data());
    static const char msg[] = "launch: cannot execute the worker command\n";
    [[maybe_unused]] const ssize_t n = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  const int fork_error = errno;
  ::sigprocmask(SIG_SETMASK, &before, nullptr);
  TANDEM_CHECK(pid >= 0, "launch: fork failed: ", std::strerror(fork_error));
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(err[1]);
  Running r;
  r.pid = pid;
  r.label = spec.label;
  r.streams[0] = {out[0], 1, {}};
  r.streams[1] = {err[0], 2, {}};
  for (const Stream& s : r.streams) ::fcntl(s.fd, F_SETFL, O_NONBLOCK);
  return r;
}

void write_fully(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the launcher's own output is gone; nothing better to do
    done += static_cast<std::size_t>(n);
  }
}

// Relays what is readable on `s`; at end of file flushes a last partial line and closes it.
void relay(Stream& s, const std::string& label) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(s.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: drained for now
    if (n == 0) {
      if (!s.partial.empty()) write_fully(s.out_fd, "[" + label + "] " + s.partial + "\n");
      s.partial.clear();
      ::close(s.fd);
      s.fd = -1;
      return;
    }
    s.partial.append(buffer, static_cast<std::size_t>(n));
    std::string lines;
    std::size_t start = 0;
    for (std::size_t nl; (nl = s.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      lines += "[" + label + "] " + s.partial.substr(start, nl + 1 - start);
    }
    s.partial.erase(0, start);
    write_fully(s.out_fd, lines);
  }
}

std::string describe_exit(const Running& r, int status) {
  std::string who = r.label + " (pid " + std::to_string(r.pid) + ")";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = ::sigabbrev_np(sig);
    return who + " was killed by signal " + std::to_string(sig) + " (SIG" +
           (abbrev ? abbrev : "?") + ")";
  }
  return who + " exited with status " + std::to_string(WEXITSTATUS(status));
}

void signal_all(const std::vector<Running>& workers, int sig) {
  for (const Running& r : workers) {
    if (!r.reaped) ::kill(-r.pid, sig);  // its process group: the worker and anything it started
  }
}

}  // namespace

AttemptResult run_workers(const std::vector<WorkerSpec>& specs, const SupervisorOptions& options) {
  SignalRelay relay_signals;
  std::vector<Running> workers;
  AttemptResult result;
  result.exits.resize(specs.size());
  const auto started = std::chrono::steady_clock::now();
  const auto time_limit = options.time_limit.count() > 0
                              ? started + options.time_limit
                              : std::chrono::steady_clock::time_point::max();
  bool stopping = false;
  auto kill_at = std::chrono::steady_clock::time_point::max();
  auto stop = [&](int sig) {
    if (stopping) return;
    stopping = true;
    signal_all(workers, sig);
    kill_at = std::chrono::steady_clock::now() + options.grace;
  };
  try {
    for (const WorkerSpec& spec : specs) workers.push_back(spawn(spec));
  } catch (...) {
    signal_all(workers, SIGKILL);
    for (Running& r : workers) ::waitpid(r.pid, nullptr, 0);
    throw;
  }

  std::size_t alive = workers.size();
  auto all_reaped_at = std::chrono::steady_clock::time_point::max();
  for (;;) {
    std::vector<pollfd> fds{{g_signal_pipe[0], POLLIN, 0}};
    std::vector<Stream*> streams;
    for (Running& r : workers) {
      for (Stream& s : r.streams) {
        if (s.fd >= 0) {
          fds.push_back({s.fd, POLLIN, 0});
          streams.push_back(&s);
        }
      }
    }
    if (alive == 0 && (streams.empty() || std::chrono::steady_clock::now() > all_reaped_at)) break;
    ::poll(fds.data(), fds.size(), 100);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      for (Running& r : workers) {
        for (Stream& s : r.streams) {
          if (&s == streams[i - 1]) relay(s, r.label);
        }
      }
    }
    unsigned char sig = 0;
    if (::read(g_signal_pipe[0], &sig, 1) == 1) {
      if (result.outcome == AttemptResult::Outcome::Success) {
        result.outcome = AttemptResult::Outcome::Interrupted;
        result.signal = sig;
      }
      if (stopping) {
        signal_all(workers, SIGKILL);  // a second signal: no more grace
      } else {
        stop(sig);
      }
    }
    for (std::size_t w = 0; w < workers.size(); ++w) {
      Running& r = workers[w];
      int status = 0;
      if (r.reaped || ::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
      r.reaped = true;
      --alive;
      WorkerExit& exit = result.exits[w];
      exit.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      exit.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      exit.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (!exit.ok() && result.outcome == AttemptResult::Outcome::Success) {
        result.outcome = AttemptResult::Outcome::WorkerFailed;
        result.failure = describe_exit(r, status);
        if (options.on_failure == OnFailure::StopOthers) stop(SIGTERM);
      }
    }
    if (alive > 0 && std::chrono::steady_clock::now() >= time_limit) {
      if (result.outcome != AttemptResult::Outcome::Interrupted) {
        result.outcome = AttemptResult::Outcome::TimedOut;
        result.failure = "the workers did not finish within " +
                         std::to_string(options.time_limit.count() / 1000.0) + " s";
      }
      signal_all(workers, SIGKILL);
    }
    if (alive == 0 && all_reaped_at == std::chrono::steady_clock::time_point::max()) {
      all_reaped_at = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    if (std::chrono::steady_clock::now() >= kill_at) {
      signal_all(workers, SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
  }
  for (Running& r : workers) {
    for (Stream& s : r.streams) {
      if (s.fd >= 0) ::close(s.fd);  // held open by a grandchild; stop relaying it
    }
  }
  return result;
}

}  // namespace tandem::dist
