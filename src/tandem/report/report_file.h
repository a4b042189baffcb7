// report.html in a run directory, rebuilt from that directory's metrics.jsonl and replaced
// atomically (a crash leaves the previous report, never half of one). What `tandem train` calls
// after each epoch and at its end, and `tandem report RUN_DIR` runs.
#pragma once

#include <string>

#include "tandem/report/run_data.h"

namespace tandem::report {

std::string report_path(const std::string& run_dir);  // <run_dir>/report.html

// Reads <run_dir>/metrics.jsonl, writes <run_dir>/report.html; returns what it read. An error
// names the file when metrics.jsonl cannot be read or the report cannot be written.
RunData write_report(const std::string& run_dir);

}  // namespace tandem::report
