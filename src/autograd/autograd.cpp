// The tape and the gradient rules. Each op below runs its forward op, then, when an input requires a gradient,
// keeps a node holding its inputs and a rule: given d loss / d output, the rule records the ops that give each
// input's gradient and hands them to Grads::add. backward() runs the rules in reverse order of creation (which is
// a topological order: a node is always created after its inputs).
#include "wgtrain/autograd.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <numeric>
#include <unordered_set>

#include "gpu/device_impl.h"
#include "ops/common.h"
#include "wgtrain/attention.h"
#include "wgtrain/error.h"
#include "wgtrain/fused_ce.h"
#include "wgtrain/ops.h"

namespace wgtrain::autograd {

namespace detail {

struct Grads;
using Rule = std::function<void(const Tensor& grad_out, Grads& grads)>;

struct Node {
  Tensor value;            // dropped once no Var holds the node (handles == 0), unless a leaf
  Shape shape;             // the value's, kept for the gradient's check after the value is gone
  int64_t handles = 0;     // Vars holding this node
  bool requires_grad = false;
  uint64_t seq = 0;
  Tensor grad;             // d loss / d value, gathered during backward (kept afterwards for leaves)
  Tensor param_grad;       // a parameter's gradient buffer, added into
  bool grad_owned = false;  // `grad` is a tensor no one else holds (made by accumulate): later terms may add into it
  bool leaf = false;
  bool takes_seed = false;  // the rule reads an undefined grad_out as 1 (cross_entropy: no multiply by one)
  std::vector<std::shared_ptr<Node>> inputs;
  Rule rule;
  // Makes the value again from what the node's own rule keeps anyway (a norm's input, weight and rstd; SwiGLU's gate
  // and up). Rules of later nodes ask for such a value through Grads::value instead of keeping it, so it need not
  // live from the forward to the backward: it is made again when first asked for and dropped after this node's
  // rule, the last to need it, has run.
  std::function<Tensor()> recompute;
  // What the device derived from the dropped value (the mixed GEMMs' maxima of its rows and columns), handed to the
  // value made again, whose bits are the same: the weight gradients do not reduce it a second time.
  wgtrain::detail::DerivedCarry derived;
};

// Drops a node's value; one that can be made again leaves what the device derived from it with the node.
void drop_value(Node& n) {
  if (n.recompute && n.value.defined())
    n.derived = n.value.device_impl().take_derived(n.value.storage()->buffer, n.value.offset());
  n.value = Tensor();
}

void accumulate(Node& n, const Tensor& g) {
  if (!n.requires_grad || !g.defined()) return;
  if (g.shape() != n.shape)
    throw Error("autograd: a gradient of shape " + shape_str(g.shape()) + " reached a value of shape " +
                shape_str(n.shape));
  if (n.param_grad.defined()) {
    ops::copy_(n.param_grad, ops::add(n.param_grad, g));
  } else if (!n.grad.defined()) {
    n.grad = g;
    n.grad_owned = false;
  } else {
    n.grad = ops::add(n.grad, g);
    n.grad_owned = true;
  }
}

// What a rule hands its gradients to.
struct Grads {
  std::vector<std::shared_ptr<Node>>& inputs;
  bool needs(size_t i) const { return inputs[i]->requires_grad; }
  // Input i's value: `kept` where the rule kept it, else the input's own, recomputed where it was dropped.
  Tensor value(size_t i, const Tensor& kept) {
    if (kept.defined()) return kept;
    Node& n = *inputs[i];
    if (!n.value.defined()) {
      if (!n.recompute) throw Error("autograd: an input's value was neither kept nor can be recomputed");
      n.value = n.recompute();
      if (!n.derived.empty())
        n.value.device_impl().give_derived(n.value.storage()->buffer, n.value.offset(), std::move(n.derived));
      n.derived = {};
    }
    return n.value;
  }
  void add(size_t i, const Tensor& g) { accumulate(*inputs[i], g); }
  // Input i's own gradient buffer, for a kernel that adds its gradient straight into it (and then hands nothing
  // to add); null where the input has none or takes no gradient.
  const Tensor* param_grad(size_t i) const {
    const Node& n = *inputs[i];
    return n.requires_grad && n.param_grad.defined() ? &n.param_grad : nullptr;
  }
  // A linear layer's weight gradient g^T x: added straight into the parameter's own buffer where it has one (no
  // temporary, no second add), accumulated as any gradient otherwise.
  void add_linear_dW(size_t i, const Tensor& g, const Tensor& x) {
    if (inputs[i]->param_grad.defined())
      ops::linear_dW(g, x, &inputs[i]->param_grad);
    else
      add(i, ops::linear_dW(g, x));
  }
  // A gradient whose kernel can add a term in the same pass (make(addend) returns addend + its own result, or its
  // own result where addend is null): where the input already holds a gradient, that gradient is the addend and the
  // sum replaces it (no add of its own; the old gradient may be shared, so it is read, not written).
  void add_joined(size_t i, const std::function<Tensor(const Tensor* addend)>& make_grad) {
    Node& n = *inputs[i];
    if (!n.requires_grad) return;
    if (n.grad.defined() && !n.param_grad.defined()) {
      n.grad = make_grad(&n.grad);
      n.grad_owned = true;
      return;
    }
    accumulate(n, make_grad(nullptr));
  }
  // A q4 linear's input gradient g W: added by its GEMM straight into a gradient the input already owns (the normed
  // input of q, k and v, of gate and up: no add a term), accumulated as any gradient otherwise. Its first term is
  // the GEMM's own new output, so the input owns it.
  void add_linear_q4gsw_backward(size_t i, const Tensor& g, const Q4Weight& w) {
    Node& n = *inputs[i];
    if (!n.requires_grad) return;
    if (n.grad.defined() && n.grad_owned && !n.leaf && !n.param_grad.defined()) {
      ops::linear_q4gsw_backward(g, w, &n.grad);
      return;
    }
    const bool first = !n.grad.defined() && !n.param_grad.defined();
    accumulate(n, ops::linear_q4gsw_backward(g, w));
    if (first) n.grad_owned = true;
  }
};

}  // namespace detail

using detail::Grads;
using detail::Node;
using detail::Rule;

namespace {

std::atomic<uint64_t> next_seq{1};

std::shared_ptr<Node> new_node(Tensor value) {
  auto n = std::make_shared<Node>();
  n->shape = value.shape();
  n->value = std::move(value);
  n->seq = next_seq++;
  return n;
}

// The result of an op: a node with a rule when any input requires a gradient, a plain value otherwise.
Var make(Tensor value, const std::vector<Var>& inputs, Rule rule, bool takes_seed = false) {
  auto n = new_node(std::move(value));
  for (const Var& v : inputs)
    if (v.requires_grad()) n->requires_grad = true;
  if (n->requires_grad) {
    for (const Var& v : inputs) n->inputs.push_back(v.node());
    n->rule = std::move(rule);
    n->takes_seed = takes_seed;
  }
  return Var(std::move(n));
}

// What a rule keeps of an input's value: nothing where the input can make it again (Node::recompute).
Tensor keep(const Var& v) { return v.node()->recompute ? Tensor() : v.value(); }

// Marks a result's value as one its users' rules need not keep.
Var recomputable(Var v, std::function<Tensor()> recompute) {
  if (v.requires_grad()) v.node()->recompute = std::move(recompute);
  return v;
}

void check(const Var& v, const char* op) {
  if (!v.defined()) throw ArgumentError(std::string("autograd::") + op + ": an undefined Var");
}

// Sums a broadcast gradient back to `shape` (over leading dims, and dims where shape has 1).
Tensor reduce_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int lead = g.rank() - static_cast<int>(shape.size());
  std::vector<int> dims;
  for (int d = 0; d < g.rank(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  if (dims.empty()) return g.is_contiguous() ? g.reshape(shape) : ops::contiguous(g).reshape(shape);
  return ops::sum(g, dims, true).reshape(shape);
}

// A new float32 tensor of zeros of `shape` on the device of `on` (ops::fill takes shape, dtype and device from a
// tensor like the result: a stride-0 view of `on` serves).
Tensor zeros(const Tensor& on, const Shape& shape) {
  return ops::fill(Tensor(on.storage(), shape, Shape(shape.size(), 0), on.offset(), DType::F32), 0.0);
}

std::vector<int> normalized_dims(const std::vector<int>& dims, int rank) {
  std::vector<int> out;
  if (dims.empty()) {
    out.resize(rank);
    std::iota(out.begin(), out.end(), 0);
  }
  for (int d : dims) out.push_back(normalize_dim(d, rank));
  return out;
}

// A reduced gradient (keepdim or not) as a view of the input's shape: size-1 dims put back, then expanded.
Tensor unreduce(const Tensor& g, const Shape& in_shape, const std::vector<int>& dims) {
  Shape keep = in_shape;
  for (int d : dims) keep[d] = 1;
  const Tensor k = g.is_contiguous() ? g.reshape(keep) : ops::contiguous(g).reshape(keep);
  return k.expand(in_shape);
}

}  // namespace

// ---- Var ----------------------------------------------------------------------------------------------------------

Var Var::constant(Tensor value) {
  if (!value.defined()) throw ArgumentError("autograd: a constant from an undefined tensor");
  return Var(new_node(std::move(value)));
}

Var Var::parameter(Tensor value, Tensor grad) {
  if (!value.defined() || !grad.defined()) throw ArgumentError("autograd: a parameter needs a value and a grad");
  if (value.dtype() != DType::F32 || grad.dtype() != DType::F32 || grad.shape() != value.shape() ||
      !grad.is_contiguous())
    throw ArgumentError("autograd: a parameter's grad must be a contiguous float32 tensor of its shape " +
                        shape_str(value.shape()) + ", got " + shape_str(grad.shape()));
  auto n = new_node(std::move(value));
  n->requires_grad = true;
  n->leaf = true;
  n->param_grad = std::move(grad);
  return Var(std::move(n));
}

Var Var::leaf(Tensor value) {
  if (!value.defined() || value.dtype() != DType::F32)
    throw ArgumentError("autograd: a leaf with a gradient must be a float32 tensor");
  auto n = new_node(std::move(value));
  n->requires_grad = true;
  n->leaf = true;
  return Var(std::move(n));
}

Var::Var(std::shared_ptr<Node> node) : node_(std::move(node)) {
  if (node_) ++node_->handles;
}
Var::Var(const Var& other) : node_(other.node_) {
  if (node_) ++node_->handles;
}
Var::Var(Var&& other) noexcept : node_(std::move(other.node_)) {}
Var& Var::operator=(const Var& other) {
  if (this != &other) {
    if (other.node_) ++other.node_->handles;
    release();
    node_ = other.node_;
  }
  return *this;
}
Var& Var::operator=(Var&& other) noexcept {
  if (this != &other) {
    release();
    node_ = std::move(other.node_);
  }
  return *this;
}
Var::~Var() { release(); }

void Var::release() noexcept {
  if (!node_) return;
  if (--node_->handles == 0 && !node_->leaf) detail::drop_value(*node_);
  node_.reset();
}

const Tensor& Var::value() const {
  if (!node_) throw ArgumentError("autograd: use of an undefined Var");
  return node_->value;
}
bool Var::requires_grad() const { return node_ && node_->requires_grad; }
Tensor Var::grad() const {
  if (!node_) return {};
  return node_->param_grad.defined() ? node_->param_grad : node_->grad;
}

// ---- backward ---------------------------------------------------------------------------------------------------

void backward(const Var& loss) {
  check(loss, "backward");
  if (loss.value().numel() != 1)
    throw ArgumentError("autograd::backward: the loss must hold one value, got shape " + shape_str(loss.shape()));
  if (!loss.requires_grad())
    throw ArgumentError("autograd::backward: the loss does not depend on anything that requires a gradient");
  // Shared pointers, so that cutting the tape below frees nothing while it is still being walked.
  std::vector<std::shared_ptr<Node>> order;
  std::unordered_set<const Node*> seen;
  std::vector<std::shared_ptr<Node>> stack = {loss.node()};
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    for (const auto& in : n->inputs)
      if (in->requires_grad) stack.push_back(in);
    order.push_back(std::move(n));
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a->seq > b->seq; });

  const Node* root = loss.node().get();
  for (const auto& n : order) {
    if (!n->rule) continue;  // a leaf, or a node whose tape was already freed
    Tensor g = n->grad;
    if (n.get() == root && !g.defined() && !n->takes_seed) g = ops::fill(n->value, 1.0);
    if (g.defined() || n.get() == root) {
      Grads grads{n->inputs};
      n->rule(g, grads);
    }
    n->grad = Tensor();  // an intermediate's gradient is not needed once passed on
    // Nor are the tensors its rule saved, nor a recomputed value (its users' rules have all run): freeing them now
    // lets the rest of the backward reuse their buffers. (A node with a rule is never a leaf.)
    n->rule = nullptr;
    n->recompute = nullptr;
    n->derived = {};
    n->inputs.clear();
    if (n->handles == 0) n->value = Tensor();
  }
}

// ---- elementwise --------------------------------------------------------------------------------------------------

Var add(const Var& a, const Var& b) {
  check(a, "add");
  check(b, "add");
  const Shape sa = a.shape(), sb = b.shape();
  return make(ops::add(a.value(), b.value()), {a, b}, [sa, sb](const Tensor& g, Grads& gr) {
    if (gr.needs(0)) gr.add(0, reduce_to(g, sa));
    if (gr.needs(1)) gr.add(1, reduce_to(g, sb));
  });
}

Var sub(const Var& a, const Var& b) {
  check(a, "sub");
  check(b, "sub");
  const Shape sa = a.shape(), sb = b.shape();
  return make(ops::sub(a.value(), b.value()), {a, b}, [sa, sb](const Tensor& g, Grads& gr) {
    if (gr.needs(0)) gr.add(0, reduce_to(g, sa));
    if (gr.needs(1)) gr.add(1, reduce_to(ops::neg(g), sb));
  });
}

Var mul(const Var& a, const Var& b) {
  check(a, "mul");
  check(b, "mul");
  // Each factor is kept only for the other's gradient (LoRA's dropout mask times its input keeps neither input).
  const Shape sa = a.shape(), sb = b.shape();
  const Tensor av = b.requires_grad() ? keep(a) : Tensor(), bv = a.requires_grad() ? keep(b) : Tensor();
  return make(ops::mul(a.value(), b.value()), {a, b}, [av, bv, sa, sb](const Tensor& g, Grads& gr) {
    if (gr.needs(0)) gr.add(0, reduce_to(ops::mul(g, gr.value(1, bv)), sa));
    if (gr.needs(1)) gr.add(1, reduce_to(ops::mul(g, gr.value(0, av)), sb));
  });
}

Var add(const Var& a, double s) {
  check(a, "add");
  return make(ops::add(a.value(), static_cast<float>(s)), {a}, [](const Tensor& g, Grads& gr) { gr.add(0, g); });
}

Var mul(const Var& a, double s) {
  check(a, "mul");
  return make(ops::mul(a.value(), static_cast<float>(s)), {a},
              [s](const Tensor& g, Grads& gr) { gr.add(0, ops::mul(g, static_cast<float>(s))); });
}

Var silu(const Var& x) {
  check(x, "silu");
  const Tensor xv = x.value();
  return make(ops::silu(xv), {x}, [xv](const Tensor& g, Grads& gr) { gr.add(0, ops::silu_backward(g, xv)); });
}

Var swiglu(const Var& gate, const Var& up) {
  check(gate, "swiglu");
  check(up, "swiglu");
  const Tensor gv = gate.value(), uv = up.value();
  // The output (the down projection's input, as large as gate) is made again for down's weight gradient.
  return recomputable(make(ops::swiglu(gv, uv), {gate, up},
                           [gv, uv](const Tensor& g, Grads& gr) {
                             ops::SwigluGrads d = ops::swiglu_backward(g, gv, uv);
                             if (gr.needs(0)) gr.add(0, d.dgate);
                             if (gr.needs(1)) gr.add(1, d.dup);
                           }),
                      [gv, uv] { return ops::detail::swiglu_again(gv, uv); });
}

Var rsqrt(const Var& x) {
  check(x, "rsqrt");
  const Tensor y = ops::rsqrt(x.value());
  // d rsqrt(x) / dx = -x^(-3/2) / 2 = -y^3 / 2
  return make(y, {x}, [y](const Tensor& g, Grads& gr) {
    gr.add(0, ops::mul(g, ops::mul(ops::pow(y, 3.0), -0.5f)));
  });
}

Var exp(const Var& x) {
  check(x, "exp");
  const Tensor y = ops::exp(x.value());
  return make(y, {x}, [y](const Tensor& g, Grads& gr) { gr.add(0, ops::mul(g, y)); });
}

// ---- reductions ---------------------------------------------------------------------------------------------------

Var sum(const Var& x, const std::vector<int>& dims, bool keepdim) {
  check(x, "sum");
  const Shape in = x.shape();
  const std::vector<int> ds = normalized_dims(dims, x.rank());
  return make(ops::sum(x.value(), dims, keepdim), {x},
              [in, ds](const Tensor& g, Grads& gr) { gr.add(0, unreduce(g, in, ds)); });
}

Var mean(const Var& x, const std::vector<int>& dims, bool keepdim) {
  check(x, "mean");
  const Shape in = x.shape();
  const std::vector<int> ds = normalized_dims(dims, x.rank());
  int64_t n = 1;
  for (int d : ds) n *= in[d];
  return make(ops::mean(x.value(), dims, keepdim), {x}, [in, ds, n](const Tensor& g, Grads& gr) {
    gr.add(0, unreduce(ops::mul(g, 1.0f / static_cast<float>(n)), in, ds));
  });
}

// ---- softmax and masking ------------------------------------------------------------------------------------------

Var softmax(const Var& x, int dim, bool causal) {
  check(x, "softmax");
  const int d = normalize_dim(dim, x.rank());
  // Masked entries have y = 0, so the ordinary gradient gives them 0 as well.
  const Tensor y = ops::softmax(x.value(), d, causal);
  return make(y, {x}, [y, d](const Tensor& g, Grads& gr) { gr.add(0, ops::softmax_backward(g, y, d)); });
}

Var rms_norm(const Var& x, const Var& weight, double eps) {
  check(x, "rms_norm");
  check(weight, "rms_norm");
  const Tensor xv = x.value(), wv = weight.value();
  ops::RmsNorm n = ops::rms_norm(xv, wv, eps);
  const Tensor rstd = n.rstd;
  // The output (the next linears' input) is made again from what the rule keeps, for their weight gradients.
  const std::function<Tensor()> again = [xv, wv, eps] { return ops::rms_norm(xv, wv, eps).y; };
  return recomputable(make(n.y, {x, weight}, [xv, wv, rstd](const Tensor& g, Grads& gr) {
    Tensor dweight;
    // The weight's gradient goes straight into its gradient buffer where it has one (the sum's last pass adds it).
    const Tensor* acc = gr.param_grad(1);
    // x is the residual stream: its gradient from the residual add joins the norm's in the kernel's pass.
    gr.add_joined(0, [&](const Tensor* addend) {
      ops::RmsNormGrads d = ops::rms_norm_backward(g, xv, wv, rstd, addend, acc);
      dweight = d.dweight;
      return d.dx;
    });
    if (!dweight.defined() && gr.needs(1)) dweight = ops::rms_norm_backward(g, xv, wv, rstd, nullptr, acc).dweight;
    if (!acc) gr.add(1, dweight);
  }), again);
}

Var rope(const Var& x, const Tensor& cos, const Tensor& sin, double scale) {
  check(x, "rope");
  // The rotation is orthogonal: its gradient rotates back, by the same scale.
  return make(ops::rope(x.value(), cos, sin, false, scale), {x}, [cos, sin, scale](const Tensor& g, Grads& gr) {
    gr.add(0, ops::rope(g, cos, sin, true, scale));
  });
}

Var masked_fill(const Var& x, const Tensor& mask, double value) {
  check(x, "masked_fill");
  return make(ops::masked_fill(x.value(), mask, value), {x},
              [mask](const Tensor& g, Grads& gr) { gr.add(0, ops::masked_fill(g, mask, 0.0)); });
}

// ---- products -----------------------------------------------------------------------------------------------------

Var bmm(const Var& a, const Var& b) {
  check(a, "bmm");
  check(b, "bmm");
  const Tensor av = a.value(), bv = b.value();
  return make(ops::bmm(av, bv), {a, b}, [av, bv](const Tensor& g, Grads& gr) {
    if (gr.needs(0)) gr.add(0, ops::bmm(g, bv.transpose(1, 2)));
    if (gr.needs(1)) gr.add(1, ops::bmm(av.transpose(1, 2), g));
  });
}

Var attention(const Var& q, const Var& k, const Var& v, double scale) {
  check(q, "attention");
  check(k, "attention");
  check(v, "attention");
  const Tensor qv = q.value(), kv = k.value(), vv = v.value();
  const ops::Attention a = ops::attention(qv, kv, vv, scale);
  return make(a.out, {q, k, v}, [qv, kv, vv, a, scale](const Tensor& g, Grads& gr) {
    const ops::AttentionGrads d = ops::attention_backward(g, qv, kv, vv, a, scale);
    if (gr.needs(0)) gr.add(0, d.dq);
    if (gr.needs(1)) gr.add(1, d.dk);
    if (gr.needs(2)) gr.add(2, d.dv);
  });
}

Var linear(const Var& x, const Var& weight) {
  check(x, "linear");
  check(weight, "linear");
  const Tensor wv = weight.value();
  const Tensor xv = weight.requires_grad() ? keep(x) : Tensor();
  const Shape xs = x.shape();
  return make(ops::linear(x.value(), wv), {x, weight}, [xv, wv, xs](const Tensor& g, Grads& gr) {
    if (gr.needs(0)) {
      const int64_t n = g.size(-1);
      const Tensor g2 = ops::contiguous(g).reshape({-1, n});
      gr.add(0, ops::mm(g2, wv).reshape(xs));
    }
    if (gr.needs(1)) gr.add_linear_dW(1, g, gr.value(0, xv));
  });
}

namespace {
// A q4 linear's latent must be its weight's [N, K].
void check_latent(const char* op, const Var& latent, const Q4Weight& w) {
  check(latent, op);
  if (latent.shape() != Shape{w.out_features(), w.in_features})
    throw ArgumentError(std::string("autograd::") + op + ": latent " + shape_str(latent.shape()) +
                        " is not the weight's [" + std::to_string(w.out_features()) + ", " +
                        std::to_string(w.in_features) + "]");
}
}  // namespace

Var linear_q4gsw(const Var& x, const Q4Weight& w, const Var& latent) {
  check(x, "linear_q4gsw");
  check_latent("linear_q4gsw", latent, w);
  const Tensor xv = latent.requires_grad() ? keep(x) : Tensor();
  return make(ops::linear_q4gsw(x.value(), w), {x, latent}, [xv, w](const Tensor& g, Grads& gr) {
    if (gr.needs(0)) gr.add_linear_q4gsw_backward(0, g, w);
    // Straight through: the gradient of the dequantised weight goes to the latent unchanged.
    if (gr.needs(1)) gr.add_linear_dW(1, g, gr.value(0, xv));
  });
}

Var linear_q4gsw(const Var& x, const Q4Weight& w) {
  check(x, "linear_q4gsw");
  return make(ops::linear_q4gsw(x.value(), w), {x},
              [w](const Tensor& g, Grads& gr) { gr.add_linear_q4gsw_backward(0, g, w); });
}

Var linear_q4gsw_residual(const Var& residual, const Var& x, const Q4Weight& w, const Var& latent) {
  check(residual, "linear_q4gsw_residual");
  check(x, "linear_q4gsw_residual");
  const bool trains = latent.defined();
  if (trains) check_latent("linear_q4gsw_residual", latent, w);
  const Tensor y = ops::linear_q4gsw_residual(residual.value(), x.value(), w);
  const Tensor xv = trains && latent.requires_grad() ? keep(x) : Tensor();
  std::vector<Var> inputs = {residual, x};
  if (trains) inputs.push_back(latent);
  return make(y, inputs, [xv, w, trains](const Tensor& g, Grads& gr) {
    if (gr.needs(0)) gr.add(0, g);
    if (gr.needs(1)) gr.add_linear_q4gsw_backward(1, g, w);
    if (trains && gr.needs(2)) gr.add_linear_dW(2, g, gr.value(1, xv));
  });
}

Var embedding(const Var& weight, const Tensor& indices) {
  check(weight, "embedding");
  const int64_t rows = weight.size(0);
  return make(ops::embedding(weight.value(), indices), {weight}, [indices, rows](const Tensor& g, Grads& gr) {
    gr.add(0, ops::embedding_backward(g, indices, rows));
  });
}

Var cross_entropy(const Var& logits, const Tensor& labels, bool overwrite_logits) {
  check(logits, "cross_entropy");
  ops::CrossEntropy ce = ops::fused_ce(logits.value(), labels, std::nullopt, overwrite_logits);
  const Tensor dlogits = ce.dlogits;
  return make(
      ce.loss, {logits},
      [dlogits](const Tensor& g, Grads& gr) {
        // Seeded with 1 (the usual case: this is the loss), dlogits is the gradient as it stands.
        gr.add(0, g.defined() ? ops::mul(dlogits, g) : dlogits);
      },
      /*takes_seed=*/true);
}

// ---- views and copies ---------------------------------------------------------------------------------------------

Var reshape(const Var& x, const Shape& shape) {
  check(x, "reshape");
  const Tensor xv = x.value().is_contiguous() ? x.value() : ops::contiguous(x.value());
  const Shape in = x.shape();
  return make(xv.reshape(shape), {x}, [in](const Tensor& g, Grads& gr) {
    gr.add(0, (g.is_contiguous() ? g : ops::contiguous(g)).reshape(in));
  });
}

Var permute(const Var& x, const std::vector<int>& dims) {
  check(x, "permute");
  std::vector<int> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[normalize_dim(dims[i], x.rank())] = static_cast<int>(i);
  return make(x.value().permute(dims), {x},
              [inverse](const Tensor& g, Grads& gr) { gr.add(0, g.permute(inverse)); });
}

Var transpose(const Var& x, int dim0, int dim1) {
  check(x, "transpose");
  return make(x.value().transpose(dim0, dim1), {x},
              [dim0, dim1](const Tensor& g, Grads& gr) { gr.add(0, g.transpose(dim0, dim1)); });
}

Var slice(const Var& x, int dim, int64_t start, int64_t end) {
  check(x, "slice");
  const Tensor y = x.value().slice(dim, start, end);
  const Shape in = x.shape();
  const int d = normalize_dim(dim, x.rank());
  // The slice's first element, as slice() clamped it.
  const int64_t first = (y.offset() - x.value().offset()) / std::max<int64_t>(x.value().strides()[d], 1);
  return make(y, {x}, [in, d, first](const Tensor& g, Grads& gr) {
    const Tensor z = zeros(g, in);
    ops::copy_(z.slice(d, first, first + g.size(d)), g);
    gr.add(0, z);
  });
}

Var expand(const Var& x, const Shape& shape) {
  check(x, "expand");
  const Shape in = x.shape();
  return make(x.value().expand(shape), {x}, [in](const Tensor& g, Grads& gr) { gr.add(0, reduce_to(g, in)); });
}

Var contiguous(const Var& x) {
  check(x, "contiguous");
  return make(ops::contiguous(x.value()), {x}, [](const Tensor& g, Grads& gr) { gr.add(0, g); });
}

Var cat(const std::vector<Var>& xs, int dim) {
  if (xs.empty()) throw ArgumentError("autograd::cat: no inputs");
  std::vector<Tensor> values;
  std::vector<int64_t> sizes;
  for (const Var& v : xs) {
    check(v, "cat");
    values.push_back(v.value());
  }
  const int d = normalize_dim(dim, xs[0].rank());
  for (const Var& v : xs) sizes.push_back(v.size(d));
  return make(ops::cat(values, d), xs, [sizes, d](const Tensor& g, Grads& gr) {
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (gr.needs(i)) gr.add(i, g.slice(d, at, at + sizes[i]));
      at += sizes[i];
    }
  });
}

}  // namespace wgtrain::autograd
