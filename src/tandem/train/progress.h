// What a run prints while it works: each stage as it starts, notes and warnings, and training
// progress — a live bar (images/s, loss, ETA) on a terminal, plain lines otherwise, or one JSON
// object per line with --log-format json. Not the metrics file (metrics.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tandem::train {

enum class ConsoleStyle : std::uint8_t { Bar, Lines, Json };

// Bar when `stream` is a terminal and the format is text; Lines when it is not; Json for json.
ConsoleStyle console_style_for(std::FILE* stream, bool json);

struct ProgressUpdate {
  std::int64_t step = 0;        // steps done
  std::int64_t total_steps = 0;  // steps the run will do in all (0: unknown)
  std::int64_t epoch = 0;       // 1-based
  std::int64_t epochs = 0;
  std::int64_t batch = 0;       // batches done in this epoch
  std::int64_t batches = 0;     // batches per epoch
  double loss = 0;
  double lr = 0;
  double images_per_s = 0;      // smoothed
  double eta_seconds = -1;      // < 0: unknown
};

class Console {
 public:
  Console(std::FILE* out, std::FILE* err, ConsoleStyle style);
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  ConsoleStyle style() const { return style_; }
  // "==> train: 1876 steps (2 epochs of 938 batches)"
  void stage(const std::string& name, const std::string& detail);
  void note(const std::string& text);     // an indented line under the current stage
  void warning(const std::string& text);  // "warning: ..." on the error stream
  // A bar redraw (at most ten a second, and always for the last step), or a plain line every
  // `line_every` steps and at each epoch's end.
  void progress(const ProgressUpdate& update);
  void end_progress();  // ends a bar's line

 private:
  std::FILE* out_;
  std::FILE* err_;
  ConsoleStyle style_;
  bool bar_open_ = false;
  double last_draw_ = -1;
};

// "1:02:03" or "4:05".
std::string format_duration(double seconds);

}  // namespace tandem::train
