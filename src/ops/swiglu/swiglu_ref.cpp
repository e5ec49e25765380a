// CPU reference for swiglu (float64).
#include <cmath>

#include "ops/reference.h"

namespace wgtrain::ref {

namespace {
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

HostTensor swiglu(const HostTensor& gate, const HostTensor& up) {
  HostTensor out(gate.shape);
  for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = gate.data[i] * sigmoid(gate.data[i]) * up.data[i];
  return out;
}

SwigluGradRef swiglu_backward(const HostTensor& grad, const HostTensor& gate, const HostTensor& up) {
  SwigluGradRef r{HostTensor(gate.shape), HostTensor(gate.shape)};
  for (size_t i = 0; i < grad.data.size(); ++i) {
    const double g = gate.data[i], s = sigmoid(g);
    r.dgate.data[i] = grad.data[i] * up.data[i] * s * (1.0 + g * (1.0 - s));
    r.dup.data[i] = grad.data[i] * g * s;
  }
  return r;
}

}  // namespace wgtrain::ref
