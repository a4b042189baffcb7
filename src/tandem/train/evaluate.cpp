// Evaluation loop and its reports.
#include "tandem/train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tandem/autograd/functions.h"
#include "tandem/autograd/grad_mode.h"
#include "tandem/ops/ops.h"

namespace tandem::train {

Tensor correct_count(const Tensor& logits, const Tensor& target) {
  NoGradGuard no_grad;
  return ops::sum(ops::cast(ops::equal(logits.argmax(1), target), DType::Float64), {}, false);
}

Tensor forward_in_chunks(nn::Module& model, const Tensor& input, std::int64_t max_rows) {
  TANDEM_CHECK(max_rows >= 1, "forward_in_chunks: max_rows ", max_rows, " is not positive");
  TANDEM_CHECK(input.dim() >= 1, "forward_in_chunks: the input has no batch dimension");
  const std::int64_t rows = input.size(0);
  if (rows <= max_rows) return model(input);
  // Chunks of equal size (1000 rows: 4 x 250, not 3 x 256 + 232), so all reuse one set of blocks.
  const std::int64_t chunks = (rows + max_rows - 1) / max_rows;
  const std::int64_t chunk_rows = (rows + chunks - 1) / chunks;
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<std::size_t>(chunks));
  for (std::int64_t start = 0; start < rows; start += chunk_rows) {
    outputs.push_back(model(input.narrow(0, start, std::min(chunk_rows, rows - start))));
  }
  return cat(outputs, 0);
}

EvalResult evaluate(nn::Module& model, data::DataLoader& loader, std::int64_t classes,
                    Device device) {
  TANDEM_CHECK(classes >= 1, "evaluate: class count ", classes, " is not positive");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  EvalResult r;
  const auto L = static_cast<std::size_t>(classes);
  r.class_samples.assign(L, 0);
  r.confusion.assign(L, std::vector<std::int64_t>(L, 0));
  double loss_sum = 0;
  std::int64_t correct = 0;
  try {
    for (auto& batch : loader) {
      const Tensor logits = forward_in_chunks(model, batch.data.to(device));
      TANDEM_CHECK(logits.dim() == 2 && logits.size(1) == classes, "evaluate: the model gives ",
                   to_string(logits.shape()), " logits, expected (B, ", classes, ")");
      const Tensor target = batch.target.to(device);
      loss_sum += cross_entropy(logits, target, 0.0, Reduction::Sum).to(kCPU).item();
      const std::vector<std::int64_t> predicted = logits.argmax(1).to(kCPU).to_vector<std::int64_t>();
      const std::vector<std::int64_t> targets = batch.target.to_vector<std::int64_t>();
      for (std::size_t i = 0; i < targets.size(); ++i) {
        const std::int64_t t = targets[i];
        TANDEM_CHECK(t >= 0 && t < classes, "evaluate: target ", t, " is outside [0, ", classes,
                     ")");
        ++r.class_samples[static_cast<std::size_t>(t)];
        ++r.confusion[static_cast<std::size_t>(t)][static_cast<std::size_t>(predicted[i])];
        if (predicted[i] == t) ++correct;
      }
      r.samples += static_cast<std::int64_t>(targets.size());
    }
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  if (r.samples > 0) {
    r.loss = loss_sum / static_cast<double>(r.samples);
    r.accuracy = static_cast<double>(correct) / static_cast<double>(r.samples);
  }
  r.per_class_accuracy.resize(L);
  for (std::size_t c = 0; c < L; ++c) {
    r.per_class_accuracy[c] =
        r.class_samples[c] > 0
            ? static_cast<double>(r.confusion[c][c]) / static_cast<double>(r.class_samples[c])
            : std::numeric_limits<double>::quiet_NaN();
  }
  return r;
}

std::string eval_to_json(const EvalResult& r) {
  nlohmann::ordered_json j;
  j["samples"] = r.samples;
  j["loss"] = r.loss;
  j["accuracy"] = r.accuracy;
  nlohmann::ordered_json per_class = nlohmann::ordered_json::array();
  for (double a : r.per_class_accuracy) {
    per_class.push_back(std::isnan(a) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(a));
  }
  j["per_class_accuracy"] = per_class;
  j["class_samples"] = r.class_samples;
  j["confusion_matrix"] = r.confusion;
  return j.dump();
}

std::string eval_to_text(const EvalResult& r) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(4);
  out << "samples   " << r.samples << "\n";
  out << "loss      " << r.loss << "\n";
  out << "accuracy  " << r.accuracy << "\n";
  out << "per-class accuracy:\n";
  for (std::size_t c = 0; c < r.per_class_accuracy.size(); ++c) {
    out << "  class " << c << "  ";
    if (std::isnan(r.per_class_accuracy[c])) {
      out << "  -   ";
    } else {
      out << r.per_class_accuracy[c];
    }
    out << "  (" << r.class_samples[c] << " samples)\n";
  }
  out << "confusion matrix (rows: target, columns: predicted):\n";
  std::size_t width = 1;
  for (const auto& row : r.confusion) {
    for (std::int64_t v : row) width = std::max(width, std::to_string(v).size());
  }
  out << "      ";
  for (std::size_t c = 0; c < r.confusion.size(); ++c) {
    const std::string label = std::to_string(c);
    out << std::string(width + 1 - std::min(width, label.size()), ' ') << label;
  }
  out << "\n";
  for (std::size_t t = 0; t < r.confusion.size(); ++t) {
    const std::string label = std::to_string(t);
    out << "  " << label << std::string(4 - std::min<std::size_t>(3, label.size()), ' ');
    for (std::int64_t v : r.confusion[t]) {
      const std::string cell = std::to_string(v);
      out << std::string(width + 1 - cell.size(), ' ') << cell;
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace tandem::train
