// swiglu: silu(gate) * up and its two gradients, one pass each (swiglu.wgsl).
#include <tuple>

#include "ops/common.h"
#include "ops/matmul/gemm.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) SwigluParams {
  uint32_t n, gate_off, up_off, grad_off;
  uint32_t rows, cols, flags, pad;                 // the MAXIMA form's matrix and what it combines
  uint32_t max_r0, max_c0, max_r1, max_c1;         // where its outputs' row and column maxima go
};

// What the mixed GEMMs after swiglu get from it: the MAXIMA form writes its outputs' row and column maxima (kRemember)
// or only the same values by the same code (kSameBits: a forward's output made again); kPlain: neither.
enum class Maxima { kPlain, kSameBits, kRemember };

// Checks the operands (float32, one shape, one device) and makes them contiguous.
std::vector<Tensor> operands(const char* op, std::initializer_list<std::pair<const Tensor*, const char*>> in) {
  std::vector<Tensor> out;
  const Tensor& first = *in.begin()->first;
  for (const auto& [t, name] : in) {
    check_dtype(op, *t, name, {DType::F32});
    check_same_device(op, first, *t);
    if (t->shape() != first.shape())
      throw ArgumentError(std::string(op) + ": " + name + " " + shape_str(t->shape()) + " must have the shape of " +
                          in.begin()->second + " " + shape_str(first.shape()));
    out.push_back(contiguous(*t));
  }
  return out;
}

// One dispatch over contiguous operands: gate, up (and the incoming gradient) into outs (out, or d_gate and d_up).
void run(const char* op, const std::vector<Tensor>& in, const std::vector<Tensor>& outs, Maxima maxima) {
  DeviceImpl& dev = outs[0].device_impl();
  const int64_t n = outs[0].numel();
  if (n == 0) return;
  // 16-byte words where every operand starts on one and the length is whole words.
  bool vec4 = n % 4 == 0;
  for (const Tensor& t : in) vec4 = vec4 && t.offset() % 4 == 0;
  const int64_t w = vec4 ? 4 : 1;
  const bool backward = in.size() == 3;
  SwigluParams p{};
  p.n = u32(n / w, "elements");
  p.gate_off = u32(in[0].offset() / w, "offset");
  p.up_off = u32(in[1].offset() / w, "offset");
  p.grad_off = backward ? u32(in[2].offset() / w, "offset") : 0u;
  // The MAXIMA form: the operands as a matrix [rows, last dim] in tiles of 64 x 128, where the GEMMs that read the
  // outputs next run mixed (their absmax passes then find the maxima made) and its grid fits.
  const int64_t cols = outs[0].rank() >= 2 ? outs[0].size(-1) : 0, rows = cols ? n / cols : 0;
  const int64_t maxd = dev.limits.max_workgroups_per_dim;
  const bool tiles = maxima != Maxima::kPlain && vec4 && cols % 4 == 0 && rows > 0 && gemm_is_mixed(dev) &&
                     (cols + 127) / 128 <= maxd && (rows + 63) / 64 <= maxd;
  wgtrain::detail::DispatchDesc d;
  d.op = op;
  d.pipeline = &dev.pipeline("swiglu/swiglu", {{"T", vec4 ? "vec4<f32>" : "f32"},
                                               {"BACKWARD", backward ? "true" : "false"},
                                               {"MAXIMA", tiles ? "true" : "false"}});
  d.uniforms = &p;
  d.uniform_bytes = sizeof p;
  for (const Tensor& t : in) d.storage.push_back({t.storage()->buffer});
  for (const Tensor& t : outs) d.storage.push_back({t.storage()->buffer});
  d.read_only = (1u << in.size()) - 1;
  wgtrain::detail::DerivedValue at;
  if (tiles) {
    const bool remember = maxima == Maxima::kRemember;
    // One slice for every output's maxima (one binding): rows, then columns, of each in turn.
    at = operand_maxima_scratch(dev, remember ? static_cast<int64_t>(outs.size()) * (rows + cols) : 1);
    p.rows = u32(rows, "rows");
    p.cols = u32(cols, "columns");
    p.flags = remember ? 3u : 0u;
    p.max_r0 = u32(at.offset, "offset");
    p.max_c0 = u32(at.offset + rows, "offset");
    p.max_r1 = u32(at.offset + (rows + cols), "offset");
    p.max_c1 = u32(at.offset + (rows + cols) + rows, "offset");
    d.storage.push_back({at.storage->buffer});
    d.groups_x = static_cast<uint32_t>((cols + 127) / 128);
    d.groups_y = static_cast<uint32_t>((rows + 63) / 64);
  } else {
    std::tie(d.groups_x, d.groups_y) = dev.grid((static_cast<uint64_t>(p.n) + 255) / 256);
  }
  dev.dispatch(d);
  if (tiles && maxima == Maxima::kRemember)
    for (size_t o = 0; o < outs.size(); ++o)
      remember_operand_maxima(outs[o], rows, cols,
                              {at.storage, at.offset + static_cast<int64_t>(o) * (rows + cols)});
}

Tensor swiglu_values(const Tensor& gate, const Tensor& up, Maxima maxima) {
  const auto x = operands("swiglu", {{&gate, "gate"}, {&up, "up"}});
  Tensor out = new_tensor(x[0].device_impl(), x[0].shape(), DType::F32);
  run("swiglu", {x[0], x[1]}, {out}, maxima);
  return out;
}

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) { return swiglu_values(gate, up, Maxima::kRemember); }

SwigluGrads swiglu_backward(const Tensor& grad, const Tensor& gate, const Tensor& up) {
  const auto x = operands("swiglu_backward", {{&grad, "grad_output"}, {&gate, "gate"}, {&up, "up"}});
  DeviceImpl& dev = x[0].device_impl();
  SwigluGrads r{new_tensor(dev, x[0].shape(), DType::F32), new_tensor(dev, x[0].shape(), DType::F32)};
  run("swiglu_backward", {x[1], x[2], x[0]}, {r.dgate, r.dup}, Maxima::kRemember);
  return r;
}

namespace detail {

Tensor swiglu_again(const Tensor& gate, const Tensor& up) { return swiglu_values(gate, up, Maxima::kSameBits); }

void register_swiglu_ops(Registry& r) {
  OpSchema s;
  s.name = "swiglu";
  s.family = "swiglu";
  s.summary = "the gated MLP activation silu(gate) * up, one pass (silu(gate) never stored)";
  s.inputs = {"gate", "up"};
  s.outputs = {"out"};
  s.dtypes = {DType::F32};
  s.constraints = {"gate and up of one shape"};
  s.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", swiglu(input(in, "gate"), input(in, "up"))}};
  };
  r.add(s);

  OpSchema b;
  b.name = "swiglu_backward";
  b.family = "swiglu";
  b.summary = "swiglu's gradients: grad_up = grad * silu(gate), grad_gate = grad * up * silu'(gate), one pass";
  b.inputs = {"grad_output", "gate", "up"};
  b.outputs = {"grad_gate", "grad_up"};
  b.dtypes = {DType::F32};
  b.constraints = {"grad_output, gate and up of one shape"};
  b.training_only = true;
  b.run = [](Device&, const OpTensors& in, const OpArgs&) {
    SwigluGrads g = swiglu_backward(input(in, "grad_output"), input(in, "gate"), input(in, "up"));
    return OpTensors{{"grad_gate", g.dgate}, {"grad_up", g.dup}};
  };
  r.add(std::move(b));
}

}  // namespace detail
}  // namespace wgtrain::ops
