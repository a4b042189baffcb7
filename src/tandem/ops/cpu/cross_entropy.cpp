// Cross-entropy on the CPU: log_softmax over classes (oneDNN for float32, see softmax.cpp) fused
// with the negative log-likelihood and PyTorch 1.13's label smoothing, and its backward.
// Shapes: logits and log_probs (N, L), target (N) int64 class indices in [0, L).
#include <cmath>

#include "tandem/ops/cpu/common.h"
#include "tandem/ops/ops.h"

namespace tandem::ops {
namespace {

// Checks the logits / target pair and returns the target as contiguous int64 data.
Tensor checked_target(const char* op, const Tensor& logits, const Tensor& target) {
  TANDEM_CHECK(logits.dim() == 2, op, ": expected logits (N, L), got ", show(logits.shape()));
  TANDEM_CHECK(target.defined(), op, ": the target is undefined");
  TANDEM_CHECK(target.dtype() == DType::Int64, op,
               ": expected an int64 target of class indices, got ", target.dtype());
  TANDEM_CHECK(target.device().is_cpu(), op, ": target is on ", target.device(),
               ", but this build runs ", op, " only on the cpu");
  TANDEM_CHECK(target.dim() == 1 && target.size(0) == logits.size(0), op, ": target ",
               show(target.shape()), " does not match logits ", show(logits.shape()),
               " (expected (", logits.size(0), "))");
  Tensor t = cpu::contig(target);
  const std::int64_t* pt = t.data<std::int64_t>();
  const std::int64_t classes = logits.size(1);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    TANDEM_CHECK(pt[i] >= 0 && pt[i] < classes, op, ": target ", pt[i], " at index ", i,
                 " is out of range for ", classes, " classes (logits ", show(logits.shape()), ")");
  }
  return t;
}

void check_smoothing(const char* op, double s) {
  TANDEM_CHECK(s >= 0.0 && s <= 1.0, op, ": label_smoothing must be in [0, 1], got ", s);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, double label_smoothing, bool mean,
                     Tensor* log_probs) {
  if (cpu::on_gpu({&logits, &target})) {
    return cuda::cross_entropy(logits, target, label_smoothing, mean, log_probs);
  }
  const char* op = "cross_entropy";
  cpu::check_operands(op, {&logits});
  check_smoothing(op, label_smoothing);
  Tensor t = checked_target(op, logits, target);
  Tensor lp = log_softmax(logits, 1);
  const std::int64_t n = lp.size(0), classes = lp.size(1);
  const std::int64_t* pt = t.data<std::int64_t>();
  Tensor loss = cpu::new_like({}, lp);
  visit_floating(lp.dtype(), op, [&]<typename T>() {
    const T* p = lp.data<T>();
    double nll = 0, smooth = 0;  // sums over the batch of -log p[target] and -mean_l log p[l]
    for (std::int64_t i = 0; i < n; ++i) {
      nll -= static_cast<double>(p[i * classes + pt[i]]);
      if (label_smoothing > 0) {
        double row = 0;
        for (std::int64_t l = 0; l < classes; ++l) row += static_cast<double>(p[i * classes + l]);
        smooth -= row / static_cast<double>(classes);
      }
    }
    double total = (1 - label_smoothing) * nll + label_smoothing * smooth;
    if (mean) total /= static_cast<double>(n);
    *loss.data<T>() = static_cast<T>(total);
  });
  if (log_probs) *log_probs = lp;
  return loss;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& log_probs,
                              const Tensor& target, double label_smoothing, bool mean) {
  if (cpu::on_gpu({&grad_loss, &log_probs, &target})) {
    return cuda::cross_entropy_backward(grad_loss, log_probs, target, label_smoothing, mean);
  }
  const char* op = "cross_entropy_backward";
  cpu::check_operands(op, {&grad_loss, &log_probs});
  check_smoothing(op, label_smoothing);
  TANDEM_CHECK(grad_loss.numel() == 1, op, ": expected a one-element loss gradient, got ",
               show(grad_loss.shape()));
  Tensor t = checked_target(op, log_probs, target);
  Tensor lp = cpu::contig(log_probs);
  const std::int64_t n = lp.size(0), classes = lp.size(1);
  const std::int64_t* pt = t.data<std::int64_t>();
  double scale = grad_loss.item();
  if (mean) scale /= static_cast<double>(n);
  const double off = label_smoothing / static_cast<double>(classes);  // smoothed target, off-class
  const double on = 1 - label_smoothing + off;                        // and at the target
  Tensor gx = cpu::new_like(lp.shape(), lp);
  visit_floating(lp.dtype(), op, [&]<typename T>() {
    const T* p = lp.data<T>();
    T* pg = gx.data<T>();
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t l = 0; l < classes; ++l) {
        const double q = l == pt[i] ? on : off;
        pg[i * classes + l] =
            static_cast<T>(scale * (std::exp(static_cast<double>(p[i * classes + l])) - q));
      }
    }
  });
  return gx;
}

}  // namespace tandem::ops
