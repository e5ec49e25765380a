// The subgroup-matrix attention kernels (forward_sm.wgsl, backward_dq_sm.wgsl, backward_dkv_sm.wgsl: mixed
// precision) against the float64 reference, two ways:
// - on the matrix units, where the device has them (the H200; skipped, saying why, elsewhere), at hd 16 to 128;
// - everywhere, emulated: the kernels' own texts with each subgroup-matrix builtin written out in plain WGSL (a
//   fragment spread over its subgroup's lanes as on the hardware, products through workgroup memory; f16 taken as
//   f32 and rounded to f16 wherever the kernels convert to it), handed to the runtime through
//   WGTRAIN_KERNEL_OVERRIDES. That checks all of the kernels' indexing, staging, masking, softmax, scaling and
//   barriers on llvmpipe; only the builtins' own behaviour (which gemm_sm's tests check on the H200) is the
//   emulation's. Its tiles are f32, twice the size, so it runs BN = 32 and head dims up to 32 (llvmpipe's 32 KiB of
//   workgroup storage). About 20 s, nearly all of it llvmpipe compiling the six kernels.
// Outputs start poisoned (an unwritten element fails).
// Tolerances: q, k, v and dO enter f16 (relative rounding 2^-11) and P and dS are rounded to f16 before their
// products; sums are f32. An output is a sum of such products, so its error is a small multiple of 2^-11 times the
// sum of its terms' magnitudes, which for these inputs (in [-1, 1], scale 2 / sqrt(hd)) is bounded by the largest
// output of its tensor: |err| <= 1e-2 max|ref| for out, dq, dk, dv (normwise per tensor), |err| <= 1e-2 for lse
// (scores of magnitude up to 2 shift by hd 2^-11 at most). The emulation rounds as the hardware does; only the order
// of the f32 sums differs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <unistd.h>

#include "gpu/device_impl.h"
#include "gpu/kernels.h"
#include "ops/attention/attention_ref.h"
#include "ops/attention/attention_variants.h"
#include "support/test_support.h"
#include "wgtrain/attention.h"
#include "wgtrain/error.h"
#include "wgtrain/precision.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
namespace od = ops::detail;

// A kernel's text with the subgroup-matrix builtins written out (see the top of this file).
std::string emulated(std::string s) {
  s = std::regex_replace(s, std::regex(R"(//[^\n]*)"), "");  // comments speak of subgroups too
  for (const char* e : {"enable f16;\n", "enable chromium_experimental_subgroup_matrix;\n",
                        "enable chromium_disable_uniformity_analysis;\n"}) {
    for (size_t at; (at = s.find(e)) != std::string::npos;) s.erase(at, std::string(e).size());
  }
  s = std::regex_replace(s, std::regex(R"(subgroup_matrix_(left|right)<f16, 16, 16>)"), "SMX");
  s = std::regex_replace(s, std::regex(R"(subgroup_matrix_result<f32, 16, 16>)"), "SMX");
  std::set<std::string> loaded, stored;
  const std::regex load(R"(subgroupMatrixLoad<SMX>\(&(\w+), )"), store(R"(subgroupMatrixStore\(&(\w+), )");
  for (std::sregex_iterator i(s.begin(), s.end(), load), end; i != end; ++i) loaded.insert((*i)[1]);
  for (std::sregex_iterator i(s.begin(), s.end(), store), end; i != end; ++i) stored.insert((*i)[1]);
  s = std::regex_replace(s, load, "smload_$1(");
  s = std::regex_replace(s, store, "smstore_$1(");
  s = std::regex_replace(s, std::regex(R"(subgroupMatrixMultiplyAccumulate\()"), "smmma(");
  s = std::regex_replace(s, std::regex(R"(vec4<f16>\()"), "rf16v(");
  s = std::regex_replace(s, std::regex(R"(\bf16\()"), "rf16(");
  s = std::regex_replace(s, std::regex(R"(\bf16\b)"), "f32");
  if (s.find("subgroup") != std::string::npos) throw Error("the emulation left a subgroup builtin in place");
  if (loaded.empty() && stored.empty()) return s;  // an include without fragments
  const size_t entry = s.find(") {\n", s.find("fn main("));
  if (entry == std::string::npos) throw Error("the emulation found no entry point");
  s.insert(entry + 4, "  sm_li = li;\n");
  s += R"(
// The emulation's builtins. A fragment is spread over its subgroup's 32 lanes as on the hardware: lane l holds row
// l / 2, columns 8 (l % 2) to 8 (l % 2) + 7. A product passes its operands, 8 rows at a time, through the
// subgroup's 128 floats of workgroup memory (the kernels call it in uniform control flow, so it may hold barriers). f16 is f32 rounded to
// f16 wherever the kernels convert to it. (A whole fragment in every lane, with its dynamically indexed arrays,
// took llvmpipe minutes to compile.)
struct SMX { v: array<f32, 8> }
var<private> sm_li: u32;
var<workgroup> sm_x: array<f32, 512>;
fn rf16(x: f32) -> f32 { return unpack2x16float(pack2x16float(vec2<f32>(x, 0.0))).x; }
fn rf16v(x: vec4<f32>) -> vec4<f32> { return vec4<f32>(rf16(x.x), rf16(x.y), rf16(x.z), rf16(x.w)); }
// The index of the lane's element e in a fragment at `off` of an array, row-major or column-major.
fn sm_at(off: u32, cm: bool, stride: u32, e: u32) -> u32 {
  let i = (sm_li % 32u) / 2u;
  let j = 8u * (sm_li % 2u) + e;
  return select(off + i * stride + j, off + j * stride + i, cm);
}
fn smmma(a: SMX, b: SMX, c: SMX) -> SMX {
  let x = 128u * (sm_li / 32u);
  let i = (sm_li % 32u) / 2u;
  let j0 = 8u * (sm_li % 2u);
  var row: array<f32, 16>;
  var r = c;
  for (var h = 0u; h < 2u; h = h + 1u) {  // rows 8 h to 8 h + 7 of a, then of b
    workgroupBarrier();
    if (i / 8u == h) {
      for (var e = 0u; e < 8u; e = e + 1u) { sm_x[x + (i % 8u) * 16u + j0 + e] = a.v[e]; }
    }
    workgroupBarrier();
    if (i / 8u == h) {
      for (var k = 0u; k < 16u; k = k + 1u) { row[k] = sm_x[x + (i % 8u) * 16u + k]; }
    }
  }
  for (var h = 0u; h < 2u; h = h + 1u) {
    workgroupBarrier();
    if (i / 8u == h) {
      for (var e = 0u; e < 8u; e = e + 1u) { sm_x[x + (i % 8u) * 16u + j0 + e] = b.v[e]; }
    }
    workgroupBarrier();
    for (var e = 0u; e < 8u; e = e + 1u) {
      var acc = r.v[e];
      for (var k = 0u; k < 8u; k = k + 1u) { acc = fma(row[8u * h + k], sm_x[x + k * 16u + j0 + e], acc); }
      r.v[e] = acc;
    }
  }
  return r;
}
)";
  for (const std::string& a : loaded)
    s += "fn smload_" + a + "(off: u32, cm: bool, stride: u32) -> SMX {\n  var r: SMX;\n"
         "  for (var e = 0u; e < 8u; e = e + 1u) { r.v[e] = " + a + "[sm_at(off, cm, stride, e)]; }\n"
         "  return r;\n}\n";
  for (const std::string& a : stored)
    s += "fn smstore_" + a + "(off: u32, x: SMX, cm: bool, stride: u32) {\n"
         "  for (var e = 0u; e < 8u; e = e + 1u) { " + a + "[sm_at(off, cm, stride, e)] = x.v[e]; }\n}\n";
  return s;
}

// For its scope: the subgroup-matrix kernels forced, emulated on the test device (their texts in an override
// directory).
class Emulation {
 public:
  Emulation() : dir_(fs::temp_directory_path() / ("wgtrain-sm-emulation-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    for (const char* k : {"attention/forward_sm", "attention/backward_dq_sm", "attention/backward_dkv_sm",
                          "attention/sm_tiles"}) {
      std::string file = k;
      file[file.find('/')] = '.';
      std::ofstream(dir_ / (file + ".wgsl")) << emulated(std::string(wgtrain::detail::kernel_source(k)));
    }
    ::setenv(wgtrain::detail::kKernelOverridesEnv, dir_.c_str(), 1);
    od::attention_sm_emulated = true;
    od::attention_force = od::kSubgroupMatrix;
  }
  ~Emulation() {
    od::attention_force = od::kTableChoice;
    od::attention_sm_emulated = false;
    ::unsetenv(wgtrain::detail::kKernelOverridesEnv);
    fs::remove_all(dir_);
  }

 private:
  fs::path dir_;
};

using test::mixed_device;

struct Case {
  int64_t B, T, L, H, KV, hd;
  bool views;  // q, k, v as permuted / sliced views
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << "B" << c.B << " T" << c.T << " L" << c.L << " H" << c.H << " KV" << c.KV << " hd" << c.hd
      << (c.views ? " views" : "");
}

// |got - want| <= tol max|want| + floor over the tensor.
::testing::AssertionResult normwise(const Tensor& got, const ref::HostTensor& want, double tol, double floor = 0) {
  double most = 0.0;
  for (double x : want.data) most = std::max(most, std::fabs(x));
  return test::all_close(got, want, tol * most + floor, 0.0);
}

// Forward and backward on `dev` against the float64 reference, with the tolerances at the top.
void check(Device& dev, const Case& c) {
  SCOPED_TRACE(testing::PrintToString(c));
  auto up = [&](const ref::HostTensor& h) {
    return Tensor::from_host(dev, h.shape, std::vector<float>(h.data.begin(), h.data.end()));
  };
  Tensor q, k, v;
  if (c.views) {
    const int64_t capacity = c.L + 5;
    q = up(test::random_host({c.B, c.H, c.T, c.hd})).permute({0, 2, 1, 3});
    k = up(test::random_host({c.B, c.KV, capacity, c.hd})).slice(2, 0, c.L).permute({0, 2, 1, 3});
    v = up(test::random_host({c.B, c.KV, capacity, c.hd})).slice(2, 0, c.L).permute({0, 2, 1, 3});
  } else {
    q = up(test::random_host({c.B, c.T, c.H, c.hd}));
    k = up(test::random_host({c.B, c.L, c.KV, c.hd}));
    v = up(test::random_host({c.B, c.L, c.KV, c.hd}));
  }
  const ref::HostTensor hq = test::download(q), hk = test::download(k), hv = test::download(v);
  const double scale = 2.0 / std::sqrt(static_cast<double>(c.hd));
  const ops::Attention a = ops::attention(q, k, v, scale);
  const ref::AttentionRef want = ref::attention(hq, hk, hv, scale);
  EXPECT_TRUE(normwise(a.out, want.out, 1e-2)) << "out";
  EXPECT_TRUE(test::all_close(a.lse, want.lse, 1e-2, 0.0)) << "lse";
  // dO of a gradient's size (the loss is a mean over many tokens): f16 alone would flush much of it to zero.
  const ref::HostTensor dout = test::random_host({c.B, c.T, c.H * c.hd}, -3e-6, 3e-6);
  const ops::AttentionGrads g = ops::attention_backward(up(dout), q, k, v, a, scale);
  const ref::AttentionGradRef gw = ref::attention_backward(dout, hq, hk, hv, scale);
  // dq and dk are sums of dS = P (dP - D), where dP = dO v (f16 operands) cancels against D = dO . out (f32): the
  // one f16 rounding of dP, 2^-11 hd max|dO| at most, times the scale, stays where the exact dS is 0 (a row with
  // one key: dq = dk = 0 exactly).
  double dmax = 0.0;
  for (double x : dout.data) dmax = std::max(dmax, std::fabs(x));
  const double floor = std::ldexp(1.0, -11) * scale * static_cast<double>(c.hd) * dmax;
  EXPECT_TRUE(normwise(g.dq, gw.dq, 1e-2, floor)) << "dq";
  EXPECT_TRUE(normwise(g.dk, gw.dk, 1e-2, floor)) << "dk";
  EXPECT_TRUE(normwise(g.dv, gw.dv, 1e-2)) << "dv";
}

class AttentionSmEmulated : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionSmEmulated, MatchesTheReference) {
  Emulation emulation;
  check(test::device(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionSmEmulated,
                         ::testing::Values(Case{1, 1, 1, 1, 1, 16, false},    // one query, one key
                                           Case{2, 67, 67, 4, 2, 32, false},  // T past one 64-query block, GQA 2:1
                                           Case{1, 5, 40, 2, 1, 16, true},    // 35 cached positions, views
                                           Case{1, 33, 45, 3, 3, 32, true},   // offset 12 inside a key tile
                                           Case{2, 130, 130, 4, 1, 16, false},  // three query blocks, GQA 4:1
                                           Case{1, 1, 50, 2, 2, 32, true}));  // one new token after 49

TEST(AttentionSm, OnTheMatrixUnitsMatchesTheReference) {
  Device& dev = mixed_device();
  const std::string missing = od::attention_sm_missing(dev.impl(), 64, true);
  if (!missing.empty()) GTEST_SKIP() << "no subgroup-matrix attention here: " << missing;
  od::attention_force = od::kSubgroupMatrix;
  for (const Case& c : {Case{1, 1, 1, 1, 1, 16, false}, Case{2, 67, 67, 4, 2, 64, false},
                        Case{1, 5, 133, 2, 1, 80, false}, Case{1, 130, 130, 2, 2, 128, true},
                        Case{1, 33, 40, 3, 3, 48, true}, Case{2, 1, 50, 4, 1, 32, true},
                        Case{1, 70, 70, 5, 5, 64, true}, Case{2, 200, 203, 4, 1, 96, false}})
    check(dev, c);
  od::attention_force = od::kTableChoice;
}

// The table's choice takes the subgroup-matrix kernels exactly where attention_sm_missing says they can run, and
// forcing them where they cannot throws before any work, saying why.
TEST(AttentionSm, ChosenWhereTheyCanRun) {
  Device& dev = test::device();
  const std::string missing = od::attention_sm_missing(dev.impl(), 64, true);
  EXPECT_NE(od::attention_sm_missing(dev.impl(), 72, true), "") << "hd 72 is not a multiple of 16";
  EXPECT_NE(od::attention_sm_missing(dev.impl(), 144, true), "") << "hd 144 is past 128";
  EXPECT_NE(od::attention_sm_missing(dev.impl(), 64, false), "") << "not vec4 views";
  if (missing.empty()) return;
  const Tensor q = test::upload(test::random_host({1, 4, 2, 64}));
  od::attention_force = od::kSubgroupMatrix;
  try {
    ops::attention(q, q, q, 1.0);
    ADD_FAILURE() << "forced subgroup-matrix kernels ran on a device without them";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  od::attention_force = od::kTableChoice;
}

}  // namespace
}  // namespace wgtrain
