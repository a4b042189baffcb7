// A GPU kernel profile of any tandem program, through CUPTI's activity records: loaded with
// LD_PRELOAD=libtandem_kernel_profile.so, it records every kernel, memcpy and memset the process
// runs on a GPU and, at exit, prints one row per kernel name (calls, total and mean time, share
// of the GPU time), largest first, and the span from the first record's start to the last one's
// end; then the host's side: the time threads spent inside CUDA runtime and driver calls, per call
// (synchronisations, allocations, module loads and launches show there). A benchmark tool (what
// bench/gpu_compare's numbers are made of), not part of tandem.
// Environment: TANDEM_KERNEL_PROFILE_OUT=FILE writes the table there instead of stderr;
// TANDEM_KERNEL_PROFILE_ROWS=N prints N rows (default 40).
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Row {
  std::uint64_t calls = 0;
  std::uint64_t ns = 0;
};

struct Profile {
  std::mutex mutex;
  std::map<std::string, Row> rows;
  std::map<std::string, Row> api_rows;  // host time in CUDA runtime / driver calls
  std::uint64_t first_start = UINT64_MAX;
  std::uint64_t last_end = 0;
  std::uint64_t dropped = 0;
  bool started = false;
};

Profile& profile() {
  static Profile* p = new Profile;  // never destroyed: CUPTI may call back during exit
  return *p;
}

constexpr std::size_t kBufferBytes = 8 << 20;

std::string readable(const char* mangled) {
  if (mangled == nullptr) return "(unnamed kernel)";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> plain(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
  std::string name = status == 0 && plain ? plain.get() : mangled;
  // Template arguments and parameter lists make rows unreadable; the kernel's name stays.
  constexpr std::size_t kWidth = 96;
  if (name.size() > kWidth) name = name.substr(0, kWidth - 3) + "...";
  return name;
}

const char* copy_kind(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "[memcpy host to device]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "[memcpy device to host]";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "[memcpy device to device]";
    default: return "[memcpy other]";
  }
}

void add(const std::string& name, std::uint64_t start, std::uint64_t end) {
  Profile& p = profile();
  Row& row = p.rows[name];
  ++row.calls;
  row.ns += end > start ? end - start : 0;
  p.first_start = std::min(p.first_start, start);
  p.last_end = std::max(p.last_end, end);
}

void add_api(const CUpti_ActivityAPI& api, CUpti_CallbackDomain domain) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, api.cbid, &name) != CUPTI_SUCCESS || name == nullptr) {
    name = "(unknown call)";
  }
  Row& row = profile().api_rows[name];
  ++row.calls;
  row.ns += api.end > api.start ? api.end - api.start : 0;
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size,
                               std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid) {
  Profile& p = profile();
  {
    const std::lock_guard<std::mutex> lock(p.mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          add(readable(k->name), k->start, k->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
          add(copy_kind(m->copyKind), m->start, m->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
          add("[memset]", m->start, m->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
          add_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record),
                  CUPTI_CB_DOMAIN_RUNTIME_API);
          break;
        case CUPTI_ACTIVITY_KIND_DRIVER:
          add_api(*reinterpret_cast<const CUpti_ActivityAPI*>(record), CUPTI_CB_DOMAIN_DRIVER_API);
          break;
        default:
          break;
      }
    }
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
      p.dropped += dropped;
    }
  }
  std::free(buffer);
}

void print_profile() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Profile& p = profile();
  const std::lock_guard<std::mutex> lock(p.mutex);
  const char* path = std::getenv("TANDEM_KERNEL_PROFILE_OUT");
  FILE* out = path && *path ? std::fopen(path, "w") : stderr;
  if (out == nullptr) out = stderr;
  const char* rows_env = std::getenv("TANDEM_KERNEL_PROFILE_ROWS");
  const long max_rows = rows_env ? std::max(1L, std::atol(rows_env)) : 40;
  std::vector<std::pair<std::string, Row>> sorted(p.rows.begin(), p.rows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::uint64_t total = 0, calls = 0;
  for (const auto& [name, row] : sorted) {
    total += row.ns;
    calls += row.calls;
  }
  const double span_ms =
      p.last_end > p.first_start ? static_cast<double>(p.last_end - p.first_start) / 1e6 : 0.0;
  std::fprintf(out, "kernel profile: %llu GPU records, %.3f ms of GPU time in a %.3f ms span%s\n",
               static_cast<unsigned long long>(calls), static_cast<double>(total) / 1e6, span_ms,
               p.dropped ? " (some records were dropped)" : "");
  std::fprintf(out, "%10s %12s %10s %7s  %s\n", "calls", "total ms", "mean us", "share", "name");
  long shown = 0;
  for (const auto& [name, row] : sorted) {
    if (shown++ == max_rows) break;
    std::fprintf(out, "%10llu %12.3f %10.2f %6.1f%%  %s\n",
                 static_cast<unsigned long long>(row.calls), static_cast<double>(row.ns) / 1e6,
                 static_cast<double>(row.ns) / 1e3 / static_cast<double>(row.calls),
                 total ? 100.0 * static_cast<double>(row.ns) / static_cast<double>(total) : 0.0,
                 name.c_str());
  }
  std::vector<std::pair<std::string, Row>> api(p.api_rows.begin(), p.api_rows.end());
  std::sort(api.begin(), api.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::fprintf(out,
               "host time in CUDA calls (every thread; runtime calls include the driver's):\n");
  std::fprintf(out, "%10s %12s %10s  %s\n", "calls", "total ms", "mean us", "call");
  shown = 0;
  for (const auto& [name, row] : api) {
    if (shown++ == std::min(max_rows, 15L)) break;
    std::fprintf(out, "%10llu %12.3f %10.2f  %s\n", static_cast<unsigned long long>(row.calls),
                 static_cast<double>(row.ns) / 1e6,
                 static_cast<double>(row.ns) / 1e3 / static_cast<double>(row.calls), name.c_str());
  }
  if (out != stderr) std::fclose(out);
}

__attribute__((constructor)) void start_profile() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel profile: CUPTI refused its callbacks; no profile\n");
    return;
  }
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                                  CUPTI_ACTIVITY_KIND_DRIVER}) {
    if (cuptiActivityEnable(kind) != CUPTI_SUCCESS) {
      std::fprintf(stderr, "kernel profile: CUPTI cannot record activity kind %d\n",
                   static_cast<int>(kind));
    }
  }
  profile().started = true;
  std::atexit(print_profile);
}

}  // namespace
