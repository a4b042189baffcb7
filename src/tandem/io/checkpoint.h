// Crash-safe checkpoints: a directory per checkpoint (model.safetensors, state.safetensors,
// state.json, and manifest.json with every file's size and CRC-32), written under a temporary
// name, fsynced, renamed into place and the parent fsynced. Reading verifies every size and
// checksum before trusting a byte. What goes in state.json is the caller's (train/) business.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tandem/nn/module.h"

namespace tandem::io {

struct CheckpointContents {
  nn::StateDict model;          // model.safetensors: PyTorch's names, loads in PyTorch as-is
  nn::StateDict state_tensors;  // state.safetensors: optimizer buffers and other tensor state
  std::string state_json;       // state.json: everything else, as one JSON document
};

// A checkpoint directory's name for a step: "step-00000100".
std::string checkpoint_name(std::int64_t step);

// Writes `contents` as <dir>/<checkpoint_name(step)> (creating dir if needed) and returns that
// path. An existing checkpoint of the same step is replaced only once the new one is complete.
std::string write_checkpoint(const std::string& dir, std::int64_t step,
                             const CheckpointContents& contents);

// Reads a checkpoint directory, checking the manifest, every file's size and CRC-32, and the
// safetensors headers; a damaged or truncated checkpoint throws tandem::Error naming the file.
CheckpointContents read_checkpoint(const std::string& path);

// The complete-looking checkpoint directories in `dir` (named step-N), newest (highest step)
// first; none when dir does not exist.
std::vector<std::string> list_checkpoints(const std::string& dir);

struct FoundCheckpoint {
  std::string path;
  CheckpointContents contents;
};
// The newest checkpoint in `dir` that reads back intact; each damaged one met on the way is
// reported through `warn` (one line naming it and the problem) and skipped.
std::optional<FoundCheckpoint> find_latest_checkpoint(
    const std::string& dir, const std::function<void(const std::string&)>& warn);

// Removes all but the newest `keep` checkpoints in `dir`, and leftovers of interrupted writes.
void prune_checkpoints(const std::string& dir, std::int64_t keep);

// CRC-32 (zlib's, as in gzip and PNG) of a byte range.
std::uint32_t crc32_of(const void* data, std::size_t size);

}  // namespace tandem::io
