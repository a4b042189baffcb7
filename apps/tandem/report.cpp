// `tandem report RUN_DIR`: rebuilds RUN_DIR/report.html from RUN_DIR/metrics.jsonl (a crashed or
// running run's too) and prints the devices' share table. Writes nothing else.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "tandem/report/report_file.h"
#include "tandem/report/share.h"

namespace tandem::app {

Command add_report_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "report", "Rebuild a run directory's report.html from its metrics.jsonl");
  auto run_dir = std::make_shared<std::string>();
  cmd->add_option("RUN_DIR", *run_dir, "The run directory (holds metrics.jsonl)")->required();
  return [run_dir]() {
    const report::RunData data = report::write_report(*run_dir);
    std::printf("%s\n", report::report_path(*run_dir).c_str());
    for (const std::string& line : report::share_table_lines(report::share_table(data.devices))) {
      std::printf("  %s\n", line.c_str());
    }
    if (data.skipped_lines > 0) {
      std::printf("note: %zu unreadable line(s) of metrics.jsonl skipped, the first at line %zu\n",
                  data.skipped_lines, data.first_skipped);
    }
    return 0;
  };
}

}  // namespace tandem::app
