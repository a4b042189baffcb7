// allclose and finite-difference gradient checks for the tests.
#include "gradcheck.h"

#include <cmath>
#include <sstream>

#include "tandem/autograd/functions.h"
#include "tandem/autograd/grad_mode.h"
#include "tandem/tensor/factories.h"

namespace tandem::testing {

::testing::AssertionResult allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined()) {
    return ::testing::AssertionFailure() << "allclose: undefined tensor";
  }
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure()
           << "shapes differ: " << to_string(a.shape()) << " vs " << to_string(b.shape());
  }
  return allclose(a, b.to_vector<double>(), rtol, atol);
}

::testing::AssertionResult allclose(const Tensor& a, const std::vector<double>& b, double rtol,
                                    double atol) {
  const std::vector<double> va = a.to_vector<double>();
  if (va.size() != b.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << va.size() << " vs " << b.size();
  }
  double worst = 0;
  std::size_t at = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    const double err = std::abs(va[i] - b[i]);
    const double tol = atol + rtol * std::abs(b[i]);
    const bool ok = err <= tol || (std::isnan(va[i]) && std::isnan(b[i]));
    if (!ok) {
      ++bad;
      if (err - tol > worst || bad == 1) {
        worst = err - tol;
        at = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << va.size()
                                       << " elements differ; worst at flat index " << at << ": "
                                       << va[at] << " vs " << b[at] << " (rtol " << rtol
                                       << ", atol " << atol << ")";
}

Tensor random_input(const Shape& shape, std::uint64_t seed) {
  Generator g(seed);
  Tensor t = uniform(shape, -1.0, 1.0, {.dtype = DType::Float64}, &g);
  t.set_requires_grad(true);
  return t;
}

::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     const std::vector<Tensor>& inputs, double eps, double atol,
                                     double rtol) {
  for (const Tensor& t : inputs) {
    if (t.defined() && t.dtype() != DType::Float64) {
      return ::testing::AssertionFailure() << "gradcheck needs float64 inputs";
    }
  }
  // Fixed random weights make the scalar sensitive to every output element.
  Tensor probe;
  {
    NoGradGuard no_grad;
    probe = f(inputs);
  }
  Generator wg(1234);
  const Tensor w = uniform(probe.shape(), 0.5, 1.5, {.dtype = DType::Float64}, &wg);
  auto scalar = [&](const std::vector<Tensor>& in) { return sum(mul(f(in), w)); };

  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) t.set_grad(Tensor());
  }
  scalar(inputs).backward();

  std::ostringstream failures;
  int failed = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    const Tensor analytic = x.grad();
    if (!analytic.defined()) {
      return ::testing::AssertionFailure() << "input " << k << " received no gradient";
    }
    const std::vector<double> ga = analytic.to_vector<double>();
    double* p = x.data<double>();  // inputs are contiguous float64 leaves
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double saved = p[i];
      double plus, minus;
      {
        NoGradGuard no_grad;
        p[i] = saved + eps;
        plus = scalar(inputs).item();
        p[i] = saved - eps;
        minus = scalar(inputs).item();
        p[i] = saved;
      }
      const double numeric = (plus - minus) / (2 * eps);
      const double a = ga[static_cast<std::size_t>(i)];
      if (std::abs(a - numeric) > atol + rtol * std::abs(numeric)) {
        if (failed++ < 5) {
          failures << "\n  input " << k << " element " << i << ": analytic " << a
                   << ", numeric " << numeric;
        }
      }
    }
  }
  if (failed) {
    return ::testing::AssertionFailure() << failed << " gradient elements disagree:"
                                         << failures.str();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tandem::testing
