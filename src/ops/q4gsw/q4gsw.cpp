// The q4gsw ops: linear_q4gsw (forward), linear_q4gsw_backward (input gradient), linear_dW (weight gradient),
// q4gsw_requant (latent -> codes, optionally scales first); plus the layout conversions of include/wgtrain/q4gsw.h.
// The three GEMMs run through matmul/gemm.wgsl; requant_groups.wgsl (and the two-kernel form before it,
// requant.wgsl and scales.wgsl) are here.
#include "wgtrain/q4gsw.h"

#include <cstring>

#include "ops/elementwise/map.h"
#include "ops/matmul/gemm.h"
#include "ops/q4gsw/q4gsw_force.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain {

using namespace ops::detail;

namespace q4gsw {

std::vector<int32_t> pack_bytes(std::span<const uint8_t> bytes, int64_t n, int64_t k) {
  const int64_t bpr = bytes_per_row(k), wpr = words_per_row(k);
  if (static_cast<int64_t>(bytes.size()) != n * bpr)
    throw ArgumentError("q4gsw: " + std::to_string(bytes.size()) + " code bytes given, [" + std::to_string(n) +
                        ", " + std::to_string(bpr) + "] needed for N = " + std::to_string(n) + ", K = " +
                        std::to_string(k));
  std::vector<int32_t> words(static_cast<size_t>(n * wpr), static_cast<int32_t>(0x88888888u));
  for (int64_t r = 0; r < n; ++r) {
    std::vector<uint8_t> row(static_cast<size_t>(wpr * 4), 0x88);
    std::memcpy(row.data(), bytes.data() + r * bpr, static_cast<size_t>(bpr));
    if (k % 2) row[bpr - 1] = (row[bpr - 1] & 0x0f) | 0x80;  // the odd K's last high nibble is padding
    std::memcpy(words.data() + r * wpr, row.data(), row.size());
  }
  return words;
}

std::vector<uint8_t> unpack_words(std::span<const int32_t> words, int64_t n, int64_t k) {
  const int64_t bpr = bytes_per_row(k), wpr = words_per_row(k);
  if (static_cast<int64_t>(words.size()) != n * wpr) throw ArgumentError("q4gsw: word count does not match N, K");
  std::vector<uint8_t> bytes(static_cast<size_t>(n * bpr));
  for (int64_t r = 0; r < n; ++r) {
    const auto* row = reinterpret_cast<const uint8_t*>(words.data() + r * wpr);
    std::memcpy(bytes.data() + r * bpr, row, static_cast<size_t>(bpr));
    if (k % 2) bytes[r * bpr + bpr - 1] = (bytes[r * bpr + bpr - 1] & 0x0f) | 0x80;
  }
  return bytes;
}

namespace {
void check_group(int64_t group_size) {
  if (group_size <= 0 || group_size % 8)
    throw ArgumentError("q4gsw: group_size must be a positive multiple of 8 (32, 64, 128), got " +
                        std::to_string(group_size));
}
}  // namespace

Q4Weight upload(Device& device, std::span<const uint8_t> bytes, std::span<const float> scales, int64_t n, int64_t k,
                int64_t group_size) {
  check_group(group_size);
  const int64_t g = groups(k, group_size);
  if (static_cast<int64_t>(scales.size()) != g * n)
    throw ArgumentError("q4gsw: " + std::to_string(scales.size()) + " scales given, [" + std::to_string(g) + ", " +
                        std::to_string(n) + "] needed");
  Q4Weight w;
  const auto words = pack_bytes(bytes, n, k);
  w.codes = Tensor::from_host(device, {n, words_per_row(k)}, words);
  w.codes.storage()->int_range.reset();  // bit patterns, not indices
  w.scales = Tensor::from_host(device, {g, n}, scales);
  w.in_features = k;
  w.group_size = group_size;
  return w;
}

void check_layout(const char* op, const Shape& codes, const Shape& scales, int64_t k, int64_t group_size) {
  if (group_size <= 0 || group_size % 8)
    throw ArgumentError(std::string(op) + ": group_size must be a positive multiple of 8, got " +
                        std::to_string(group_size));
  if (codes.size() != 2 || scales.size() != 2)
    throw ArgumentError(std::string(op) + ": codes and scales must have 2 dims, got " + shape_str(codes) + " and " +
                        shape_str(scales));
  const int64_t n = codes[0];
  if (codes[1] != words_per_row(k))
    throw ArgumentError(std::string(op) + ": codes " + shape_str(codes) + " do not hold K = " + std::to_string(k) +
                        " (" + std::to_string(words_per_row(k)) + " words per row)");
  if (scales[0] != groups(k, group_size) || scales[1] != n)
    throw ArgumentError(std::string(op) + ": scales " + shape_str(scales) + " should be [" +
                        std::to_string(groups(k, group_size)) + ", " + std::to_string(n) + "]");
}

std::vector<uint8_t> download_bytes(const Q4Weight& w) {
  const auto words = w.codes.to_host_i32();
  return unpack_words(words, w.out_features(), w.in_features);
}

}  // namespace q4gsw

namespace ops {

namespace {

void check_weight(const char* op, const Q4Weight& w) {
  check_dtype(op, w.codes, "codes", {DType::I32});
  check_dtype(op, w.scales, "scales", {DType::F32});
  check_same_device(op, w.codes, w.scales);
  q4gsw::check_layout(op, w.codes.shape(), w.scales.shape(), w.in_features, w.group_size);
  if (!w.codes.is_contiguous() || !w.scales.is_contiguous() || w.codes.offset() || w.scales.offset())
    throw ArgumentError(std::string(op) + ": codes and scales must be whole contiguous tensors");
}

// Flattens [..., F] to [1, M, F] (gathering a strided input first).
Tensor as_batch_rows(const Tensor& x) {
  const int64_t f = x.size(-1);
  const int64_t m = numel(Shape(x.shape().begin(), x.shape().end() - 1));
  const Tensor c = x.rank() == 2 ? x : contiguous(x).reshape({m, f});
  return c.unsqueeze(0);
}

}  // namespace

namespace {

// The forward and the input gradient: rows of `in` ([..., in_f]) times the weight read in `mode`, giving [..., out_f].
Tensor q4_gemm(const char* op, const char* in_name, const Tensor& in, const Q4Weight& w, GemmB::Mode mode,
               int64_t in_f, int64_t out_f, const Tensor* accumulate_into = nullptr,
               const Tensor* addend = nullptr) {
  check_weight(op, w);
  check_dtype(op, in, in_name, {DType::F32});
  check_same_device(op, in, w.codes);
  if (in.rank() < 1 || in.size(-1) != in_f)
    throw ArgumentError(std::string(op) + ": " + in_name + " " + shape_str(in.shape()) + " needs " +
                        std::to_string(in_f) + " features in its last dim");
  Shape out_shape = in.shape();
  out_shape.back() = out_f;
  if (accumulate_into) {
    check_dtype(op, *accumulate_into, "accumulate_into", {DType::F32});
    if (accumulate_into->shape() != out_shape || !accumulate_into->is_contiguous())
      throw ArgumentError(std::string(op) + ": accumulate_into must be a contiguous " + shape_str(out_shape) +
                          ", got " + shape_str(accumulate_into->shape()));
    if (accumulate_into->storage() == in.storage())
      throw ArgumentError(std::string(op) + ": accumulate_into shares memory with " + in_name);
  }
  const Tensor a = as_batch_rows(in);
  Tensor out = accumulate_into ? accumulate_into->reshape({1, a.size(1), out_f})
                               : new_tensor(in.device_impl(), {1, a.size(1), out_f}, DType::F32);
  GemmB b;
  b.mode = mode;
  b.b = &w.codes;
  b.scales = &w.scales;
  b.q_words = w.codes.size(1);
  b.q_rows = w.out_features();
  b.group_size = w.group_size;
  if (addend)  // mixed precision only (the caller checks gemm_is_mixed)
    gemm_sm(op, a, b, out_f, nullptr, out, false, addend);
  else
    gemm(op, a, b, out_f, nullptr, out, accumulate_into != nullptr);
  return accumulate_into ? *accumulate_into : out.reshape(out_shape);
}

}  // namespace

Tensor linear_q4gsw(const Tensor& x, const Q4Weight& w) {
  return q4_gemm("linear_q4gsw", "input", x, w, GemmB::Q4_NK, w.in_features, w.out_features());
}

Tensor linear_q4gsw_residual(const Tensor& residual, const Tensor& x, const Q4Weight& w) {
  const char* op = "linear_q4gsw_residual";
  check_dtype(op, residual, "residual", {DType::F32});
  check_same_device(op, residual, x);
  Shape out_shape = x.shape();
  if (!out_shape.empty()) out_shape.back() = w.out_features();
  if (residual.shape() != out_shape)
    throw ArgumentError(std::string(op) + ": residual " + shape_str(residual.shape()) + " should be " +
                        shape_str(out_shape) + ", the product's shape");
  if (!gemm_is_mixed(x.device_impl())) return ops::add(residual, linear_q4gsw(x, w));
  const Tensor r = contiguous(residual);
  return q4_gemm(op, "input", x, w, GemmB::Q4_NK, w.in_features, w.out_features(), nullptr, &r);
}

Tensor linear_q4gsw_backward(const Tensor& dy, const Q4Weight& w, const Tensor* accumulate_into) {
  return q4_gemm("linear_q4gsw_backward", "grad_output", dy, w, GemmB::Q4_RJ, w.out_features(), w.in_features,
                 accumulate_into);
}

Tensor linear_dW(const Tensor& dy, const Tensor& x, const Tensor* accumulate_into) {
  check_dtype("linear_dW", dy, "grad_output", {DType::F32});
  check_dtype("linear_dW", x, "input", {DType::F32});
  check_same_device("linear_dW", dy, x);
  if (dy.rank() < 1 || x.rank() < 1) throw ArgumentError("linear_dW: inputs need at least 1 dim");
  const Tensor d = as_batch_rows(dy), xs = as_batch_rows(x);
  if (d.size(1) != xs.size(1))
    throw ArgumentError("linear_dW: grad_output " + shape_str(dy.shape()) + " and input " + shape_str(x.shape()) +
                        " have different row counts");
  const int64_t n = d.size(2), k = xs.size(2);
  Tensor dw;
  if (accumulate_into) {
    dw = *accumulate_into;
    check_dtype("linear_dW", dw, "accumulate_into", {DType::F32});
    if (dw.shape() != Shape{n, k} || !dw.is_contiguous())
      throw ArgumentError("linear_dW: accumulate_into must be a contiguous [" + std::to_string(n) + ", " +
                          std::to_string(k) + "], got " + shape_str(dw.shape()));
    if (dw.storage() == dy.storage() || dw.storage() == x.storage())
      throw ArgumentError("linear_dW: accumulate_into shares memory with an input");
  } else {
    dw = new_tensor(dy.device_impl(), {n, k}, DType::F32);
  }
  // dW = dy^T x: A = dy^T as [1, N, M] (a strided view), B = x as [1, M, K].
  const Tensor a = d.transpose(1, 2);
  GemmB b;
  b.b = &xs;
  gemm("linear_dW", a, b, k, nullptr, dw, accumulate_into != nullptr);
  return dw;
}

namespace {
struct alignas(16) RequantParams {
  uint32_t rows, k, words, group_size, latent_off, pad0, pad1, pad2;
};
struct alignas(16) ScalesParams {
  uint32_t rows, k, groups, group_size, latent_off, pad0, pad1, pad2;
};
struct alignas(16) GroupsParams {
  uint32_t rows, k, words, group_size, latent_off, groups, tpg, gpw;
};
}  // namespace

namespace detail {
int q4gsw_requant_force = kRequantChoice;
}  // namespace detail

void q4gsw_requant(const Tensor& latent_in, Q4Weight& w, bool recompute_scales) {
  check_weight("q4gsw_requant", w);
  check_dtype("q4gsw_requant", latent_in, "latent", {DType::F32});
  check_same_device("q4gsw_requant", latent_in, w.codes);
  const int64_t n = w.out_features(), k = w.in_features;
  if (latent_in.shape() != Shape{n, k})
    throw ArgumentError("q4gsw_requant: latent " + shape_str(latent_in.shape()) + " should be [" +
                        std::to_string(n) + ", " + std::to_string(k) + "]");
  const Tensor latent = contiguous(latent_in);
  DeviceImpl& dev = latent.device_impl();
  if (n == 0 || k == 0) return;
  // One pass (requant_groups.wgsl) where a group's words fit the 256 threads of a workgroup.
  const int64_t tpg = w.group_size / 8;
  const bool groups_fit = tpg >= 1 && tpg <= 256 && w.group_size % 8 == 0;
  if (q4gsw_requant_force < kRequantChoice || q4gsw_requant_force > kRequantGroups2)
    throw ArgumentError("q4gsw_requant: no form " + std::to_string(q4gsw_requant_force) +
                        " to force (WGTRAIN_FORCE_Q4GSW_REQUANT: -1, 0, 1 or 2)");
  if (q4gsw_requant_force >= kRequantGroups && !groups_fit)
    throw UnsupportedError("q4gsw_requant: group size " + std::to_string(w.group_size) +
                           " does not fit the one-pass kernel (at most 2048, a multiple of 8)");
  if (q4gsw_requant_force != kRequantOld && groups_fit) {
    const int64_t groups = w.scales.size(0), gpw = 256 / tpg, wpt = q4gsw_requant_force == kRequantGroups2 ? 2 : 1;
    const bool vec4 = k % 4 == 0 && latent.offset() % 4 == 0;
    GroupsParams gp{u32(n, "N"),      u32(k, "K"),       u32(w.codes.size(1), "words"), u32(w.group_size, "group size"),
                    u32(latent.offset(), "offset"), u32(groups, "groups"), static_cast<uint32_t>(tpg),
                    static_cast<uint32_t>(gpw)};
    const auto& pipe = dev.pipeline("q4gsw/requant_groups", {{"RECOMPUTE", recompute_scales ? "true" : "false"},
                                                             {"VEC4", vec4 ? "true" : "false"},
                                                             {"WPT", std::to_string(wpt)}});
    const auto [gx, gy] = dev.grid((static_cast<uint64_t>(n * groups) + gpw * wpt - 1) / (gpw * wpt));
    dev.dispatch({"q4gsw_requant", &pipe, &gp, sizeof gp,
                  {{latent.storage()->buffer}, {w.scales.storage()->buffer}, {w.codes.storage()->buffer}}, gx, gy, 1});
    return;
  }
  if (recompute_scales) {
    ScalesParams sp{u32(n, "N"), u32(k, "K"), u32(w.scales.size(0), "groups"), u32(w.group_size, "group size"),
                    u32(latent.offset(), "offset"), 0, 0, 0};
    const auto& pipe = dev.pipeline("q4gsw/scales", {});
    const auto [gx, gy] = dev.grid((static_cast<uint64_t>(n * w.scales.size(0)) + 255) / 256);
    dev.dispatch({"q4gsw_requant (scales)", &pipe, &sp, sizeof sp,
                  {{latent.storage()->buffer}, {w.scales.storage()->buffer}}, gx, gy, 1});
  }
  RequantParams p{u32(n, "N"), u32(k, "K"), u32(w.codes.size(1), "words"), u32(w.group_size, "group size"),
                  u32(latent.offset(), "offset"), 0, 0, 0};
  const auto& pipe = dev.pipeline("q4gsw/requant", {});
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(n * w.codes.size(1)) + 255) / 256);
  dev.dispatch({"q4gsw_requant", &pipe, &p, sizeof p,
                {{latent.storage()->buffer}, {w.scales.storage()->buffer}, {w.codes.storage()->buffer}}, gx, gy, 1});
}

}  // namespace ops
}  // namespace wgtrain

namespace wgtrain::ops::detail {

namespace {

// run-op's weights come in the exchange layout (bytes [N, ceil(K/2)], each byte an int32 0..255 after reading a
// U8 file) unless layout=words; this gives the device form.
Q4Weight weight_from(Device& dev, const Tensor& codes, const Tensor& scales, int64_t k, const OpArgs& args) {
  Q4Weight w;
  w.in_features = k;
  w.group_size = args.get_int("group_size", 0);
  if (!args.has("group_size")) throw ArgumentError("missing argument group_size=<32|64|128>");
  const std::string layout = args.values().count("layout") ? args.values().at("layout") : "bytes";
  check_dtype("q4gsw", codes, "weight", {DType::I32});
  if (layout == "words") {
    w.codes = codes;
  } else if (layout == "bytes") {
    check_rank("q4gsw", codes, "weight", 2);
    const auto v = codes.to_host_i32();
    std::vector<uint8_t> bytes(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] < 0 || v[i] > 255) throw ArgumentError("q4gsw: weight byte " + std::to_string(v[i]) + " is not 0..255");
      bytes[i] = static_cast<uint8_t>(v[i]);
    }
    const auto sc = scales.to_host_f32();
    return q4gsw::upload(dev, bytes, sc, codes.size(0), k, w.group_size);
  } else {
    throw ArgumentError("layout must be bytes or words, got '" + layout + "'");
  }
  w.scales = scales;
  return w;
}

Tensor bytes_tensor(Device& dev, const Q4Weight& w) {
  const auto bytes = q4gsw::download_bytes(w);
  std::vector<int32_t> v(bytes.begin(), bytes.end());
  return Tensor::from_host(dev, {w.out_features(), q4gsw::bytes_per_row(w.in_features)}, v);
}

const std::vector<ArgSpec> kWeightArgs = {
    {"group_size", "int", "", "k per scale: 32, 64 or 128 (required)"},
    {"layout", "string", "bytes", "weight as bytes [N, ceil(K/2)] (two codes each) or words [N, ceil(K/8)]"}};

}  // namespace

void register_q4gsw_ops(Registry& r) {
  OpSchema f;
  f.name = "linear_q4gsw";
  f.family = "q4gsw";
  f.backends = {"webgpu", "native-vulkan"};
  f.summary = "input[..., K] W^T, W = (code - 8) * scale per group of K";
  f.inputs = {"input", "weight", "scales"};
  f.args = kWeightArgs;
  f.outputs = {"out"};
  f.dtypes = {DType::F32};
  f.min_rank = 1;
  f.constraints = {"group_size a multiple of 8", "scales [ceil(K/group_size), N]"};
  f.run = [](Device& dev, const OpTensors& in, const OpArgs& args) {
    const Tensor& x = input(in, "input");
    if (x.rank() < 1) throw ArgumentError("linear_q4gsw: input needs at least 1 dim");
    const Q4Weight w = weight_from(dev, input(in, "weight"), input(in, "scales"), x.size(-1), args);
    return OpTensors{{"out", linear_q4gsw(x, w)}};
  };
  r.add(std::move(f));

  OpSchema b;
  b.name = "linear_q4gsw_backward";
  b.family = "q4gsw";
  b.backends = {"webgpu", "native-vulkan"};
  b.summary = "grad_output[..., N] W -> [..., K], dequantising on the fly";
  b.inputs = {"grad_output", "weight", "scales"};
  b.args = kWeightArgs;
  b.args.push_back({"in_features", "int", "", "K (required)"});
  b.outputs = {"out"};
  b.dtypes = {DType::F32};
  b.min_rank = 1;
  b.training_only = true;
  b.run = [](Device& dev, const OpTensors& in, const OpArgs& args) {
    if (!args.has("in_features")) throw ArgumentError("linear_q4gsw_backward: missing argument in_features=<K>");
    const Q4Weight w = weight_from(dev, input(in, "weight"), input(in, "scales"), args.get_int("in_features", 0), args);
    return OpTensors{{"out", linear_q4gsw_backward(input(in, "grad_output"), w)}};
  };
  r.add(std::move(b));

  OpSchema d;
  d.name = "linear_dW";
  d.family = "q4gsw";
  d.backends = {"webgpu", "native-vulkan"};
  d.summary = "grad_output[M, N]^T input[M, K] (+ grad) -> float32 [N, K]";
  d.inputs = {"grad_output", "input", "grad?"};
  d.outputs = {"out"};
  d.dtypes = {DType::F32};
  d.min_rank = 1;
  d.training_only = true;
  d.constraints = {"equal row counts (leading dims flattened)", "grad, if given, is [N, K] and is added to"};
  d.run = [](Device&, const OpTensors& in, const OpArgs&) {
    if (auto it = in.find("grad"); it != in.end()) {
      const Tensor copy = clone(it->second);  // run-op returns a new tensor; the op itself adds in place
      return OpTensors{{"out", linear_dW(input(in, "grad_output"), input(in, "input"), &copy)}};
    }
    return OpTensors{{"out", linear_dW(input(in, "grad_output"), input(in, "input"))}};
  };
  r.add(std::move(d));

  OpSchema q;
  q.name = "q4gsw_requant";
  q.family = "q4gsw";
  q.backends = {"webgpu", "native-vulkan"};
  q.summary = "latent[N, K] -> codes clamp(round_half_even(latent / scale), -8, 7) + 8 (8 where scale is 0)";
  q.inputs = {"latent", "scales"};
  q.args = {{"group_size", "int", "", "k per scale (required)"},
            {"recompute_scales", "bool", "false", "first set scales to max|latent| / 7 per group"}};
  q.outputs = {"weight", "scales"};
  q.dtypes = {DType::F32};
  q.min_rank = 2;
  q.max_rank = 2;
  q.training_only = true;
  q.constraints = {"weight is written as bytes [N, ceil(K/2)] (int32 values 0..255)"};
  q.run = [](Device& dev, const OpTensors& in, const OpArgs& args) {
    const Tensor& latent = input(in, "latent");
    if (!args.has("group_size")) throw ArgumentError("q4gsw_requant: missing argument group_size=<32|64|128>");
    Q4Weight w;
    w.in_features = latent.size(1);
    w.group_size = args.get_int("group_size", 0);
    w.codes = Tensor::empty(dev, {latent.size(0), q4gsw::words_per_row(latent.size(1))}, DType::I32);
    w.scales = clone(input(in, "scales"));  // a copy: the op may rewrite it
    q4gsw_requant(latent, w, args.get_bool("recompute_scales", false));
    return OpTensors{{"weight", bytes_tensor(dev, w)}, {"scales", w.scales}};
  };
  r.add(std::move(q));
}

}  // namespace wgtrain::ops::detail
