// The run directory: everything a run writes lives under it (config.json, metrics.jsonl,
// model.safetensors, checkpoints/). By default runs/<UTC timestamp>, made unique.
#pragma once

#include <string>

namespace tandem::train {

struct RunDir {
  std::string path;
  std::string config() const { return path + "/config.json"; }
  std::string metrics() const { return path + "/metrics.jsonl"; }
  std::string model() const { return path + "/model.safetensors"; }
  std::string checkpoints() const { return path + "/checkpoints"; }
};

// "runs/20240131-120502" (UTC), with "-2", "-3", ... appended when that exists already.
std::string default_run_path();
// Creates `path` (and its parents); an error naming it when that fails or it is not a directory.
RunDir make_run_dir(const std::string& path);
// The newest run under runs/ (by name) that has a checkpoints/ directory; empty when none.
std::string newest_run_with_checkpoints(const std::string& runs = "runs");

// Writes `text` to `path` through a temporary file and a rename (fsynced), as config.json is.
void write_text_atomic(const std::string& path, const std::string& text);

}  // namespace tandem::train
