// Mixed precision (gemm_sm.wgsl on subgroup matrices; wgtrain/precision.h): the GEMMs against the float64
// reference on the matrix units where the device has them and everywhere emulated (see Run below), and the absmax
// pass that scales the operands and the precision option's errors.
// Mixed tolerance, per output (see README.md): each scaled operand |x / 2^e| <= 1 is rounded to f16 with a relative
// error <= 2^-11 (normal range) or an absolute one <= 2^-25 (f16 subnormals), so a product term is off by at most
// 2^-10 |a b| + 2^-24 s_a s_b (s: the row's and column's powers of two), and the f32 sum adds K 2^-23 sum |a b|:
//   |c - ref| <= 1e-30 + (2^-10 + K 2^-23) sum_k |a_k b_k| + K 2^-24 s_a s_b, with s = 2 max|row| (an upper bound).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <tuple>

#include "gpu/device_impl.h"
#include "ops/matmul/gemm.h"
#include "ops/q4gsw/q4gsw_ref.h"
#include "support/sm_emulation.h"
#include "support/test_support.h"
#include "wgtrain/autograd.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"
#include "wgtrain/precision.h"
#include "wgtrain/q4gsw.h"

namespace wgtrain {
namespace {

using test::random_host;

using test::mixed_device;

// The GEMM tests run twice: on the matrix units where the device has them (OnTheMatrixUnits; skipped, saying why,
// elsewhere), and everywhere emulated (Emulated: gemm_sm.wgsl's own text with the subgroup-matrix builtins written
// out in plain WGSL, tests/support/sm_emulation.h, on a device of its own that runs every GEMM through it). The
// emulation rounds to f16 where the kernel does, so the same tolerance holds. About 3 minutes on llvmpipe uncached,
// nearly all of it compiling the variants.
enum class Run { OnTheMatrixUnits, Emulated };

std::string run_name(Run r) { return r == Run::Emulated ? "Emulated" : "OnTheMatrixUnits"; }

using MmShape = std::tuple<int64_t, int64_t, int64_t>;
using Q4Shape = std::tuple<int64_t, int64_t, int64_t, int64_t>;

// "Emulated_65_33_129".
template <class Shape>
std::string run_and_shape_name(const ::testing::TestParamInfo<std::tuple<Run, Shape>>& i) {
  std::string name = run_name(std::get<0>(i.param));
  std::apply([&](auto... d) { ((name += "_" + std::to_string(d)), ...); }, std::get<1>(i.param));
  return name;
}

Device& emulated_device() {
  static Device* dev = [] {  // never destroyed, as test::device()
    DeviceOptions o;
    o.poison = true;
    auto* d = new Device(Device::open(o));
    d->impl().gemm_sm_emulated = true;
    return d;
  }();
  return *dev;
}

Device* current = nullptr;  // the running test's device: mixed_device() or emulated_device()
Device& dev() { return current ? *current : mixed_device(); }

// For a test's scope: its device, and for an emulated run gemm_sm.wgsl's emulated text. (A pipeline keeps the text
// it was made with, and the emulated device makes no other GEMM pipelines, so neither run sees the other's.)
class RunScope {
 public:
  explicit RunScope(Run r) {
    if (r == Run::Emulated) {
      emulation_ = std::make_unique<test::SmEmulation>(std::vector<test::EmulatedKernel>{{"matmul/gemm_sm", true}});
      current = &emulated_device();
    } else {
      current = &mixed_device();
    }
  }
  ~RunScope() { current = nullptr; }

 private:
  std::unique_ptr<test::SmEmulation> emulation_;
};

#define RUN_OR_SKIP(run)                                                                           \
  const RunScope run_scope(run);                                                                   \
  do {                                                                                             \
    const std::string missing = ops::detail::gemm_sm_missing(mixed_device().impl());               \
    if ((run) == Run::OnTheMatrixUnits && !missing.empty())                                        \
      GTEST_SKIP() << "no mixed precision here: " << mixed_device().info().name << " " << missing; \
  } while (0)

const auto kRuns = ::testing::Values(Run::OnTheMatrixUnits, Run::Emulated);

Tensor up(const ref::HostTensor& t) {
  std::vector<float> f(t.data.begin(), t.data.end());
  return Tensor::from_host(dev(), t.shape, f);
}

// The mixed bound above for c[M, N] = a[M, K] b[K, N] (row-major host tensors), checked element by element.
::testing::AssertionResult mixed_close(const std::vector<float>& got, const ref::HostTensor& a,
                                       const ref::HostTensor& b, const std::vector<double>& add = {}) {
  const int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1];
  if (static_cast<int64_t>(got.size()) != M * N) return ::testing::AssertionFailure() << "size " << got.size();
  std::vector<double> rmax(M, 0.0), cmax(N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) rmax[i] = std::max(rmax[i], std::fabs(a.data[i * K + k]));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) cmax[j] = std::max(cmax[j], std::fabs(b.data[k * N + j]));
  int bad = 0;
  ::testing::AssertionResult r = ::testing::AssertionSuccess();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = add.empty() ? 0.0 : add[i * N + j], abs_sum = add.empty() ? 0.0 : std::fabs(add[i * N + j]);
      for (int64_t k = 0; k < K; ++k) {
        want += a.data[i * K + k] * b.data[k * N + j];
        abs_sum += std::fabs(a.data[i * K + k] * b.data[k * N + j]);
      }
      const double tol = 1e-30 + (std::ldexp(1.0, -10) + K * std::ldexp(1.0, -23)) * abs_sum +
                         K * std::ldexp(1.0, -24) * (2 * rmax[i]) * (2 * cmax[j]);
      const double g = got[i * N + j];
      if (!(std::fabs(g - want) <= tol) && bad++ < 5) {
        if (bad == 1) r = ::testing::AssertionFailure() << "seed " << test::seed() << ":";
        r << " [" << i << "," << j << "] got " << g << " want " << want << " tol " << tol << ";";
      }
    }
  if (bad) r << " " << bad << " of " << M * N << " outside";
  return r;
}

ref::HostTensor transpose(const ref::HostTensor& x) {
  const int64_t r = x.shape[0], c = x.shape[1];
  ref::HostTensor t({c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t.data[j * r + i] = x.data[i * c + j];
  return t;
}

// (M, K, N): 1s, primes, the 128 x 128 block and 32-deep k step and just past them.
class MixedMm : public ::testing::TestWithParam<std::tuple<Run, MmShape>> {};

TEST_P(MixedMm, MatchesReference) {
  RUN_OR_SKIP(std::get<0>(GetParam()));
  const auto [M, K, N] = std::get<1>(GetParam());
  const auto a = random_host({M, K}), b = random_host({K, N});
  EXPECT_TRUE(mixed_close(ops::mm(up(a), up(b)).to_host_f32(), a, b));
}

TEST_P(MixedMm, SplitAlongKMatchesReference) {
  RUN_OR_SKIP(std::get<0>(GetParam()));
  const auto [M, K, N] = std::get<1>(GetParam());
  const auto a = random_host({M, K}), b = random_host({K, N});
  dev().impl().split_k = 1;
  const auto got = ops::mm(up(a), up(b)).to_host_f32();
  dev().impl().split_k = 0;
  EXPECT_TRUE(mixed_close(got, a, b));
}

INSTANTIATE_TEST_SUITE_P(Awkward, MixedMm,
                         ::testing::Combine(kRuns, ::testing::Values(MmShape{1, 1, 1}, MmShape{3, 5, 7},
                                                                     MmShape{17, 31, 13}, MmShape{65, 33, 129},
                                                                     MmShape{128, 32, 128}, MmShape{129, 97, 131},
                                                                     MmShape{257, 300, 200}, MmShape{1, 1000, 3},
                                                                     MmShape{640, 1024, 384})),
                         run_and_shape_name<MmShape>);

class Mixed : public ::testing::TestWithParam<Run> {};

// bmm (three [m, k] x [k, 130] products of one call), linear with a bias (x [lin_m, lin_k] W^T + b, 129 outputs)
// and linear_dW accumulating onto a gradient (g [70, dw_k] += dy^T x over 300 rows).
void check_batches_bias_and_accumulation(int64_t m, int64_t k, int64_t lin_m, int64_t lin_k, int64_t dw_k) {
  const int64_t B = 3;
  const auto a3 = random_host({B, m, k}), b3 = random_host({B, k, 130});
  const auto c3 = ops::bmm(up(a3), up(b3)).to_host_f32();
  for (int64_t i = 0; i < B; ++i) {
    ref::HostTensor ai({m, k}), bi({k, 130});
    std::copy_n(a3.data.begin() + i * m * k, m * k, ai.data.begin());
    std::copy_n(b3.data.begin() + i * k * 130, k * 130, bi.data.begin());
    EXPECT_TRUE(mixed_close(std::vector<float>(c3.begin() + i * m * 130, c3.begin() + (i + 1) * m * 130), ai, bi))
        << "bmm batch " << i;
  }
  const auto x = random_host({lin_m, lin_k}), w = random_host({129, lin_k}), bias = random_host({129});
  std::vector<double> add(lin_m * 129);
  for (int64_t i = 0; i < lin_m; ++i)
    for (int64_t j = 0; j < 129; ++j) add[i * 129 + j] = bias.data[j];
  EXPECT_TRUE(mixed_close(ops::linear(up(x), up(w), up(bias)).to_host_f32(), x, transpose(w), add)) << "bias";
  const auto dy = random_host({300, 70}), xx = random_host({300, dw_k}), g0 = random_host({70, dw_k});
  const Tensor g = up(g0);
  ops::linear_dW(up(dy), up(xx), &g);
  EXPECT_TRUE(mixed_close(g.to_host_f32(), transpose(dy), xx, g0.data)) << "dW accumulated";
}

TEST_P(Mixed, TransposedViewsBatchesBiasAndAccumulation) {
  RUN_OR_SKIP(GetParam());
  // a = A^T and b = B^T as strided views.
  const int64_t M = 137, K = 71, N = 150;
  const auto at = random_host({K, M}), bt = random_host({N, K});
  const auto got = ops::mm(up(at).transpose(0, 1), up(bt).transpose(0, 1)).to_host_f32();
  EXPECT_TRUE(mixed_close(got, transpose(at), transpose(bt))) << "transposed views";
  check_batches_bias_and_accumulation(40, 70, 33, 45, 50);
}

// A column-major A (m stride 1) aligned to 4 floats takes the A_T variant (vec4 loads along m, a [k][m] tile read as
// column-major fragments): M a multiple of 4 past the block, k not a multiple of 32; split along k; batches; dW.
// A column-major B (k stride 1) so aligned takes B_T, the same along k.
TEST_P(Mixed, ColumnMajorOperandsWithVec4Loads) {
  RUN_OR_SKIP(GetParam());
  const int64_t M = 132, K = 75, N = 140;
  const auto at = random_host({K, M}), b = random_host({K, N});
  const Tensor a = up(at).transpose(0, 1);
  EXPECT_TRUE(mixed_close(ops::mm(a, up(b)).to_host_f32(), transpose(at), b)) << "mm";
  dev().impl().split_k = 1;
  const auto split = ops::mm(a, up(b)).to_host_f32();
  dev().impl().split_k = 0;
  EXPECT_TRUE(mixed_close(split, transpose(at), b)) << "split along k";
  const int64_t B = 2;
  const auto a3 = random_host({B, 40, 36}), b3 = random_host({B, 40, 70});  // a[i] = a3[i]^T: 36 x 40
  const auto c3 = ops::bmm(up(a3).transpose(1, 2), up(b3)).to_host_f32();
  for (int64_t i = 0; i < B; ++i) {
    ref::HostTensor ai({40, 36}), bi({40, 70});
    std::copy_n(a3.data.begin() + i * 40 * 36, 40 * 36, ai.data.begin());
    std::copy_n(b3.data.begin() + i * 40 * 70, 40 * 70, bi.data.begin());
    EXPECT_TRUE(
        mixed_close(std::vector<float>(c3.begin() + i * 36 * 70, c3.begin() + (i + 1) * 36 * 70), transpose(ai), bi))
        << "bmm batch " << i;
  }
  // B column-major too (B_T: vec4s along k, K a multiple of 4), and with A row-major: x W^T of an f32 weight.
  const int64_t K4 = 76;
  const auto at4 = random_host({K4, M}), bt4 = random_host({N, K4});
  EXPECT_TRUE(mixed_close(ops::mm(up(at4).transpose(0, 1), up(bt4).transpose(0, 1)).to_host_f32(), transpose(at4),
                          transpose(bt4)))
      << "A and B column-major";
  const auto x = random_host({33, K4}), w = random_host({129, K4});
  EXPECT_TRUE(mixed_close(ops::mm(up(x), up(w).transpose(0, 1)).to_host_f32(), x, transpose(w))) << "x W^T";
  const auto dy = random_host({300, 68}), xx = random_host({300, 52}), g0 = random_host({68, 52});
  const Tensor g = up(g0);
  ops::linear_dW(up(dy), up(xx), &g);
  EXPECT_TRUE(mixed_close(g.to_host_f32(), transpose(dy), xx, g0.data)) << "dW accumulated";
}

// The reason for the scaling: gradients of 1e-7 would be f16 subnormals or zeros, and 3e4 x 3e4 products overflow
// f16; scaled by powers of two per row and column they keep f16's 11 bits, and rows of any magnitude mix.
TEST_P(Mixed, RowsAndColumnsFarOutsideF16sRangeKeepTheirPrecision) {
  RUN_OR_SKIP(GetParam());
  const int64_t M = 70, K = 300, N = 90;
  auto a = random_host({M, K}), b = random_host({K, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) a.data[i * K + k] *= std::ldexp(1e-7, static_cast<int>(i % 40));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) b.data[k * N + j] *= std::ldexp(3e4, -static_cast<int>(j % 30));
  EXPECT_TRUE(mixed_close(ops::mm(up(a), up(b)).to_host_f32(), a, b));
  // A zero row and a zero column are exact zeros.
  for (int64_t k = 0; k < K; ++k) a.data[5 * K + k] = 0;
  const auto got = ops::mm(up(a), up(b)).to_host_f32();
  for (int64_t j = 0; j < N; ++j) EXPECT_EQ(got[5 * N + j], 0.0f);
}

// An operand that several GEMMs read (the normed input of q, k and v; x in their weight gradients) is reduced once
// while it is unchanged (the device's derived cache): its absmax pass is not issued again, the result is the
// same. One read gives its rows' and its columns' maxima, so the weight gradient's x^T costs nothing after the
// forward's x. Once something writes it (a kernel, a host write) or a recording starts, it is reduced again: the
// rows grown by 2^20 here would overflow f16 (and the results be infinite) under the old powers of two.
TEST_P(Mixed, AnOperandSharedByGemmsIsReducedOnceWhileUnchanged) {
  RUN_OR_SKIP(GetParam());
  auto x = random_host({70, 45});
  const auto w1 = random_host({45, 33}), w2 = random_host({45, 40});
  const Tensor xd = up(x);
  auto dispatched = [&](const auto& f) {
    const uint64_t before = dev().stats().dispatches;
    f();
    return dev().stats().dispatches - before;
  };
  std::vector<float> c1, c2;
  // The counts below: the first GEMM's also holds the fill of a new zeroed arena (those after share it), which a
  // recording's start or a replay makes anew.
  dev().impl().forget_all_derived();
  const uint64_t first = dispatched([&] { c1 = ops::mm(xd, up(w1)).to_host_f32(); });
  const uint64_t second = dispatched([&] { c2 = ops::mm(xd, up(w2)).to_host_f32(); });
  EXPECT_EQ(second, first - 2) << "x's rows reduced again";
  EXPECT_TRUE(mixed_close(c1, x, w1));
  EXPECT_TRUE(mixed_close(c2, x, w2)) << "with x's cached powers";

  // Written by a kernel: fill_ sets every element to 2^20.
  ops::fill_(xd, std::ldexp(1.0, 20));
  ref::HostTensor big({70, 45});
  std::fill(big.data.begin(), big.data.end(), std::ldexp(1.0, 20));
  const uint64_t after_fill = dispatched([&] { c2 = ops::mm(xd, up(w2)).to_host_f32(); });
  EXPECT_EQ(after_fill, first - 1) << "x reduced again after a kernel wrote it";
  EXPECT_TRUE(mixed_close(c2, big, w2)) << "after fill_";

  // Written by the host.
  for (auto& v : x.data) v *= std::ldexp(1.0, 20);
  xd.write(std::vector<float>(x.data.begin(), x.data.end()));
  EXPECT_TRUE(mixed_close(ops::mm(xd, up(w1)).to_host_f32(), x, w1)) << "after a host write";

  // Into a recording: reduced inside it (so its replays see what the host writes in between) though the eager mm just
  // before left x's powers cached.
  const Tensor w2d = up(w2);
  ops::mm(xd, w2d).to_host_f32();
  Tensor c;
  const Recording rec = dev().record([&] { c = ops::mm(xd, w2d); });
  EXPECT_EQ(rec.dispatches(), first) << "the recording reduces x itself";
  for (auto& v : x.data) v *= std::ldexp(1.0, -30);
  xd.write(std::vector<float>(x.data.begin(), x.data.end()));
  rec.replay();
  EXPECT_TRUE(mixed_close(c.to_host_f32(), x, w2)) << "replayed after a host write";

  // The weight gradient's x (B, reduced by columns over k: a tile pass) shared by two dW.
  const auto dy1 = random_host({70, 20}), dy2 = random_host({70, 24});
  const Tensor xs = up(x);
  std::vector<float> g1, g2;
  const uint64_t dw1 = dispatched([&] { g1 = ops::linear_dW(up(dy1), xs).to_host_f32(); });
  const uint64_t dw2 = dispatched([&] { g2 = ops::linear_dW(up(dy2), xs).to_host_f32(); });
  EXPECT_EQ(dw2, dw1 - 2) << "x's columns reduced again";
  EXPECT_TRUE(mixed_close(g1, transpose(dy1), x));
  EXPECT_TRUE(mixed_close(g2, transpose(dy2), x));
  // x's columns from the forward's pass over x.
  const Tensor xf = up(x);
  const uint64_t forward = dispatched([&] { c1 = ops::mm(xf, up(w1)).to_host_f32(); });
  const uint64_t dw3 = dispatched([&] { g1 = ops::linear_dW(up(dy1), xf).to_host_f32(); });
  EXPECT_EQ(dw3, forward - 1) << "x^T reduced again after x";
  EXPECT_TRUE(mixed_close(c1, x, w1));
  EXPECT_TRUE(mixed_close(g1, transpose(dy1), x)) << "x^T's powers from x's pass";
}

// A norm's or SwiGLU's output is dropped in the forward and made again for the weight gradient (src/autograd:
// Node::recompute). The maxima the forward's GEMM took of its rows and columns go with it to the value made again,
// whose bits are the same: the backward issues the recompute's one dispatch and no absmax pass for it (run (v) on
// the H100: 31 passes a step, 0.8 ms), and the gradients are bit for bit those of a run that held the output.
TEST_P(Mixed, ARecomputedOperandKeepsTheMaximaOfTheForward) {
  RUN_OR_SKIP(GetParam());
  const int64_t rows = 70, dim = 48, out = 20;
  const auto xh = random_host({rows, dim}), uh = random_host({rows, dim}), gh = random_host({dim});
  const auto wh = random_host({out, dim}), rh = random_host({rows, out});
  for (const bool norm : {true, false}) {
    SCOPED_TRACE(norm ? "rms_norm" : "swiglu");
    auto run = [&](bool hold, uint64_t& backward_dispatches) {
      namespace ag = autograd;
      const ag::Var x = ag::Var::leaf(up(xh)), u = ag::Var::leaf(up(uh));
      const ag::Var gain = ag::Var::leaf(up(gh)), w = ag::Var::leaf(up(wh));
      dev().impl().forget_all_derived();
      ag::Var h = norm ? ag::rms_norm(x, gain, 1e-5) : ag::swiglu(x, u);
      const ag::Var loss = ag::sum(ag::mul(ag::linear(h, w), ag::Var::constant(up(rh))), {});
      if (!hold) h = ag::Var();
      const uint64_t before = dev().stats().dispatches;
      ag::backward(loss);
      backward_dispatches = dev().stats().dispatches - before;
      return std::vector<std::vector<float>>{x.grad().to_host_f32(), w.grad().to_host_f32(),
                                             norm ? gain.grad().to_host_f32() : u.grad().to_host_f32()};
    };
    uint64_t held_dispatches = 0, dropped_dispatches = 0;
    const auto held = run(true, held_dispatches);
    const auto dropped = run(false, dropped_dispatches);
    EXPECT_EQ(dropped_dispatches, held_dispatches + 1) << "the value made again was reduced again";
    for (size_t i = 0; i < held.size(); ++i) EXPECT_EQ(held[i], dropped[i]) << "gradient " << i;
  }
}

// swiglu and its backward on a mixed device leave the maxima of their outputs' rows and columns where the GEMMs that
// read them next look (swiglu.wgsl's MAXIMA form, tiles of 64 x 128): for each output as an operand and transposed,
// exactly the absmax pass's; then a GEMM on such an output runs no absmax pass. The values are the plain kernel's
// (forward: bit for bit; the gradients within the reference's bound: another kernel may contract differently), and
// made again for the backward (swiglu_again) they are the same bits, with nothing remembered. Awkward sizes around
// the tile; a 3-d operand.
TEST_P(Mixed, SwigluLeavesItsOutputsMaximaForTheGemms) {
  RUN_OR_SKIP(GetParam());
  for (const Shape& shape : {Shape{130, 132}, Shape{2, 67, 260}, Shape{64, 128}, Shape{1, 4}}) {
    SCOPED_TRACE(shape_str(shape));
    const int64_t cols = shape.back(), rows = numel(shape) / cols;
    const auto gh = random_host(shape, -4, 4), uh = random_host(shape), dh = random_host(shape);
    const Tensor g = up(gh), u = up(uh), d = up(dh);
    auto& impl = dev().impl();
    impl.forget_all_derived();
    // What the absmax pass would have remembered for t, against what the cache holds.
    auto expect_maxima = [&](const Tensor& t, const char* what) {
      SCOPED_TRACE(what);
      const auto want = ops::detail::row_and_column_absmax(t.reshape({rows, cols})).to_host_f32();
      const wgtrain::detail::DerivedKey as_operand{t.storage()->buffer, 1, {t.offset(), 1, rows, cols, 0, cols, 1}};
      const wgtrain::detail::DerivedKey transposed{t.storage()->buffer, 1, {t.offset(), 1, cols, rows, 0, 1, cols}};
      const auto a = impl.derived(as_operand), b = impl.derived(transposed);
      ASSERT_TRUE(a && b) << "no maxima remembered";
      const auto read = [](const wgtrain::detail::DerivedValue& v, int64_t n) {
        return Tensor(v.storage, {n}, {1}, v.offset, DType::F32).to_host_f32();
      };
      EXPECT_EQ(read(*a, rows), std::vector<float>(want.begin(), want.begin() + rows)) << "rows";
      EXPECT_EQ(read(*b, cols), std::vector<float>(want.begin() + rows, want.end())) << "columns";
    };
    const Tensor out = ops::swiglu(g, u);
    expect_maxima(out, "forward");
    const auto plain = ops::swiglu(Tensor::from_host(test::device(), shape, g.to_host_f32()),
                                   Tensor::from_host(test::device(), shape, u.to_host_f32()));
    EXPECT_EQ(out.to_host_f32(), plain.to_host_f32()) << "the plain kernel's bits";
    const ops::SwigluGrads gr = ops::swiglu_backward(d, g, u);
    expect_maxima(gr.dgate, "d_gate");
    expect_maxima(gr.dup, "d_up");
    const ref::SwigluGradRef want = ref::swiglu_backward(dh, gh, uh);
    EXPECT_TRUE(test::all_close(gr.dgate, want.dgate, 1e-6, 1e-5)) << "d_gate";
    EXPECT_TRUE(test::all_close(gr.dup, want.dup, 1e-6, 1e-5)) << "d_up";
    // A GEMM on the output finds its maxima: the product and its finishing pass, no absmax pass.
    const Tensor w = up(random_host({cols, 24}));
    const uint64_t before = dev().stats().dispatches;
    const Tensor y = ops::mm(out.reshape({rows, cols}), w);
    const uint64_t gemm_dispatches = dev().stats().dispatches - before;
    impl.forget_all_derived();
    const uint64_t again_before = dev().stats().dispatches;
    const Tensor y_again = ops::mm(out.reshape({rows, cols}), w);
    EXPECT_LT(gemm_dispatches, dev().stats().dispatches - again_before) << "the GEMM reduced the output again";
    EXPECT_EQ(y.to_host_f32(), y_again.to_host_f32()) << "the remembered maxima give the pass's product";
    const Tensor made_again = ops::detail::swiglu_again(g, u);
    EXPECT_EQ(made_again.to_host_f32(), out.to_host_f32()) << "made again";
    EXPECT_FALSE(impl.derived({made_again.storage()->buffer, 1, {made_again.offset(), 1, rows, cols, 0, cols, 1}}))
        << "made again, it remembers nothing of its own";
  }
}

// A residual stream joined to a q4 linear as one node (autograd::linear_q4gsw_residual: the GEMM's finishing pass
// adds it) gives the value and the gradients of an add after the linear, bit for bit: a trained latent and a
// frozen weight, outputs whole 16 x 16 fragments (finished in place) and not (through the padded buffer).
TEST_P(Mixed, AResidualJoinedInTheGemmGivesTheAddsValueAndGradients) {
  RUN_OR_SKIP(GetParam());
  namespace ag = autograd;
  for (const auto& [M, N, K] : {std::make_tuple(64, 48, 64), std::make_tuple(70, 40, 72)}) {
    SCOPED_TRACE(std::to_string(M) + " x " + std::to_string(N) + " x " + std::to_string(K));
    const auto latent_h = random_host({N, K});
    // Any codes (K even: no padding nibbles); the latent is trained straight through them.
    const auto b = test::random_ints({N * K / 2}, 0, 255), sc = random_host({q4gsw::groups(K, 32), N}, 0.01, 0.2);
    const std::vector<uint8_t> bytes(b.data.begin(), b.data.end());
    const std::vector<float> scales(sc.data.begin(), sc.data.end());
    const Q4Weight w = q4gsw::upload(dev(), bytes, scales, N, K, 32);
    const auto rh = random_host({M, N}), xh = random_host({M, K}), gh = random_host({M, N});
    for (const bool frozen : {false, true}) {
      SCOPED_TRACE(frozen ? "frozen" : "trained");
      auto run = [&](bool joined) {
        const ag::Var r = ag::Var::leaf(up(rh)), x = ag::Var::leaf(up(xh)), latent = ag::Var::leaf(up(latent_h));
        const ag::Var lin = frozen ? ag::Var() : latent;
        const ag::Var y = joined ? ag::linear_q4gsw_residual(r, x, w, lin)
                                 : ag::add(r, frozen ? ag::linear_q4gsw(x, w) : ag::linear_q4gsw(x, w, latent));
        ag::backward(ag::sum(ag::mul(y, ag::Var::constant(up(gh))), {}));
        std::vector<std::vector<float>> out = {y.value().to_host_f32(), r.grad().to_host_f32(),
                                               x.grad().to_host_f32()};
        if (!frozen) out.push_back(latent.grad().to_host_f32());
        return out;
      };
      const auto apart = run(false), joined = run(true);
      const char* names[] = {"value", "residual's gradient", "input's gradient", "latent's gradient"};
      for (size_t i = 0; i < apart.size(); ++i) EXPECT_EQ(joined[i], apart[i]) << names[i];
    }
  }
}

// What the device keeps for the mixed GEMMs (operand maxima, the zeroed arena) is a cache: releasing the cached
// memory gives its buffers back (bench rows check that they leave the pool as they found it: run (r) on the H100
// found the arena left behind), and the next GEMM reduces its operands anew.
TEST_P(Mixed, ReleasingCachedMemoryGivesBackWhatTheGemmsKept) {
  RUN_OR_SKIP(GetParam());
  const auto x = random_host({70, 45}), w = random_host({45, 33});
  const Tensor xd = up(x), wd = up(w);
  dev().release_cached_memory();
  const uint64_t held = dev().memory().current.in_use();
  std::vector<float> c = ops::mm(xd, wd).to_host_f32();
  EXPECT_GT(dev().memory().current.in_use(), held) << "x's maxima are kept while x is unchanged";
  dev().release_cached_memory();
  EXPECT_EQ(dev().memory().current.in_use(), held);
  EXPECT_EQ(dev().memory().current.idle, 0u);
  std::fill(c.begin(), c.end(), std::nanf(""));
  c = ops::mm(xd, wd).to_host_f32();
  EXPECT_TRUE(mixed_close(c, x, w)) << "reduced again after the release";
}

INSTANTIATE_TEST_SUITE_P(, Mixed, kRuns, [](const ::testing::TestParamInfo<Run>& i) { return run_name(i.param); });

// The q4gsw linears (codes dequantised into f16 tiles): forward x W^T, input gradient dy W.
class MixedQ4 : public ::testing::TestWithParam<std::tuple<Run, Q4Shape>> {};

// x W^T and dy W of a q4gsw weight [N, K] against the reference, and the residual form.
void check_q4_products(int64_t M, int64_t N, int64_t K, int64_t G) {
  const auto codes = test::random_ints({N, K}, 0, 15);
  std::vector<uint8_t> bytes(static_cast<size_t>(N * ((K + 1) / 2)), 0x88);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < K; ++c) {
      uint8_t& v = bytes[r * ((K + 1) / 2) + c / 2];
      const int code = static_cast<int>(codes.data[r * K + c]);
      v = c % 2 ? static_cast<uint8_t>((v & 0x0f) | (code << 4)) : static_cast<uint8_t>((v & 0xf0) | code);
    }
  const auto s = random_host({q4gsw::groups(K, G), N}, 0.01, 0.2);
  const std::vector<float> scales(s.data.begin(), s.data.end());
  const Q4Weight w = q4gsw::upload(dev(), bytes, scales, N, K, G);
  const auto wd = ref::q4_dequant(bytes, scales, N, K, G);  // [N, K]
  const auto x = random_host({M, K});
  EXPECT_TRUE(mixed_close(ops::linear_q4gsw(up(x), w).to_host_f32(), x, transpose(wd))) << "forward";
  const auto dy = random_host({M, N}, -1e-6, 1e-6);  // gradient-sized
  EXPECT_TRUE(mixed_close(ops::linear_q4gsw_backward(up(dy), w).to_host_f32(), dy, wd)) << "input gradient";

  // A residual stream joined in the finishing pass: the bits of the product followed by an add, the residual whole
  // (vec4s where N allows) or a view 3 floats in (one float a thread), into a poisoned output.
  const auto res = random_host({M, N}, -4, 4);
  ref::HostTensor padded({M * N + 3});
  std::copy(res.data.begin(), res.data.end(), padded.data.begin() + 3);
  const std::vector<float> want = ops::add(up(res), ops::linear_q4gsw(up(x), w)).to_host_f32();
  for (const Tensor& r : {up(res), up(padded).slice(0, 3, M * N + 3).reshape({M, N})}) {
    SCOPED_TRACE("residual " + std::to_string(r.offset()) + " floats in");
    EXPECT_EQ(ops::linear_q4gsw_residual(r, up(x), w).to_host_f32(), want);
  }
  EXPECT_THROW(ops::linear_q4gsw_residual(up(random_host({M, N + 1})), up(x), w), ArgumentError);
}

TEST_P(MixedQ4, ForwardAndInputGradientMatchReference) {
  RUN_OR_SKIP(std::get<0>(GetParam()));
  const auto [M, N, K, G] = std::get<1>(GetParam());
  check_q4_products(M, N, K, G);
}

// Blocks of 64 and of 128 rows (gemm_sm.wgsl's BM, forced: the choice gives the tests' small products 64, split
// ones 128): every form of A (row-major in vec4s and not, column-major), both q4 modes, split-K, batches, bias and
// accumulation, rows far outside f16's range, M around the block.
void blocks_in_every_form();
TEST_P(Mixed, BlocksOfEitherHeightInEveryForm) {
  RUN_OR_SKIP(GetParam());
  for (const int rows : {64, 128}) {
    SCOPED_TRACE("blocks of " + std::to_string(rows) + " rows");
    dev().impl().gemm_sm_rows = rows;
    blocks_in_every_form();
    dev().impl().gemm_sm_rows = 0;
    if (::testing::Test::HasFatalFailure()) return;
  }
}

void blocks_in_every_form() {
  for (const auto& [M, K, N] : {MmShape{65, 33, 129}, MmShape{64, 32, 128}, MmShape{129, 100, 131},
                                MmShape{257, 300, 200}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N));
    const auto a = random_host({M, K}), b = random_host({K, N});
    EXPECT_TRUE(mixed_close(ops::mm(up(a), up(b)).to_host_f32(), a, b)) << "row-major";
    dev().impl().split_k = 1;
    const auto split = ops::mm(up(a), up(b)).to_host_f32();
    dev().impl().split_k = 0;
    EXPECT_TRUE(mixed_close(split, a, b)) << "split along k";
    const auto at = random_host({K, M});
    EXPECT_TRUE(mixed_close(ops::mm(up(at).transpose(0, 1), up(b)).to_host_f32(), transpose(at), b))
        << "A column-major";
  }
  check_batches_bias_and_accumulation(70, 40, 97, 44, 52);  // 70 and 97 rows: past one block of 64
  auto far = random_host({70, 96});
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t k = 0; k < 96; ++k) far.data[i * 96 + k] *= std::ldexp(1e-7, static_cast<int>(i % 40));
  const auto fb = random_host({96, 90});
  EXPECT_TRUE(mixed_close(ops::mm(up(far), up(fb)).to_host_f32(), far, fb)) << "rows far outside f16's range";
  for (const auto& [M, N, K, G] : {Q4Shape{130, 129, 200, 32}, Q4Shape{64, 640, 640, 32}}) {
    SCOPED_TRACE("q4 " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    check_q4_products(M, N, K, G);
  }
}

INSTANTIATE_TEST_SUITE_P(Awkward, MixedQ4,
                         ::testing::Combine(kRuns, ::testing::Values(Q4Shape{1, 8, 8, 8}, Q4Shape{5, 13, 37, 8},
                                                                     Q4Shape{130, 129, 200, 32},
                                                                     Q4Shape{64, 640, 640, 32},
                                                                     Q4Shape{33, 300, 1000, 64})),
                         run_and_shape_name<Q4Shape>);

// ---- everywhere (llvmpipe included) ---------------------------------------------------------------------------------

// The absmax passes: whole rows (sm_row_absmax.wgsl, rows along len, vec4 or not) and tiles combined atomically
// (sm_absmax.wgsl, transposed views, vec4s of rows where R is a multiple of 4: 300, 68), rows and lengths around their
// tiles (8 rows of 32 threads; 64 x 256), zero rows,
// rows far from 1, a row holding an infinity: exactly the largest magnitude. (Not a NaN: WGSL's max leaves it to
// the GPU whether a NaN wins; the GEMM's products carry it either way.)
TEST(MixedAbsmax, RowMaximaAreExact) {
  for (const auto& [B, R, L] : {std::make_tuple(1, 1, 1), std::make_tuple(2, 17, 300), std::make_tuple(1, 65, 65),
                                std::make_tuple(3, 100, 257), std::make_tuple(1, 300, 7),
                                std::make_tuple(2, 9, 1728), std::make_tuple(2, 68, 530)}) {
    SCOPED_TRACE(std::to_string(B) + "x" + std::to_string(R) + "x" + std::to_string(L));
    auto x = random_host({B, R, L});
    for (int64_t r = 0; r < B * R; ++r)
      for (int64_t l = 0; l < L; ++l) x.data[r * L + l] *= std::ldexp(1.0, static_cast<int>(r % 50) - 25);
    for (int64_t l = 0; l < L; ++l) x.data[(B * R / 2) * L + l] = 0;  // one zero row
    if (B * R > 4) x.data[1 * L + L / 2] = -std::numeric_limits<double>::infinity();
    std::vector<float> want(B * R, 0.0f);
    for (int64_t r = 0; r < B * R; ++r)
      for (int64_t l = 0; l < L; ++l) want[r] = std::max(want[r], std::fabs(static_cast<float>(x.data[r * L + l])));
    const Tensor t = test::upload(x);
    EXPECT_EQ(ops::detail::row_absmax(t).to_host_f32(), want) << "rows along len";
    // The same values as columns of a [B, L, R] tensor viewed transposed (row stride 1).
    ref::HostTensor xt({B, L, R});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t l = 0; l < L; ++l) xt.data[(b * L + l) * R + r] = x.data[(b * R + r) * L + l];
    EXPECT_EQ(ops::detail::row_absmax(test::upload(xt).transpose(1, 2)).to_host_f32(), want) << "transposed view";
  }
}

// One read for both (sm_absmax.wgsl, as gemm_sm reduces a 2-D operand): each row's and each column's largest
// magnitude, exactly, around the 64 x 128 tile and its 4 columns a thread; vec4 loads where C is a multiple of 4 and
// scalar ones elsewhere; read transposed (the pass then runs along the stride-1 rows); a zero row and column, an
// infinity.
TEST(MixedAbsmax, RowAndColumnMaximaAreExact) {
  for (const auto& [R, C] : {std::make_pair(1, 1), std::make_pair(65, 129), std::make_pair(64, 128),
                             std::make_pair(130, 7), std::make_pair(3, 260), std::make_pair(200, 640)}) {
    SCOPED_TRACE(std::to_string(R) + "x" + std::to_string(C));
    auto x = random_host({R, C});
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) x.data[r * C + c] *= std::ldexp(1.0, static_cast<int>((r + 3 * c) % 50) - 25);
    for (int64_t c = 0; c < C; ++c) x.data[(R / 2) * C + c] = 0;  // a zero row
    for (int64_t r = 0; r < R; ++r) x.data[r * C + C / 2] = 0;    // and column
    if (R > 2 && C > 2) x.data[1 * C + C - 1] = -std::numeric_limits<double>::infinity();
    std::vector<float> want(R + C, 0.0f);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const float m = std::fabs(static_cast<float>(x.data[r * C + c]));
        want[r] = std::max(want[r], m);
        want[R + c] = std::max(want[R + c], m);
      }
    EXPECT_EQ(ops::detail::row_and_column_absmax(test::upload(x)).to_host_f32(), want) << "row-major";
    EXPECT_EQ(ops::detail::row_and_column_absmax(test::upload(transpose(x)).transpose(0, 1)).to_host_f32(), want)
        << "transposed view";
  }
}

// Every variant gemm_sm can pick renders (no placeholder missing or left unused, every value declared), and sits at
// the index gemm_sm computes for it. Runs everywhere: the rendering needs no device.
TEST(MixedVariants, EveryVariantRendersAtItsIndex) {
  const auto& variants = ops::detail::gemm_sm_variants();
  ASSERT_EQ(variants.size(), 54u);
  const std::string_view source = wgtrain::detail::kernel_source("matmul/gemm_sm");
  const auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  for (int rows = 0; rows < 2; ++rows)
    for (int mode = 0; mode < 3; ++mode)
      for (int am = 0; am < 3; ++am)
        for (int bm = 0; bm < 3; ++bm) {
          SCOPED_TRACE("rows " + std::to_string(rows ? 64 : 128) + " mode " + std::to_string(mode) + " A form " +
                       std::to_string(am) + " B form " + std::to_string(bm));
          std::string text;
          const auto& defs = variants[rows * 27 + mode * 9 + am * 3 + bm];
          ASSERT_NO_THROW(text = wgtrain::detail::render_kernel("matmul/gemm_sm", source, defs));
          const auto has = [&](const std::string& s) { return text.find(s) != std::string::npos; };
          EXPECT_TRUE(has(std::string("const BM: u32 = ") + (rows ? "64" : "128") + "u;"));
          EXPECT_TRUE(has("const B_MODE: u32 = " + std::to_string(mode) + "u;"));
          EXPECT_TRUE(has("const A_VEC: bool = " + b(am == 1) + ";"));
          EXPECT_TRUE(has("const A_T: bool = " + b(am == 2) + ";"));
          EXPECT_TRUE(has("const B_VEC: bool = " + b(bm == 1) + ";"));
          EXPECT_TRUE(has("const B_T: bool = " + b(bm == 2) + ";"));
          EXPECT_TRUE(has(std::string("var<storage, read> a: array<") + (am ? "vec4<f32>" : "f32") + ">;"));
          const std::string b_type = mode ? "u32" : bm ? "vec4<f32>" : "f32";
          EXPECT_TRUE(has("var<storage, read> b: array<" + b_type + ">;"));
        }
}

TEST(MixedPrecision, NamesAndDeviceChecks) {
  EXPECT_EQ(parse_precision("fp32"), Precision::Fp32);
  EXPECT_EQ(parse_precision("mixed"), Precision::Mixed);
  EXPECT_STREQ(precision_name(Precision::Mixed), "mixed");
  try {
    parse_precision("fp16");
    ADD_FAILURE() << "fp16 parsed";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("choose fp32 or mixed"), std::string::npos) << e.what();
  }
  // The shared test device was not opened for mixed precision: its GEMMs are fp32, and asking for mixed names why.
  EXPECT_EQ(gemm_precision(test::device()), Precision::Fp32);
  EXPECT_NO_THROW(require_precision(test::device(), Precision::Fp32));
  try {
    require_precision(test::device(), Precision::Mixed);
    ADD_FAILURE() << "mixed accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--precision mixed needs"), std::string::npos) << m;
    EXPECT_NE(m.find("use --precision fp32"), std::string::npos) << m;
  }
  // A device opened for it runs mixed exactly when it has everything; otherwise asking says what is missing.
  const std::string missing = ops::detail::gemm_sm_missing(mixed_device().impl());
  EXPECT_EQ(gemm_precision(mixed_device()), missing.empty() ? Precision::Mixed : Precision::Fp32);
  if (!missing.empty()) {
    try {
      require_precision(mixed_device(), Precision::Mixed);
      ADD_FAILURE() << "mixed accepted without " << missing;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace wgtrain
