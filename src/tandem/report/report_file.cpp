// Rebuilding report.html from metrics.jsonl.
#include "tandem/report/report_file.h"

#include <filesystem>

#include "tandem/io/file_util.h"
#include "tandem/report/html.h"

namespace tandem::report {
namespace fs = std::filesystem;

std::string report_path(const std::string& run_dir) { return (fs::path(run_dir) / "report.html").string(); }

RunData write_report(const std::string& run_dir) {
  RunData run = read_metrics((fs::path(run_dir) / "metrics.jsonl").string());
  fs::path name = fs::path(run_dir).filename();
  if (name.empty()) name = fs::path(run_dir).parent_path().filename();  // "runs/x/"
  const std::string html = render_html(run, name.string());
  io::write_atomic(report_path(run_dir), {{html.data(), html.size()}}, "report");
  return run;
}

}  // namespace tandem::report
