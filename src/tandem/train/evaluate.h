// Evaluation of a classifier over a loader under NoGradGuard, in eval mode: mean cross-entropy,
// accuracy, per-class accuracy and the confusion matrix; and their text and JSON renderings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/data/data_loader.h"
#include "tandem/nn/module.h"

namespace tandem::train {

// Rows per forward pass in evaluation: a test batch of 1000 images runs as chunks of this many, so
// the activations held at once (and the allocator's cache of them) stay those of a training-sized
// batch. The outputs are the same as one pass in eval mode, where rows do not interact.
inline constexpr std::int64_t kEvalChunkRows = 256;

// model(input) for input (N, ...), computed at most `max_rows` rows at a time and joined along
// dim 0: (N, ...) out. For eval mode under NoGradGuard (in train mode BatchNorm would see the
// chunks' statistics).
Tensor forward_in_chunks(nn::Module& model, const Tensor& input,
                         std::int64_t max_rows = kEvalChunkRows);

// Rows whose largest logit is their target, counted where the logits are: logits (B, L), target
// (B) -> a float64 scalar on their device (read it when the host waits anyway). No gradient.
Tensor correct_count(const Tensor& logits, const Tensor& target);

struct EvalResult {
  std::int64_t samples = 0;
  double loss = 0;      // mean cross-entropy (no label smoothing)
  double accuracy = 0;  // a fraction in [0, 1]
  std::vector<std::int64_t> class_samples;  // (L) samples whose target is each class
  std::vector<double> per_class_accuracy;   // (L); NaN for a class with no samples
  std::vector<std::vector<std::int64_t>> confusion;  // (L, L): [target][predicted] counts
};

// Runs `model` on every batch of `loader` (moved to `device`) with gradients off and the model in
// eval mode; its previous train/eval mode is restored afterwards. Targets must lie in
// [0, classes) and the model must give (B, classes) logits; an error says which does not.
// The caller's autocast precision (autograd/autocast.h) applies.
EvalResult evaluate(nn::Module& model, data::DataLoader& loader, std::int64_t classes,
                    Device device);

std::string eval_to_json(const EvalResult& result);  // one line
std::string eval_to_text(const EvalResult& result);  // a small report with the matrix

}  // namespace tandem::train
