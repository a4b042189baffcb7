// Test support: allclose with a report of the worst element, and gradcheck, which compares the
// gradients autograd computes for a function of float64 tensors with central finite differences.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tandem/tensor/tensor.h"

namespace tandem::testing {

// Passes when |a - b| <= atol + rtol * |b| everywhere (same shapes); the message names the worst
// element.
::testing::AssertionResult allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5,
                                    double atol = 1e-6);
::testing::AssertionResult allclose(const Tensor& a, const std::vector<double>& b,
                                    double rtol = 1e-5, double atol = 1e-6);

// f maps the inputs (float64, requires_grad set on those to check) to a tensor; the check uses
// sum(f(inputs) * w) with a fixed random w so every output element matters. Each input element
// is perturbed by +-eps; numeric and analytic gradients must agree to atol + rtol * |numeric|.
::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     const std::vector<Tensor>& inputs, double eps = 1e-6,
                                     double atol = 1e-6, double rtol = 1e-4);

// A float64 tensor of the given shape with values uniform in [-1, 1), requiring grad.
Tensor random_input(const Shape& shape, std::uint64_t seed);

}  // namespace tandem::testing
