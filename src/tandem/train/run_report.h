// What a run reports besides metrics.jsonl: report.html rebuilt after each epoch and at the end,
// TensorBoard scalars with --tensorboard, and the devices' share table printed at the end. A
// report that cannot be written is a warning, never the end of a training run.
#pragma once

#include <optional>
#include <string>

#include "tandem/report/tfevents.h"
#include "tandem/train/metrics.h"
#include "tandem/train/progress.h"
#include "tandem/train/run_dir.h"

namespace tandem::train {

class RunReporter {
 public:
  RunReporter(RunDir run, bool tensorboard, Console& console);
  void step(const StepMetrics& m);    // TensorBoard scalars of the step
  void epoch(const EpochMetrics& m);  // TensorBoard scalars of the epoch; report.html rebuilt
  void finish();                      // report.html rebuilt; the share table printed

 private:
  void refresh();
  RunDir run_;
  Console& console_;
  std::optional<report::EventFileWriter> events_;
};

}  // namespace tandem::train
