// dropout, dropout_mask: dropout.wgsl, one thread an element.
#include "wgtrain/dropout.h"

#include <cmath>

#include "ops/common.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) DropoutParams {
  uint32_t n, x_off, stream, threshold;
  float scale;
  uint32_t mask_only, key_off, pad;
};
static_assert(sizeof(DropoutParams) == 32);

void check_p(const char* op, double p) {
  if (!(p >= 0.0 && p < 1.0)) throw ArgumentError(std::string(op) + ": p must be in [0, 1), got " + std::to_string(p));
}

void check_key(const char* op, const Tensor& key) {
  check_dtype(op, key, "key", {DType::I32});
  if (key.shape() != Shape{4} || !key.is_contiguous())
    throw ArgumentError(std::string(op) + ": key must be a contiguous int32 [4] (ops::dropout_key), got " +
                        shape_str(key.shape()));
}

// x: contiguous float32, or nullptr for the mask alone.
Tensor run(const char* op, const Shape& shape, const Tensor* x, const Tensor& key, double p, uint32_t stream) {
  DeviceImpl& dev = key.device_impl();
  Tensor y = new_tensor(dev, shape, DType::F32);
  if (y.numel() == 0) return y;
  DropoutParams u{};
  u.n = u32(y.numel(), "elements");
  u.x_off = x ? u32(x->offset(), "offset") : 0;
  u.stream = stream;
  // p * 2^24 < 2^24, and 1 - p >= 2^-53 > 0: both well defined for p in [0, 1).
  u.threshold = static_cast<uint32_t>(std::nearbyint(p * 16777216.0));
  u.scale = static_cast<float>(1.0 / (1.0 - p));
  u.mask_only = x ? 0u : 1u;
  u.key_off = u32(key.offset(), "offset");
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(u.n) + 255) / 256);
  dev.dispatch({op, &dev.pipeline("dropout/dropout", {}), &u, sizeof u,
                {{key.storage()->buffer}, {(x ? *x : key).storage()->buffer}, {y.storage()->buffer}}, gx, gy, 1});
  return y;
}

}  // namespace

std::array<int32_t, 4> dropout_key(uint64_t seed, uint64_t counter) {
  auto word = [](uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); };
  return {word(seed), word(seed >> 32), word(counter), word(counter >> 32)};
}

Tensor dropout(const Tensor& x_in, const Tensor& key, double p, uint32_t stream) {
  const char* op = "dropout";
  check_dtype(op, x_in, "self", {DType::F32});
  check_key(op, key);
  check_same_device(op, x_in, key);
  check_p(op, p);
  const Tensor x = contiguous(x_in);
  return run(op, x.shape(), &x, key, p, stream);
}

Tensor dropout_mask(const Shape& shape, const Tensor& key, double p, uint32_t stream) {
  const char* op = "dropout_mask";
  check_key(op, key);
  check_p(op, p);
  for (int64_t d : shape)
    if (d < 0) throw ArgumentError(std::string(op) + ": negative size in shape " + shape_str(shape));
  return run(op, shape, nullptr, key, p, stream);
}

namespace detail {

void register_dropout_ops(Registry& r) {
  const std::vector<ArgSpec> args = {
      {"p", "float", "0.5", "probability of zeroing an element, in [0, 1)"},
      {"stream", "int", "0", "selects an independent mask under the same key (u32)"}};
  auto stream_of = [](const OpArgs& a) {
    const int64_t s = a.get_int("stream", 0);
    if (s < 0 || s > int64_t{0xFFFFFFFF}) throw ArgumentError("dropout: stream must be in [0, 2^32), got " + std::to_string(s));
    return static_cast<uint32_t>(s);
  };
  OpSchema s;
  s.name = "dropout";
  s.family = "dropout";
  s.summary = "inverted dropout: each element zeroed with probability p, else times 1/(1-p); the mask a hash of "
              "(key, stream, index)";
  s.inputs = {"self", "key"};
  s.args = args;
  s.outputs = {"out"};
  s.dtypes = {DType::F32};
  s.min_rank = 0;
  s.training_only = true;
  s.constraints = {"key int32 [4]: seed low, seed high, counter low, counter high", "0 <= p < 1"};
  s.run = [stream_of](Device&, const OpTensors& in, const OpArgs& a) {
    return OpTensors{{"out", dropout(input(in, "self"), input(in, "key"), a.get_float("p", 0.5), stream_of(a))}};
  };
  r.add(s);

  s.name = "dropout_mask";
  s.summary = "the multipliers dropout applies to a tensor of `shape`: 0 or 1/(1-p) per element";
  s.inputs = {"key"};
  s.args.push_back({"shape", "int[]", "", "the mask's shape"});
  s.constraints = {"key int32 [4]: seed low, seed high, counter low, counter high", "0 <= p < 1"};
  s.run = [stream_of](Device&, const OpTensors& in, const OpArgs& a) {
    return OpTensors{{"out", dropout_mask(a.get_int_list("shape", {}), input(in, "key"), a.get_float("p", 0.5),
                                          stream_of(a))}};
  };
  r.add(std::move(s));
}

}  // namespace detail
}  // namespace wgtrain::ops
