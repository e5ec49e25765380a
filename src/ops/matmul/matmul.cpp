// mm, bmm and linear: one tiled kernel over strided operands (gemm.wgsl).
#include <algorithm>
#include <map>
#include <tuple>
#include <string>

#include "ops/matmul/gemm.h"
#include "ops/matmul/split_k.h"
#include "wgtrain/device.h"
#include "wgtrain/ops.h"

namespace wgtrain::ops {

using namespace detail;

namespace {

struct alignas(16) GemmParams {
  uint32_t m, n, k, batch0;
  uint32_t a_off, a_sb, a_sm, a_sk;
  uint32_t b_off, b_sb, b_sk, b_sn;
  uint32_t bias_off, flags, q_words, q_rows;
  uint32_t group_size, c_off, k_chunk, pad1;
};
static_assert(sizeof(GemmParams) == 80);

// a: [batch, M, K] view, b: [batch, K, N] view (batch strides may be 0), bias: [N] or null. Returns [batch, M, N].
Tensor matmul_core(const char* op, const Tensor& a, const Tensor& b, const Tensor* bias) {
  Tensor c = new_tensor(a.device_impl(), {a.size(0), a.size(1), b.size(2)}, DType::F32);
  GemmB gb;
  gb.b = &b;
  gemm(op, a, gb, b.size(2), bias, c, false);
  return c;
}

// The unrolled parts of gemm.wgsl for TM x TM outputs per thread, as TM rows of TM / 4 vec4 accumulators.
// Row i of a thread is (i / 4) * 64 + 4 lid.y + i % 4 in its tile; columns of group g are g * 64 + 4 lid.x + 0..3.
struct GemmCode {
  std::string acc_decl, inner, store;
};

const GemmCode& gemm_code(int tm) {
  static std::map<int, GemmCode> cache;
  auto it = cache.find(tm);
  if (it != cache.end()) return it->second;
  GemmCode g;
  const int groups = tm / 4;
  for (int i = 0; i < tm; ++i)
    for (int q = 0; q < groups; ++q) g.acc_decl += "  var c" + std::to_string(i) + "_" + std::to_string(q) + " = vec4<f32>();\n";
  for (int q = 0; q < groups; ++q) {
    g.inner += "      let a" + std::to_string(q) + " = As[kk * (BM / 4u) + " + std::to_string(q * 16) + "u + lid.y];\n";
    g.inner += "      let b" + std::to_string(q) + " = Bs[kk * (BN / 4u) + " + std::to_string(q * 16) + "u + lid.x];\n";
  }
  for (int i = 0; i < tm; ++i)
    for (int q = 0; q < groups; ++q) {
      const std::string c = "c" + std::to_string(i) + "_" + std::to_string(q);
      g.inner += "      " + c + " = fma(vec4<f32>(a" + std::to_string(i / 4) + "[" + std::to_string(i % 4) + "]), b" +
                 std::to_string(q) + ", " + c + ");\n";
    }
  for (int i = 0; i < tm; ++i)
    for (int q = 0; q < groups; ++q)
      for (int j = 0; j < 4; ++j)
        g.store += "  store_c(out_bat, m0 + " + std::to_string((i / 4) * 64 + i % 4) + "u + 4u * lid.y, n0 + " +
                   std::to_string(q * 64 + j) + "u + 4u * lid.x, c" + std::to_string(i) + "_" + std::to_string(q) +
                   "[" + std::to_string(j) + "]);\n";
  return cache.emplace(tm, std::move(g)).first->second;
}

// The tile traffic of gemm.wgsl, unrolled: each thread's share of the next A and B tiles is loaded from global
// memory into registers (TILE_LOAD, at k0n) and later written to workgroup memory (TILE_STORE). Thread `tid` takes
// elements tid, tid + 256, ... of each tile, in an order that makes neighbouring threads read neighbouring
// addresses; the q4 modes load one u32 word (8 codes) and its scale per element.
struct TileCode {
  std::string decl, load, store;
};

const TileCode& gemm_tile_code(int tm, bool a_vec, uint32_t b_mode, bool b_vec) {
  static std::map<std::tuple<int, bool, uint32_t, bool>, TileCode> cache;
  const auto key = std::make_tuple(tm, a_vec, b_mode, b_vec);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const int bm = 16 * tm, bn = 16 * tm, bk = 16;
  TileCode t;
  auto e_of = [](int l) { return "    let e = tid + " + std::to_string(l) + "u * 256u;\n"; };
  // A: BM x BK
  if (a_vec) {
    for (int l = 0; l < bm * bk / 256 / 4; ++l) {
      const std::string r = "ra" + std::to_string(l);
      t.decl += "  var " + r + " = vec4<f32>();\n";
      t.load += "  {\n" + e_of(l) +
                "    let gm = m0 + e / (BK / 4u);\n"
                "    let gk = k0n + (e % (BK / 4u)) * 4u;\n"
                "    " + r + " = vec4<f32>();\n"
                "    if (gm < p.m && gk < p.k) { " + r + " = load_a4((a_base + gm * p.a_sm + gk) / 4u); }\n  }\n";
      t.store += "  {\n" + e_of(l) +
                 "    let am = e / (BK / 4u);\n"
                 "    let ak = (e % (BK / 4u)) * 4u;\n"
                 "    store_a(ak, am, " + r + ".x);\n    store_a(ak + 1u, am, " + r + ".y);\n"
                 "    store_a(ak + 2u, am, " + r + ".z);\n    store_a(ak + 3u, am, " + r + ".w);\n  }\n";
    }
  } else {
    for (int l = 0; l < bm * bk / 256; ++l) {
      const std::string r = "ra" + std::to_string(l);
      t.decl += "  var " + r + " = 0.0;\n";
      const std::string pos = e_of(l) +
                              "    let am = select(e % BM, e / BK, a_kfast);\n"
                              "    let ak = select(e / BM, e % BK, a_kfast);\n";
      t.load += "  {\n" + pos + "    let gm = m0 + am;\n    let gk = k0n + ak;\n    " + r + " = 0.0;\n" +
                "    if (gm < p.m && gk < p.k) { " + r + " = load_a1(a_base + gm * p.a_sm + gk * p.a_sk); }\n  }\n";
      t.store += "  {\n" + pos + "    store_a(ak, am, " + r + ");\n  }\n";
    }
  }
  // B: BK x BN
  if (b_mode == 0 && b_vec) {
    for (int l = 0; l < bn * bk / 256 / 4; ++l) {
      const std::string r = "rb" + std::to_string(l);
      t.decl += "  var " + r + " = vec4<f32>();\n";
      const std::string pos = e_of(l) + "    let bk = e / (BN / 4u);\n    let bn = (e % (BN / 4u)) * 4u;\n";
      t.load += "  {\n" + pos + "    let gn = n0 + bn;\n    let gk = k0n + bk;\n    " + r + " = vec4<f32>();\n" +
                "    if (gn < p.n && gk < p.k) { " + r + " = load_b4((b_base + gk * p.b_sk + gn) / 4u); }\n  }\n";
      t.store += "  {\n" + pos + "    Bs[bk * (BN / 4u) + bn / 4u] = " + r + ";\n  }\n";
    }
  } else if (b_mode == 0) {
    for (int l = 0; l < bn * bk / 256; ++l) {
      const std::string r = "rb" + std::to_string(l);
      t.decl += "  var " + r + " = 0.0;\n";
      const std::string pos = e_of(l) +
                              "    let bn = select(e / BK, e % BN, b_nfast);\n"
                              "    let bk = select(e % BK, e / BN, b_nfast);\n";
      t.load += "  {\n" + pos + "    let gn = n0 + bn;\n    let gk = k0n + bk;\n    " + r + " = 0.0;\n" +
                "    if (gn < p.n && gk < p.k) { " + r + " = load_b1(b_base + gk * p.b_sk + gn * p.b_sn); }\n  }\n";
      t.store += "  {\n" + pos + "    store_b(bk, bn, " + r + ");\n  }\n";
    }
  } else {
    // q4: mode 1 reads B[k][n] = W[n][k] (BN weight rows, BK / 8 words each); mode 2 reads B[r][j] = W[r][j]
    // (BK weight rows, BN / 8 words each). Items past the tile (small tiles) are skipped.
    const int items = b_mode == 1 ? bn * (bk / 8) : bk * (bn / 8);
    for (int l = 0; l * 256 < items; ++l) {
      const std::string w = "rw" + std::to_string(l), sc = "rs" + std::to_string(l);
      t.decl += "  var " + w + " = 0x88888888u;\n  var " + sc + " = 0.0;\n";
      const std::string guard = "    if (e < " + std::to_string(items) + "u) {\n";
      if (b_mode == 1) {
        const std::string pos = "      let bn = e / (BK / 8u);\n      let wq = e % (BK / 8u);\n";
        t.load += "  {\n" + e_of(l) + guard + pos +
                  "      let gn = n0 + bn;\n      let gk = k0n + wq * 8u;\n"
                  "      " + w + " = 0x88888888u;\n      " + sc + " = 0.0;\n"
                  "      if (gn < p.n && gk < p.k) {\n"
                  "        " + w + " = load_bw(gn * p.q_words + gk / 8u);\n"
                  "        " + sc + " = scales[(gk / p.group_size) * p.q_rows + gn];\n      }\n    }\n  }\n";
        t.store += "  {\n" + e_of(l) + guard + pos +
                   "      for (var j = 0u; j < 8u; j = j + 1u) { store_b(wq * 8u + j, bn, dequant(" + w + ", j, " +
                   sc + ")); }\n    }\n  }\n";
      } else {
        const std::string pos = "      let bk = e / (BN / 8u);\n      let wq = e % (BN / 8u);\n";
        t.load += "  {\n" + e_of(l) + guard + pos +
                  "      let gr = k0n + bk;\n      let gj = n0 + wq * 8u;\n"
                  "      " + w + " = 0x88888888u;\n      " + sc + " = 0.0;\n"
                  "      if (gr < p.k && gj < p.n) {\n"
                  "        " + w + " = load_bw(gr * p.q_words + gj / 8u);\n"
                  "        " + sc + " = scales[(gj / p.group_size) * p.q_rows + gr];\n      }\n    }\n  }\n";
        t.store += "  {\n" + e_of(l) + guard + pos +
                   "      for (var j = 0u; j < 8u; j = j + 1u) { store_b(bk, wq * 8u + j, dequant(" + w + ", j, " +
                   sc + ")); }\n    }\n  }\n";
      }
    }
  }
  return cache.emplace(key, std::move(t)).first->second;
}

}  // namespace

namespace detail {

void gemm(const char* op, const Tensor& a, const GemmB& gb, int64_t N, const Tensor* bias, const Tensor& c,
          bool accumulate) {
  DeviceImpl& dev = a.device_impl();
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2);
  if (batch == 0 || M == 0 || N == 0) return;
  if (!c.is_contiguous() || c.numel() != batch * M * N) throw Error(std::string(op) + ": bad output tensor");
  GemmParams p{};
  p.m = u32(M, "M");
  p.n = u32(N, "N");
  p.k = u32(K, "K");
  p.a_off = u32(a.offset(), "offset");
  p.a_sb = u32(a.strides()[0], "stride");
  p.a_sm = u32(a.strides()[1], "stride");
  p.a_sk = u32(a.strides()[2], "stride");
  p.flags = (bias ? 1u : 0u) | (accumulate ? 2u : 0u) | ((K == 1 || a.strides()[2] == 1) ? 4u : 0u);
  const Tensor& b = *gb.b;
  if (gb.mode == GemmB::F32) {
    p.b_off = u32(b.offset(), "offset");
    p.b_sb = u32(b.strides()[0], "stride");
    p.b_sk = u32(b.strides()[1], "stride");
    p.b_sn = u32(b.strides()[2], "stride");
    if (N == 1 || b.strides()[2] == 1) p.flags |= 8u;
  } else {
    p.q_words = u32(gb.q_words, "words per row");
    p.q_rows = u32(gb.q_rows, "weight rows");
    p.group_size = u32(gb.group_size, "group size");
  }
  p.bias_off = bias ? u32(bias->offset(), "offset") : 0;
  p.c_off = u32(c.offset(), "offset");
  u32(batch * M * N, "output elements");

  // Large outputs take 128 x 128 tiles (8 x 8 per thread); small ones 64 x 64, so fewer lanes idle.
  const int tm = (M >= 128 && N >= 128) ? 8 : 4;
  // The native backend's cooperative-matrix GEMM (fp16 products into fp32, 64 x 64 tiles, k staged 32 deep) where
  // the device was opened with it (DeviceOptions::cooperative_matrix).
  const bool coopmat = dev.features.cooperative_matrix;
  const int64_t tile = coopmat ? 64 : 16 * tm;
  const GemmCode& code = gemm_code(tm);
  // 16-byte loads where an operand is row-major with every row and offset a multiple of 4 floats.
  const bool a_vec = K % 4 == 0 && a.strides()[2] == 1 && a.offset() % 4 == 0 && a.strides()[1] % 4 == 0 &&
                     a.strides()[0] % 4 == 0;
  const bool b_vec = gb.mode == GemmB::F32 && N % 4 == 0 && b.strides()[2] == 1 && b.offset() % 4 == 0 &&
                     b.strides()[1] % 4 == 0 && b.strides()[0] % 4 == 0;
  const char* b_type = gb.mode != GemmB::F32 ? "u32" : (b_vec ? "vec4<f32>" : "f32");
  const TileCode& tile_code = gemm_tile_code(tm, a_vec, static_cast<uint32_t>(gb.mode), b_vec);
  std::string acc = a_vec ? "fn load_a1(i: u32) -> f32 { return a[i / 4u][i % 4u]; }\n"
                            "fn load_a4(i: u32) -> vec4<f32> { return a[i]; }\n"
                          : "fn load_a1(i: u32) -> f32 { return a[i]; }\n"
                            "fn load_a4(i: u32) -> vec4<f32> {\n"
                            "  return vec4<f32>(a[4u * i], a[4u * i + 1u], a[4u * i + 2u], a[4u * i + 3u]);\n}\n";
  if (b_vec)
    acc += "fn load_b1(i: u32) -> f32 { return b[i / 4u][i % 4u]; }\n"
           "fn load_b4(i: u32) -> vec4<f32> { return b[i]; }\n"
           "fn load_bw(i: u32) -> u32 { return 0u; }\n";
  else
    acc += std::string("fn load_b1(i: u32) -> f32 { return f32(b[i]); }\n") +
           "fn load_b4(i: u32) -> vec4<f32> {\n"
           "  return vec4<f32>(f32(b[4u * i]), f32(b[4u * i + 1u]), f32(b[4u * i + 2u]), f32(b[4u * i + 3u]));\n}\n"
           "fn load_bw(i: u32) -> u32 { return u32(b[i]); }\n";
  const auto& pipe = coopmat ? dev.pipeline("matmul/gemm_coopmat", {{"B_MODE", std::to_string(static_cast<uint32_t>(gb.mode))}})
                              : dev.pipeline("matmul/gemm", {{"TM", std::to_string(tm)},
                                                  {"B_MODE", std::to_string(static_cast<uint32_t>(gb.mode))},
                                                  {"B_TYPE", b_type},
                                                  {"A_TYPE", a_vec ? "vec4<f32>" : "f32"},
                                                  {"A_VEC", a_vec ? "true" : "false"},
                                                  {"B_VEC", b_vec ? "true" : "false"},
                                                  {"ACCESSORS", acc},
                                                  {"ACC_DECL", code.acc_decl},
                                                  {"INNER", code.inner},
                                                  {"STORE", code.store},
                                                  {"TILE_DECL", tile_code.decl},
                                                  {"TILE_LOAD", tile_code.load},
                                                  {"TILE_STORE", tile_code.store}});
  const uint32_t gx = u32((N + tile - 1) / tile, "N tiles"), gy = u32((M + tile - 1) / tile, "M tiles");
  const int64_t maxz = dev.limits.max_workgroups_per_dim;
  // Unused bindings still need a buffer; any read-only one will do.
  const wgtrain::detail::BufferHandle scales = gb.scales ? gb.scales->storage()->buffer : a.storage()->buffer;
  const wgtrain::detail::BufferHandle bias_buf = bias ? bias->storage()->buffer : a.storage()->buffer;

  // Split-K (split_k.h): only for single, bias-free products, whose partial tiles split_sum.wgsl adds (to what c
  // held, when accumulating).
  const auto [splits, chunk] = batch == 1 && !bias
                                   ? plan_split_k(static_cast<int64_t>(gx) * gy, K, dev.split_k, dev.info.software, coopmat ? 32 : 16)
                                   : SplitK{1, K};
  if (splits > 1) {
    const Tensor part = new_tensor(dev, {splits, M, N}, DType::F32);
    p.k_chunk = u32(chunk, "k chunk");
    p.flags &= ~2u;
    p.c_off = 0;
    p.batch0 = 0;
    dev.dispatch({op, &pipe, &p, sizeof p,
                  {{a.storage()->buffer}, {b.storage()->buffer}, {scales}, {bias_buf}, {part.storage()->buffer}},
                  gx, gy, u32(splits, "splits")});
    struct alignas(16) SplitParams {
      uint32_t n, splits, c_off, pad;
    } sp{u32(M * N, "outputs"), u32(splits, "splits"), u32(c.offset(), "offset"), 0};
    const auto& sum_pipe = dev.pipeline("matmul/split_sum", {{"ACCUMULATE", accumulate ? "true" : "false"}});
    const auto [sx, sy] = dev.grid((static_cast<uint64_t>(M * N) + 255) / 256);
    dev.dispatch({op, &sum_pipe, &sp, sizeof sp, {{part.storage()->buffer}, {c.storage()->buffer}}, sx, sy, 1});
    return;
  }
  for (int64_t b0 = 0; b0 < batch; b0 += maxz) {
    p.batch0 = static_cast<uint32_t>(b0);
    const uint32_t gz = static_cast<uint32_t>(std::min(maxz, batch - b0));
    dev.dispatch({op, &pipe, &p, sizeof p,
                  {{a.storage()->buffer}, {b.storage()->buffer}, {scales}, {bias_buf}, {c.storage()->buffer}},
                  gx, gy, gz});
  }
}

}  // namespace detail

namespace {
}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  check_dtype("mm", a, "self", {DType::F32});
  check_dtype("mm", b, "mat2", {DType::F32});
  check_rank("mm", a, "self", 2);
  check_rank("mm", b, "mat2", 2);
  check_same_device("mm", a, b);
  if (a.size(1) != b.size(0))
    throw ArgumentError("mm: self " + shape_str(a.shape()) + " and mat2 " + shape_str(b.shape()) +
                        " cannot be multiplied (" + std::to_string(a.size(1)) + " != " + std::to_string(b.size(0)) +
                        ")");
  Tensor c = matmul_core("mm", a.unsqueeze(0), b.unsqueeze(0), nullptr);
  return c.reshape({a.size(0), b.size(1)});
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_dtype("bmm", a, "self", {DType::F32});
  check_dtype("bmm", b, "mat2", {DType::F32});
  check_rank("bmm", a, "self", 3);
  check_rank("bmm", b, "mat2", 3);
  check_same_device("bmm", a, b);
  if (a.size(0) != b.size(0) || a.size(2) != b.size(1))
    throw ArgumentError("bmm: self " + shape_str(a.shape()) + " and mat2 " + shape_str(b.shape()) +
                        " need equal batch sizes and self.size(2) == mat2.size(1)");
  return matmul_core("bmm", a, b, nullptr);
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_dtype("linear", x, "input", {DType::F32});
  check_dtype("linear", weight, "weight", {DType::F32});
  check_rank("linear", weight, "weight", 2);
  check_same_device("linear", x, weight);
  if (x.rank() < 1) throw ArgumentError("linear: input must have at least 1 dim");
  const int64_t K = x.size(-1), N = weight.size(0);
  if (weight.size(1) != K)
    throw ArgumentError("linear: input " + shape_str(x.shape()) + " has " + std::to_string(K) +
                        " features, weight " + shape_str(weight.shape()) + " expects " +
                        std::to_string(weight.size(1)));
  if (bias) {
    check_dtype("linear", *bias, "bias", {DType::F32});
    check_same_device("linear", x, *bias);
    if (bias->rank() != 1 || bias->size(0) != N)
      throw ArgumentError("linear: bias must have shape [" + std::to_string(N) + "], got " +
                          shape_str(bias->shape()));
  }
  Shape out_shape = x.shape();
  out_shape.back() = N;
  const int64_t M = numel(Shape(x.shape().begin(), x.shape().end() - 1));
  // Flatten the leading dims into M; a strided input is gathered first unless it is already 2-D.
  const Tensor x2 = x.rank() == 2 ? x : contiguous(x).reshape({M, K});
  Tensor c = matmul_core("linear", x2.unsqueeze(0), weight.transpose(0, 1).unsqueeze(0), bias ? &*bias : nullptr);
  return c.reshape(out_shape);
}

namespace detail {

void register_matmul_ops(Registry& r) {
  OpSchema mm_s;
  mm_s.name = "mm";
  mm_s.family = "matmul";
  mm_s.summary = "matrix product self[M,K] @ mat2[K,N]";
  mm_s.inputs = {"self", "mat2"};
  mm_s.outputs = {"out"};
  mm_s.dtypes = {DType::F32};
  mm_s.backends = {"webgpu", "native-vulkan"};
  mm_s.min_rank = mm_s.max_rank = 2;
  mm_s.constraints = {"self.size(1) == mat2.size(0)", "M*N < 2^32"};
  mm_s.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", mm(input(in, "self"), input(in, "mat2"))}};
  };
  r.add(std::move(mm_s));

  OpSchema bmm_s;
  bmm_s.name = "bmm";
  bmm_s.family = "matmul";
  bmm_s.summary = "batched matrix product self[B,M,K] @ mat2[B,K,N]";
  bmm_s.inputs = {"self", "mat2"};
  bmm_s.outputs = {"out"};
  bmm_s.dtypes = {DType::F32};
  bmm_s.backends = {"webgpu", "native-vulkan"};
  bmm_s.min_rank = bmm_s.max_rank = 3;
  bmm_s.constraints = {"equal batch sizes", "self.size(2) == mat2.size(1)"};
  bmm_s.run = [](Device&, const OpTensors& in, const OpArgs&) {
    return OpTensors{{"out", bmm(input(in, "self"), input(in, "mat2"))}};
  };
  r.add(std::move(bmm_s));

  OpSchema lin;
  lin.name = "linear";
  lin.family = "matmul";
  lin.summary = "input[...,K] @ weight[N,K]^T + bias[N]";
  lin.inputs = {"input", "weight", "bias?"};
  lin.outputs = {"out"};
  lin.dtypes = {DType::F32};
  lin.backends = {"webgpu", "native-vulkan"};
  lin.min_rank = 1;
  lin.constraints = {"input.size(-1) == weight.size(1)", "bias, if given, has shape [weight.size(0)]"};
  lin.run = [](Device&, const OpTensors& in, const OpArgs&) {
    std::optional<Tensor> bias;
    if (auto it = in.find("bias"); it != in.end()) bias = it->second;
    return OpTensors{{"out", linear(input(in, "input"), input(in, "weight"), bias)}};
  };
  r.add(std::move(lin));
}

}  // namespace detail
}  // namespace wgtrain::ops
