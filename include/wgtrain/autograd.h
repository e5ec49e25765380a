// Reverse-mode automatic differentiation over wgtrain's ops: a small tape that each op below extends as it runs
// (define by run), and a backward pass that calls each op's rule, in reverse order of creation, to record the
// gradient ops. Rules are built from the registered ops (src/autograd/autograd.cpp lists them); every rule is
// checked against finite differences in tests/autograd_test.cpp.
//
// The whole pass is ordinary op calls, so a forward and backward issued inside Device::record are recorded once
// and replayed every step.
//
// Memory: a value lives while a Var holds it or a rule saved it. backward() frees each rule, and what it saved, as
// soon as it has run. The outputs of rms_norm and swiglu are not saved by the linears that read them: the backward
// makes them again (the same kernel on the same inputs, so the same bits) for those linears' weight gradients.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "wgtrain/q4gsw.h"
#include "wgtrain/tensor.h"

namespace wgtrain::autograd {

namespace detail {
struct Node;
}

// A tensor value in the graph, and (when it requires a gradient) its place on the tape.
class Var {
 public:
  Var() = default;

  // A value that needs no gradient: an input, a mask, a table.
  static Var constant(Tensor value);
  // A leaf whose gradient backward() adds into `grad` (float32, contiguous, the value's shape): a model parameter
  // whose gradient lives in the optimizer's arena. The caller zeroes `grad` before each backward pass.
  static Var parameter(Tensor value, Tensor grad);
  // A leaf whose gradient backward() creates, read with grad() afterwards.
  static Var leaf(Tensor value);

  bool defined() const { return node_ != nullptr; }
  const Tensor& value() const;
  bool requires_grad() const;
  // The gradient after backward(): a leaf's new tensor, or a parameter's buffer. Undefined if none reached it.
  Tensor grad() const;

  const Shape& shape() const { return value().shape(); }
  int64_t size(int dim) const { return value().size(dim); }
  int rank() const { return value().rank(); }

  // A node's value lives while some Var holds the node (the tape's own references do not count): an intermediate
  // no one can read any more gives its buffer back during the forward pass, as PyTorch frees what no backward rule
  // saved. What the rules need they keep themselves.
  Var(const Var& other);
  Var(Var&& other) noexcept;
  Var& operator=(const Var& other);
  Var& operator=(Var&& other) noexcept;
  ~Var();

  // Internal.
  explicit Var(std::shared_ptr<detail::Node> node);
  const std::shared_ptr<detail::Node>& node() const { return node_; }

 private:
  void release() noexcept;
  std::shared_ptr<detail::Node> node_;
};

// Runs the backward pass from a scalar `loss` (seeded with 1): every Var it depends on that requires a gradient
// gets d loss / d var. Afterwards the tape behind `loss` is freed (its saved tensors released); values stay.
void backward(const Var& loss);

// ---- ops with gradients ----------------------------------------------------------------------------------------
// Binary ops broadcast (NumPy rules); their gradients are summed back to each input's shape.
Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var add(const Var& a, double s);
Var mul(const Var& a, double s);

Var silu(const Var& x);
// silu(gate) * up in one pass, and both gradients in one pass; keeps gate and up (not silu(gate)) for the backward.
Var swiglu(const Var& gate, const Var& up);
Var rsqrt(const Var& x);
Var exp(const Var& x);

Var sum(const Var& x, const std::vector<int>& dims, bool keepdim = false);
Var mean(const Var& x, const std::vector<int>& dims, bool keepdim = false);

Var softmax(const Var& x, int dim = -1, bool causal = false);
// RMSNorm over the last dim with a gain (ops::rms_norm), and rotary position embedding times `scale` (ops::rope).
Var rms_norm(const Var& x, const Var& weight, double eps);
Var rope(const Var& x, const Tensor& cos, const Tensor& sin, double scale = 1.0);
// x where mask is false, value where it is true; no gradient flows to the filled elements.
Var masked_fill(const Var& x, const Tensor& mask, double value);

// [B, M, K] x [B, K, N]; operands may be strided views (transposes cost nothing).
Var bmm(const Var& a, const Var& b);
// Fused causal attention (ops::attention): q [B, T, H, hd], k and v [B, L, KV, hd] (views are read in place) ->
// [B, T, H * hd]. The backward recomputes the scores from the saved logsumexp (ops::attention_backward).
Var attention(const Var& q, const Var& k, const Var& v, double scale);
// x[..., K] W[N, K]^T, float32 weights.
Var linear(const Var& x, const Var& weight);
// x[..., K] W^T through the 4-bit weight w (linear_q4gsw). The gradient reaching W goes, straight through the
// quantisation, to `latent` (the float32 master weights [N, K], usually a parameter): d latent = dy^T x.
Var linear_q4gsw(const Var& x, const Q4Weight& w, const Var& latent);
// The same through a frozen 4-bit weight: the gradient reaches x only (no latent, no weight gradient).
Var linear_q4gsw(const Var& x, const Q4Weight& w);
// residual + linear_q4gsw(x, w[, latent]) as one node (ops::linear_q4gsw_residual: in mixed precision the GEMM's
// finishing pass adds the residual stream, and the product is never a tensor of its own). The same bits and
// gradients as add(residual, linear_q4gsw(...)); without a latent the weight is frozen.
Var linear_q4gsw_residual(const Var& residual, const Var& x, const Q4Weight& w, const Var& latent = Var());
// Rows of weight[V, D] picked by int32 indices; the gradient is summed per row (ops::embedding_backward).
Var embedding(const Var& weight, const Tensor& indices);

// Mean cross-entropy of logits[R, V] against int32 labels[R] (negative labels ignored), through ops::fused_ce,
// which computes the gradient with the loss. With overwrite_logits, the gradient is written over the logits'
// buffer (saving R x V floats): the logits must then have no other use in the graph.
Var cross_entropy(const Var& logits, const Tensor& labels, bool overwrite_logits = false);

// Views and copies.
Var reshape(const Var& x, const Shape& shape);  // copies first when x is not contiguous
Var permute(const Var& x, const std::vector<int>& dims);
Var transpose(const Var& x, int dim0, int dim1);
Var slice(const Var& x, int dim, int64_t start, int64_t end);
Var expand(const Var& x, const Shape& shape);
Var contiguous(const Var& x);
Var cat(const std::vector<Var>& xs, int dim);

}  // namespace wgtrain::autograd
