// Synchronised batch norm, built from ops:: kernels (so it runs wherever they do) plus one gather
// of per-channel host vectors in forward and one in backward. Shapes: x, y, g (N, C, *); every
// per-channel quantity (C). m: elements per channel on this replica; n: over all replicas.
#include "tandem/parallel/sync_batchnorm.h"

#include <cmath>
#include <vector>

#include "tandem/autograd/channel_broadcast.h"
#include "tandem/autograd/record.h"
#include "tandem/ops/ops.h"
#include "tandem/tensor/factories.h"

namespace tandem::parallel {
namespace {

using autograd::channel_view;
using autograd::non_channel_dims;
using ops::BinaryOp;

std::vector<double> host_values(const Tensor& t) { return copy_to(t, kCPU).to_vector<double>(); }

Tensor channel_tensor(const std::vector<double>& values, const Tensor& like) {
  return from_vector(values, {static_cast<std::int64_t>(values.size())},
                     {.dtype = like.dtype(), .device = like.device()});
}

// r = (1 - momentum) r + momentum * stat, in double, for a running-stat buffer on any device.
void update_running(const Tensor& running, const std::vector<double>& stat, double momentum) {
  if (!running.defined()) return;
  std::vector<double> r = host_values(running);
  for (std::size_t c = 0; c < r.size(); ++c) r[c] = (1 - momentum) * r[c] + momentum * stat[c];
  copy_into(running, channel_tensor(r, running));
}

}  // namespace

Tensor sync_batch_norm(const Tensor& x_in, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, double momentum, double eps,
                       const SyncBatchNormContext& context) {
  TANDEM_CHECK(context.group != nullptr, "sync_batch_norm: no replica group");
  TANDEM_CHECK(x_in.dim() >= 2, "sync_batch_norm: expected input (N, C, *), got ",
               show(x_in.shape()));
  TANDEM_CHECK(context.grad_weight > 0.0, "sync_batch_norm: replica ", context.replica,
               " has no share of the batch");
  const Tensor x = data_only(x_in);
  const std::int64_t rank = x.dim();
  const std::int64_t channels = x.size(1);
  const auto dims = non_channel_dims(rank);
  const auto c_count = static_cast<std::size_t>(channels);
  const double m = static_cast<double>(x.numel()) / static_cast<double>(channels);

  // Local statistics about a rounded centre a: mean = a + sum(x - a) / m and
  // M2 = sum((x - a)^2) - sum(x - a)^2 / m, accurate even where |mean| >> std.
  const std::vector<double> sums = host_values(ops::sum(x, dims, false));
  std::vector<double> centre(c_count);
  for (std::size_t c = 0; c < c_count; ++c) centre[c] = sums[c] / m;
  const Tensor centre_t = channel_tensor(centre, x);
  centre = host_values(centre_t);  // the rounded values the kernels used
  const Tensor d = ops::binary(BinaryOp::Sub, x, channel_view(centre_t, rank));
  const std::vector<double> sum_d = host_values(ops::sum(d, dims, false));
  const std::vector<double> sum_dd =
      host_values(ops::sum(ops::binary(BinaryOp::Mul, d, d), dims, false));
  std::vector<double> payload(1 + 2 * c_count);
  payload[0] = m;
  for (std::size_t c = 0; c < c_count; ++c) {
    payload[1 + c] = centre[c] + sum_d[c] / m;
    payload[1 + c_count + c] = std::max(0.0, sum_dd[c] - sum_d[c] * sum_d[c] / m);
  }

  // Merge (count, mean, M2) over the active replicas in replica order.
  const auto gathered = context.group->all_gather(context.replica, std::move(payload));
  double n = 0.0;
  std::vector<double> mean(c_count, 0.0), m2(c_count, 0.0);
  for (const auto& part : gathered) {
    TANDEM_CHECK(part.size() == 1 + 2 * c_count,
                 "sync_batch_norm: replicas disagree on the "
                 "number of channels (",
                 (part.size() - 1) / 2, " and ", channels, ")");
    const double nb = part[0];
    const double total = n + nb;
    for (std::size_t c = 0; c < c_count; ++c) {
      const double delta = part[1 + c] - mean[c];
      mean[c] += delta * nb / total;
      m2[c] += part[1 + c_count + c] + delta * delta * n * nb / total;
    }
    n = total;
  }
  TANDEM_CHECK(n > 1.0,
               "sync_batch_norm: expected more than 1 value per channel when training, "
               "got ",
               n, " over all replicas (input ", show(x.shape()), " here)");
  std::vector<double> var(c_count), unbiased(c_count), invstd(c_count);
  for (std::size_t c = 0; c < c_count; ++c) {
    var[c] = m2[c] / n;
    unbiased[c] = m2[c] / (n - 1.0);
    invstd[c] = 1.0 / std::sqrt(var[c] + eps);
  }
  const Tensor mean_t = channel_tensor(mean, x);
  Tensor y = ops::batch_norm_eval(x, weight, bias, mean_t, channel_tensor(var, x), eps);
  update_running(running_mean, mean, momentum);
  update_running(running_var, unbiased, momentum);

  autograd::record(
      "sync_batch_norm", {x_in, weight, bias}, {y},
      [x, w = weight.defined() ? data_only(weight) : Tensor(), mean_t,
       invstd_t = channel_tensor(invstd, x), n,
       context](std::vector<Tensor>& g, const autograd::Node& node) {
        const std::int64_t r = x.dim();
        const auto red = non_channel_dims(r);
        // xhat (N, C, *) = (x - mean) * invstd
        const Tensor xhat =
            ops::binary(BinaryOp::Mul, ops::binary(BinaryOp::Sub, x, channel_view(mean_t, r)),
                        channel_view(invstd_t, r));
        const Tensor sum_dy = ops::sum(g[0], red, false);
        const Tensor sum_dy_xhat = ops::sum(ops::binary(BinaryOp::Mul, g[0], xhat), red, false);
        std::vector<Tensor> out(3);
        if (node.needs_input_grad(0)) {
          // The gradient of the global loss (sum_s w_s loss_s) for this replica's x, divided by
          // w_r because the reducer multiplies it back:
          //   dx = w * invstd * (dy - A / (w_r n) - xhat * B / (w_r n))
          //   A = sum_s w_s sum(dy_s), B = sum_s w_s sum(dy_s * xhat_s)
          const double wr = context.grad_weight;
          const std::vector<double> a_local = host_values(sum_dy);
          const std::vector<double> b_local = host_values(sum_dy_xhat);
          const std::size_t cc = a_local.size();
          std::vector<double> weighted(2 * cc);
          for (std::size_t c = 0; c < cc; ++c) {
            weighted[c] = wr * a_local[c];
            weighted[cc + c] = wr * b_local[c];
          }
          const auto parts = context.group->all_gather(context.replica, std::move(weighted));
          std::vector<double> a(cc, 0.0), b(cc, 0.0), scale = host_values(invstd_t);
          for (const auto& part : parts) {
            for (std::size_t c = 0; c < cc; ++c) {
              a[c] += part[c];
              b[c] += part[cc + c];
            }
          }
          const std::vector<double> wv = w.defined() ? host_values(w) : std::vector<double>();
          for (std::size_t c = 0; c < cc; ++c) {
            a[c] /= wr * n;
            b[c] /= wr * n;
            if (!wv.empty()) scale[c] *= wv[c];
          }
          const Tensor centred =
              ops::binary(BinaryOp::Sub,
                          ops::binary(BinaryOp::Sub, g[0], channel_view(channel_tensor(a, x), r)),
                          ops::binary(BinaryOp::Mul, xhat, channel_view(channel_tensor(b, x), r)));
          out[0] = ops::binary(BinaryOp::Mul, centred, channel_view(channel_tensor(scale, x), r));
        }
        if (node.needs_input_grad(1)) out[1] = sum_dy_xhat;
        if (node.needs_input_grad(2)) out[2] = sum_dy;
        return out;
      });
  return y;
}

}  // namespace tandem::parallel
