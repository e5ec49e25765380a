// Shape and copy ops: the dim-order copy (contiguous), expand_copy, fill/full, cat, slice assignment, and the views
// (reshape, permute, transpose, slice, unsqueeze, squeeze) in the registry for run-op.
#include <bit>
#include <cmath>

#include "ops/elementwise/map.h"
#include "ops/shape/transpose_force.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) FillParams {
  uint32_t n, off, word, pad;
};

uint32_t word_of(double value, DType dtype) {
  switch (dtype) {
    case DType::F32: return std::bit_cast<uint32_t>(static_cast<float>(value));
    case DType::I32:
      if (value != std::nearbyint(value) || value < -2147483648.0 || value > 2147483647.0)
        throw ArgumentError("fill: " + std::to_string(value) + " is not an int32 value");
      return static_cast<uint32_t>(static_cast<int32_t>(value));
    case DType::Bool: return value != 0 ? 1u : 0u;
  }
  return 0;
}

void fill_contiguous(const Tensor& t, double value) {
  if (t.numel() == 0) return;
  DeviceImpl& dev = t.device_impl();
  FillParams p{u32(t.numel(), "element count"), u32(t.offset(), "offset"), word_of(value, t.dtype()), 0};
  const auto& pipe = dev.pipeline("shape/fill", {});
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(p.n) + 255) / 256);
  dev.dispatch({"fill", &pipe, &p, sizeof p, {{t.storage()->buffer}}, gx, gy, 1});
}

// Mirrors `struct Params` in shape/transpose_tile.wgsl (both transposing copies').
struct alignas(16) TransposeParams {
  uint32_t a_len, b_len, tiles_a, tiles_b;
  uint32_t src_a, dst_b, src_off, dst_off;
  uint32_t batch_rank, pad[3];
  U32x8 batch_shape, batch_src, batch_dst;
};
static_assert(sizeof(TransposeParams) == 144);

constexpr int64_t kTile = 32;

}  // namespace

namespace detail {
int transpose_force = kTransposeChoice;
}  // namespace detail

namespace {

// The tiled transpose (shape/transpose.wgsl) where dst's innermost dim `a` is strided in src and some other dim `b`
// is contiguous in src; false (nothing issued) where the copy has no such pair of dims or they are too short for
// tiles to pay (under 8 words, a tile would be mostly idle and the plain copy reads few sectors anyway).
bool copy_tiled(const char* op, const Tensor& dst, const Tensor& src, const Coalesced& c) {
  DeviceImpl& dev = dst.device_impl();
  const int rank = static_cast<int>(c.shape.size());
  if (rank < 2 || !dev.backend->has_kernel("shape/transpose")) return false;
  const int a = rank - 1;
  const Shape& ss = c.strides[0];
  const Shape& ds = c.strides[1];
  if (ds[a] != 1 || ss[a] < 2) return false;  // a broadcast source (stride 0) reads one word: no transpose
  int b = -1;
  for (int d = 0; d < a; ++d)
    if (ss[d] == 1) b = d;
  if (b < 0 || c.shape[a] < 8 || c.shape[b] < 8) return false;
  TransposeParams p{};
  p.a_len = u32(c.shape[a], "transpose extent");
  p.b_len = u32(c.shape[b], "transpose extent");
  // transpose_vec4.wgsl (16-byte words, 64 x 65 words of workgroup memory) where everything it indexes is a
  // multiple of 4 words; else tiles of 32 AH along a (shape/transpose.wgsl): 1, or what transpose_force asks where
  // the device's workgroup memory holds it. On the H200 (run n) the 32 x 32 tile moved 2.25 TB/s at 1024 x 65536,
  // the 64 x 32 one 1.77 and 128 x 32 0.89: the wider tiles stay forceable, not chosen.
  auto fits = [&](int64_t h) { return h * kTile * (kTile + 1) * 4 <= dev.limits.max_workgroup_storage; };
  int64_t ah = 1;
  bool vec4 = false;
  if (transpose_force == kTransposeVec4 || transpose_force == kTransposeChoice) {
    vec4 = dev.backend->has_kernel("shape/transpose_vec4") && 64 * 65 * 4 <= dev.limits.max_workgroup_storage &&
           c.shape[a] % 4 == 0 && c.shape[b] % 4 == 0 && ss[a] % 4 == 0 && ds[b] % 4 == 0 &&
           src.offset() % 4 == 0 && dst.offset() % 4 == 0;
    for (int d = 0; d < a; ++d)
      if (d != b) vec4 = vec4 && ss[d] % 4 == 0 && ds[d] % 4 == 0;
  } else {
    ah = transpose_force;
    if (ah != 1 && ah != 2 && ah != 4) throw Error("copy: no transpose tile of " + std::to_string(ah) + " x 32 words");
    if (!fits(ah))
      throw UnsupportedError("copy: a transpose tile of " + std::to_string(ah * kTile) +
                             " x 32 words needs more workgroup memory than the device grants");
  }
  const int64_t tile_a = vec4 ? 64 : kTile * ah, tile_b = vec4 ? 64 : kTile;
  p.tiles_a = u32((c.shape[a] + tile_a - 1) / tile_a, "tiles");
  p.tiles_b = u32((c.shape[b] + tile_b - 1) / tile_b, "tiles");
  p.src_a = u32(ss[a], "stride");
  p.dst_b = u32(ds[b], "stride");
  p.src_off = u32(src.offset(), "offset");
  p.dst_off = u32(dst.offset(), "offset");
  Shape bshape, bsrc, bdst;
  int64_t batch = 1;
  for (int d = 0; d < a; ++d)
    if (d != b) {
      bshape.push_back(c.shape[d]);
      bsrc.push_back(ss[d]);
      bdst.push_back(ds[d]);
      batch *= c.shape[d];
    }
  p.batch_rank = static_cast<uint32_t>(bshape.size());
  fill_u32x8(p.batch_shape, bshape, op);
  fill_u32x8(p.batch_src, bsrc, op);
  fill_u32x8(p.batch_dst, bdst, op);
  const auto& pipe = vec4 ? dev.pipeline("shape/transpose_vec4", {})
                          : dev.pipeline("shape/transpose", {{"AH", std::to_string(ah)}});
  const auto [gx, gy] = dev.grid(static_cast<uint64_t>(p.tiles_a) * p.tiles_b * static_cast<uint64_t>(batch));
  dev.dispatch({op, &pipe, &p, sizeof p, {{src.storage()->buffer}, {dst.storage()->buffer}}, gx, gy, 1});
  return true;
}

}  // namespace

namespace detail {

void copy_view(const char* op, const Tensor& dst, const Tensor& src) {
  DeviceImpl& dev = dst.device_impl();
  const Coalesced c = coalesce(dst.shape(), {src.strides(), dst.strides()});
  if (copy_tiled(op, dst, src, c)) return;
  StridedParams p = strided_params(dst.shape(), {&src, &dst}, op);
  // Rows contiguous in both views, every row start and length a multiple of 4 words: the same copy over vec4s,
  // 16 bytes a load and a quarter of the index arithmetic (the head-layout permutes of attention are this case).
  const size_t inner = c.shape.size() - 1;
  bool vec4 = c.strides[0][inner] == 1 && c.strides[1][inner] == 1 && c.shape[inner] % 4 == 0 &&
              src.offset() % 4 == 0 && dst.offset() % 4 == 0;
  for (size_t d = 0; d < inner; ++d) vec4 = vec4 && c.strides[0][d] % 4 == 0 && c.strides[1][d] % 4 == 0;
  if (vec4) {
    Shape shape = c.shape, s0 = c.strides[0], s1 = c.strides[1];
    shape[inner] /= 4;
    for (size_t d = 0; d < inner; ++d) s0[d] /= 4, s1[d] /= 4;
    p.n /= 4;
    p.off[0] /= 4;
    p.off[1] /= 4;
    p.shape = {};
    p.strides0 = {};
    p.strides1 = {};
    fill_u32x8(p.shape, shape, op);
    fill_u32x8(p.strides0, s0, op);
    fill_u32x8(p.strides1, s1, op);
    p.rank = static_cast<uint32_t>(shape.size());
  }
  const auto& pipe = dev.pipeline("shape/copy_into", {{"T", vec4 ? "vec4<u32>" : "u32"}});
  const auto [gx, gy] = dev.grid((static_cast<uint64_t>(p.n) + 255) / 256);
  dev.dispatch({op, &pipe, &p, sizeof p, {{src.storage()->buffer}, {dst.storage()->buffer}}, gx, gy, 1});
}

}  // namespace detail

Tensor contiguous(const Tensor& x) {
  check_defined("contiguous", x, "self");
  if (x.is_contiguous()) return x;
  Tensor out = new_tensor(x.device_impl(), x.shape(), x.dtype());
  if (out.numel() > 0) copy_view("contiguous", out, x);
  return out;
}

Tensor expand_copy(const Tensor& x, const Shape& shape) {
  check_defined("expand_copy", x, "self");
  return run_map("expand_copy", {"x0", x.dtype(), true}, {x.expand(shape)}, shape);
}

Tensor full(Device& device, const Shape& shape, double value, DType dtype) {
  Tensor t = Tensor::empty(device, shape, dtype);
  fill_contiguous(t, value);
  return t;
}

Tensor fill(const Tensor& like, double value) {
  check_defined("fill", like, "self");
  Tensor t = new_tensor(like.device_impl(), like.shape(), like.dtype());
  fill_contiguous(t, value);
  return t;
}

void fill_(const Tensor& t, double value) {
  check_defined("fill_", t, "self");
  if (!t.is_contiguous())
    throw ArgumentError("fill_: the tensor " + shape_str(t.shape()) + " is not contiguous (fill a copy, then copy_)");
  fill_contiguous(t, value);
}

Tensor cat(const std::vector<Tensor>& tensors, int dim) {
  if (tensors.empty()) throw ArgumentError("cat: no tensors given");
  const Tensor& first = tensors[0];
  check_defined("cat", first, "tensors[0]");
  const int d = normalize_dim(dim, first.rank());
  Shape shape = first.shape();
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    check_defined("cat", t, "tensors[i]");
    check_same_device("cat", first, t);
    if (t.rank() != first.rank() || t.dtype() != first.dtype())
      throw ArgumentError("cat: tensor " + std::to_string(i) + " is " + dtype_name(t.dtype()) + " " +
                          shape_str(t.shape()) + ", tensor 0 is " + dtype_name(first.dtype()) + " " +
                          shape_str(first.shape()));
    for (int k = 0; k < first.rank(); ++k)
      if (k != d && t.size(k) != first.size(k))
        throw ArgumentError("cat: tensor " + std::to_string(i) + " has shape " + shape_str(t.shape()) +
                            ", which differs from " + shape_str(first.shape()) + " outside dim " + std::to_string(d));
    total += first.rank() ? t.size(d) : 1;
  }
  if (first.rank() == 0) throw ArgumentError("cat: zero-dimensional tensors cannot be concatenated");
  shape[d] = total;
  Tensor out = new_tensor(first.device_impl(), shape, first.dtype());
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    copy_into("cat", out.slice(d, at, at + t.size(d)), t);
    at += t.size(d);
  }
  return out;
}

void copy_(const Tensor& dst, const Tensor& src) {
  check_defined("copy_", dst, "self");
  check_defined("copy_", src, "src");
  // Contiguous into contiguous between two buffers: a buffer copy, no kernel (and the one form of copy_ the native
  // Vulkan backend has, whose strided-copy kernel would need more push-constant bytes than Vulkan guarantees).
  if (dst.is_contiguous() && src.is_contiguous() && src.shape() == dst.shape() && src.dtype() == dst.dtype() &&
      src.storage() != dst.storage() && src.device_impl().recording() == dst.device_impl().recording() &&
      &src.device_impl() == &dst.device_impl()) {
    dst.device_impl().copy(src.storage()->buffer, static_cast<uint64_t>(src.offset()) * 4, dst.storage()->buffer,
                           static_cast<uint64_t>(dst.offset()) * 4, static_cast<uint64_t>(dst.numel()) * 4);
    return;
  }
  copy_into("copy_", dst, src.expand(dst.shape()));
}

namespace detail {

namespace {
Shape to_shape(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }

OpSchema view_schema(const std::string& name, const std::string& summary, std::vector<ArgSpec> args) {
  OpSchema s;
  s.name = name;
  s.family = "shape";
  s.summary = summary;
  s.inputs = {"self"};
  s.args = std::move(args);
  s.outputs = {"out"};
  s.dtypes = {DType::F32, DType::I32, DType::Bool};
  return s;
}
}  // namespace

void register_shape_ops(Registry& r) {
  OpSchema c = view_schema("contiguous", "a row-major copy of any strided view (dim-order copy)", {});
  c.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", contiguous(input(in, "self"))}};
  };
  r.add(std::move(c));

  OpSchema p = view_schema("permute", "dims reordered (a view; copied to contiguous on output)",
                           {{"dims", "int[]", "", "the new order of the dims (required)"}});
  p.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    if (!args.has("dims")) throw ArgumentError("permute: missing argument dims=<d0,d1,...>");
    return OpTensors{{"out", contiguous(input(in, "self").permute(to_int_dims(args.get_int_list("dims", {}))))}};
  };
  r.add(std::move(p));

  OpSchema t = view_schema("transpose", "two dims swapped (a view)",
                           {{"dim0", "int", "0", ""}, {"dim1", "int", "1", ""}});
  t.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    return OpTensors{{"out", contiguous(input(in, "self").transpose(static_cast<int>(args.get_int("dim0", 0)),
                                                                    static_cast<int>(args.get_int("dim1", 1))))}};
  };
  r.add(std::move(t));

  OpSchema rs = view_schema("reshape", "the same elements in another shape (a view of a contiguous tensor)",
                            {{"shape", "int[]", "", "the new shape; one dim may be -1 (required)"}});
  rs.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    if (!args.has("shape")) throw ArgumentError("reshape: missing argument shape=<d0,d1,...>");
    return OpTensors{{"out", contiguous(input(in, "self")).reshape(to_shape(args.get_int_list("shape", {})))}};
  };
  r.add(std::move(rs));

  OpSchema sl = view_schema("slice", "elements start, start+step, ... < end along dim (a view)",
                            {{"dim", "int", "0", ""}, {"start", "int", "0", ""},
                             {"end", "int", "", "default: the dim's size"}, {"step", "int", "1", "> 0"}});
  sl.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    const Tensor& x = input(in, "self");
    const int dim = static_cast<int>(args.get_int("dim", 0));
    const int64_t end = args.get_int("end", x.rank() ? x.size(dim) : 1);
    return OpTensors{{"out", contiguous(x.slice(dim, args.get_int("start", 0), end, args.get_int("step", 1)))}};
  };
  r.add(std::move(sl));

  OpSchema ec = view_schema("expand_copy", "a broadcast to `size`, materialised",
                            {{"size", "int[]", "", "the shape to broadcast to (required)"}});
  ec.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    if (!args.has("size")) throw ArgumentError("expand_copy: missing argument size=<d0,d1,...>");
    return OpTensors{{"out", expand_copy(input(in, "self"), to_shape(args.get_int_list("size", {})))}};
  };
  r.add(std::move(ec));

  OpSchema f = view_schema("fill", "a tensor like self with every element `value`",
                           {{"value", "float", "", "the value (required)"}});
  f.backends = {"webgpu", "native-vulkan"};
  f.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    if (!args.has("value")) throw ArgumentError("fill: missing argument value=<number>");
    return OpTensors{{"out", fill(input(in, "self"), args.get_float("value", 0))}};
  };
  r.add(std::move(f));

  OpSchema ct;
  ct.name = "cat";
  ct.family = "shape";
  ct.summary = "tensors t0, t1, ... joined along dim";
  ct.inputs = {"t0", "t1", "t2?", "t3?", "t4?", "t5?", "t6?", "t7?"};
  ct.args = {{"dim", "int", "0", ""}};
  ct.outputs = {"out"};
  ct.dtypes = {DType::F32, DType::I32, DType::Bool};
  ct.constraints = {"equal dtypes", "equal sizes outside dim"};
  ct.run = [](Device&, const OpTensors& in, const OpArgs& args) {
    std::vector<Tensor> ts;
    for (int i = 0; i < 8; ++i)
      if (auto it = in.find("t" + std::to_string(i)); it != in.end()) ts.push_back(it->second);
    return OpTensors{{"out", cat(ts, static_cast<int>(args.get_int("dim", 0)))}};
  };
  r.add(std::move(ct));
}

}  // namespace detail
}  // namespace wgtrain::ops
