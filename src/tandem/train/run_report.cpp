// report.html refreshes, TensorBoard scalars and the closing share table of a training run.
#include "tandem/train/run_report.h"

#include "tandem/base/check.h"
#include "tandem/report/report_file.h"
#include "tandem/report/share.h"

namespace tandem::train {

RunReporter::RunReporter(RunDir run, bool tensorboard, Console& console)
    : run_(std::move(run)), console_(console) {
  if (tensorboard) events_.emplace(run_.path);
}

void RunReporter::step(const StepMetrics& m) {
  if (!events_) return;
  report::Scalars scalars = {{"train/loss", m.loss}, {"train/lr", m.lr},
                             {"train/images_per_s", m.images_per_s}};
  if (m.accuracy) scalars.emplace_back("train/accuracy", *m.accuracy);
  events_->add_scalars(m.step, scalars, m.time);
}

void RunReporter::epoch(const EpochMetrics& m) {
  if (events_) {
    report::Scalars scalars = {{"epoch/train_loss", m.loss}, {"epoch/images_per_s", m.images_per_s}};
    if (m.train_accuracy) scalars.emplace_back("epoch/train_accuracy", *m.train_accuracy);
    if (m.test_loss) scalars.emplace_back("epoch/test_loss", *m.test_loss);
    if (m.test_accuracy) scalars.emplace_back("epoch/test_accuracy", *m.test_accuracy);
    events_->add_scalars(m.step, scalars, m.time);
  }
  refresh();
}

void RunReporter::refresh() {
  try {
    report::write_report(run_.path);
  } catch (const Error& e) {
    console_.warning(std::string("report.html not updated: ") + e.what());
  }
}

void RunReporter::finish() {
  try {
    const report::RunData data = report::write_report(run_.path);
    console_.stage("report", report::report_path(run_.path));
    for (const std::string& line : report::share_table_lines(report::share_table(data.devices))) {
      console_.note(line);
    }
    if (const auto slowest = report::slowest_device(data.devices); slowest && data.devices.size() > 1) {
      console_.note("slowest device: " + data.devices[*slowest].name);
    }
  } catch (const Error& e) {
    console_.warning(std::string("report.html not written: ") + e.what());
  }
}

}  // namespace tandem::train
