// Differentiable elementwise operations: forward with ops:: kernels, backward beside each.
// Binary ops broadcast; their gradients are summed back to each input's shape.
#include "tandem/autograd/functions.h"
#include "tandem/autograd/record.h"

namespace tandem {

using autograd::Node;
using autograd::record;
using Grads = std::vector<Tensor>;

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor y = ops::binary(ops::BinaryOp::Add, a, b);
  record("add", {a, b}, {y}, [sa = a.shape(), sb = b.shape()](Grads& g, const Node& n) {
    return Grads{n.needs_input_grad(0) ? ops::sum_to_shape(g[0], sa) : Tensor(),
                 n.needs_input_grad(1) ? ops::sum_to_shape(g[0], sb) : Tensor()};
  });
  return y;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor y = ops::binary(ops::BinaryOp::Sub, a, b);
  record("sub", {a, b}, {y}, [sa = a.shape(), sb = b.shape()](Grads& g, const Node& n) {
    return Grads{n.needs_input_grad(0) ? ops::sum_to_shape(g[0], sa) : Tensor(),
                 n.needs_input_grad(1) ? ops::sum_to_shape(ops::affine(g[0], -1, 0), sb)
                                       : Tensor()};
  });
  return y;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = ops::binary(ops::BinaryOp::Mul, a, b);
  record("mul", {a, b}, {y}, [a = data_only(a), b = data_only(b)](Grads& g, const Node& n) {
    using ops::BinaryOp;
    return Grads{
        n.needs_input_grad(0) ? ops::sum_to_shape(ops::binary(BinaryOp::Mul, g[0], b), a.shape())
                              : Tensor(),
        n.needs_input_grad(1) ? ops::sum_to_shape(ops::binary(BinaryOp::Mul, g[0], a), b.shape())
                              : Tensor()};
  });
  return y;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor y = ops::binary(ops::BinaryOp::Div, a, b);
  record("div", {a, b}, {y},
         [a = data_only(a), b = data_only(b), y = data_only(y)](Grads& g, const Node& n) {
           using ops::BinaryOp;
           Tensor ga, gb;
           if (n.needs_input_grad(0)) {
             ga = ops::sum_to_shape(ops::binary(BinaryOp::Div, g[0], b), a.shape());
           }
           if (n.needs_input_grad(1)) {
             // d(a/b)/db = -y / b
             Tensor t = ops::binary(BinaryOp::Div, ops::binary(BinaryOp::Mul, g[0], y), b);
             gb = ops::sum_to_shape(ops::affine(t, -1, 0), b.shape());
           }
           return Grads{ga, gb};
         });
  return y;
}

Tensor affine(const Tensor& x, double scale, double shift) {
  Tensor y = ops::affine(x, scale, shift);
  record("affine", {x}, {y}, [scale](Grads& g, const Node&) {
    return Grads{ops::affine(g[0], scale, 0)};
  });
  return y;
}

Tensor rdiv(double numerator, const Tensor& x) {
  Tensor y = ops::reciprocal_scaled(x, numerator);
  record("rdiv", {x}, {y}, [x = data_only(x), y = data_only(y)](Grads& g, const Node&) {
    // d(c/x)/dx = -y / x
    using ops::BinaryOp;
    Tensor t = ops::binary(BinaryOp::Div, ops::binary(BinaryOp::Mul, g[0], y), x);
    return Grads{ops::affine(t, -1, 0)};
  });
  return y;
}

Tensor pow(const Tensor& x, double exponent) {
  Tensor y = ops::pow_scalar(x, exponent);
  record("pow", {x}, {y}, [x = data_only(x), exponent](Grads& g, const Node&) {
    Tensor d = ops::affine(ops::pow_scalar(x, exponent - 1), exponent, 0);
    return Grads{ops::binary(ops::BinaryOp::Mul, g[0], d)};
  });
  return y;
}

Tensor neg(const Tensor& x) { return affine(x, -1.0, 0.0); }

Tensor exp(const Tensor& x) {
  Tensor y = ops::unary(ops::UnaryOp::Exp, x);
  record("exp", {x}, {y}, [y = data_only(y)](Grads& g, const Node&) {
    return Grads{ops::binary(ops::BinaryOp::Mul, g[0], y)};
  });
  return y;
}

Tensor log(const Tensor& x) {
  Tensor y = ops::unary(ops::UnaryOp::Log, x);
  record("log", {x}, {y}, [x = data_only(x)](Grads& g, const Node&) {
    return Grads{ops::binary(ops::BinaryOp::Div, g[0], x)};
  });
  return y;
}

Tensor sqrt(const Tensor& x) {
  Tensor y = ops::unary(ops::UnaryOp::Sqrt, x);
  record("sqrt", {x}, {y}, [y = data_only(y)](Grads& g, const Node&) {
    return Grads{ops::binary(ops::BinaryOp::Div, ops::affine(g[0], 0.5, 0), y)};
  });
  return y;
}

Tensor relu(const Tensor& x) {
  Tensor y = ops::unary(ops::UnaryOp::Relu, x);
  record("relu", {x}, {y}, [y = data_only(y)](Grads& g, const Node&) {
    return Grads{ops::relu_backward(g[0], y)};
  });
  return y;
}

Tensor gelu(const Tensor& x) {
  Tensor y = ops::unary(ops::UnaryOp::Gelu, x);
  record("gelu", {x}, {y}, [x = data_only(x)](Grads& g, const Node&) {
    return Grads{ops::gelu_backward(g[0], x)};
  });
  return y;
}

Tensor sigmoid(const Tensor& x) {
  Tensor y = ops::unary(ops::UnaryOp::Sigmoid, x);
  record("sigmoid", {x}, {y}, [y = data_only(y)](Grads& g, const Node&) {
    // y (1 - y)
    using ops::BinaryOp;
    Tensor d = ops::binary(BinaryOp::Mul, y, ops::affine(y, -1, 1));
    return Grads{ops::binary(BinaryOp::Mul, g[0], d)};
  });
  return y;
}

Tensor tanh(const Tensor& x) {
  Tensor y = ops::unary(ops::UnaryOp::Tanh, x);
  record("tanh", {x}, {y}, [y = data_only(y)](Grads& g, const Node&) {
    // 1 - y^2
    using ops::BinaryOp;
    Tensor d = ops::affine(ops::binary(BinaryOp::Mul, y, y), -1, 1);
    return Grads{ops::binary(BinaryOp::Mul, g[0], d)};
  });
  return y;
}

}  // namespace tandem
