// fused_ce against the float64 reference: awkward sizes, ignored rows, logits of magnitude 1e4, in place, no row
// counting at all; each case on both backends (WebGPU, and the native Vulkan backend; tests/support/backends.h).
// Tolerances: loss |l - ref| <= 1e-5 |ref| + 1e-6 (1 + max |x|) (logsumexp is as exact as the largest logit);
// dlogits |d - ref| <= 1e-5 |ref| + 1e-6 / n_valid.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "ops/fused_ce/fused_ce_force.h"
#include "ops/fused_ce/fused_ce_ref.h"
#include "support/backends.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/fused_ce.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::random_host;
using test::upload;

struct Case {
  int64_t rows, vocab;
  double magnitude;
  double ignored;  // fraction of rows with label -100
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.rows << "x" << c.vocab << " |x| < " << c.magnitude << " ignored " << c.ignored;
}

std::vector<int> random_labels(int64_t rows, int64_t vocab, double ignored) {
  std::vector<int> labels(rows);
  std::uniform_int_distribution<int> cls(0, static_cast<int>(vocab) - 1);
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& l : labels) l = u(test::rng()) < ignored ? -100 : cls(test::rng());
  return labels;
}

template <class CE>
void check(const CE& got, const ref::HostTensor& x, const ref::CrossEntropyRef& want) {
  double xmax = 0;
  for (double v : x.data) xmax = std::max(xmax, std::fabs(v));
  const float loss = got.loss.to_host_f32()[0];
  EXPECT_NEAR(loss, want.loss, 1e-5 * std::fabs(want.loss) + 1e-6 * (1 + xmax)) << "WGTRAIN_TEST_SEED="
                                                                                << test::seed();
  double dmax = 0;  // 1 / n_valid at most: the absolute tolerance follows it
  for (double v : want.dlogits.data) dmax = std::max(dmax, std::fabs(v));
  EXPECT_TRUE(test::close_to(got.dlogits, want.dlogits, 1e-6 * std::max(dmax, 1e-30), 1e-5)) << "dlogits";
}

std::vector<int32_t> as_i32(const std::vector<int>& v) { return {v.begin(), v.end()}; }
ref::HostTensor x_small() { return random_host({2, 4}); }

class FusedCe : public ::testing::TestWithParam<std::tuple<Case, std::string>> {};

TEST_P(FusedCe, MatchesReference) {
  const auto [c, backend] = GetParam();
  const auto x = random_host({c.rows, c.vocab}, -c.magnitude, c.magnitude);
  const auto labels = random_labels(c.rows, c.vocab, c.ignored);
  // c copied into the lambda: clang before 16 (the browser build's) cannot capture a binding by reference.
  test::with_backend(backend, [&, c = c](auto b) {
    using B = decltype(b);
    check(B::fused_ce(B::upload(x), B::upload_i32({c.rows}, as_i32(labels))), x, ref::cross_entropy(x, labels));
  });
}

INSTANTIATE_TEST_SUITE_P(
    Awkward, FusedCe,
    ::testing::Combine(::testing::Values(Case{1, 1, 1, 0}, Case{3, 7, 3, 0}, Case{5, 1000, 5, 0.2},
                                         Case{17, 257, 4, 0.5}, Case{2, 50021, 8, 0}, Case{31, 13, 1e4, 0.1},
                                         Case{6, 33, 2, 1.0}, Case{300, 5, 2, 0.3}, Case{4, 32000, 4, 0.25},
                                         Case{3, 8, 1e4, 0}),
                       ::testing::ValuesIn(test::kBackends)));

class FusedCeOn : public ::testing::TestWithParam<std::string> {};

template <class B>
void in_place_over_the_logits() {
  for (int64_t vocab : {301, 300}) {  // scalar and vec4 rows
    SCOPED_TRACE(vocab);
    const auto x = random_host({9, vocab}, -6, 6);
    const auto labels = random_labels(9, vocab, 0.2);
    const auto lt = B::upload_i32({9}, as_i32(labels));
    const auto logits = B::upload(x);
    const auto ce = B::fused_ce(logits, lt, std::nullopt, true);
    EXPECT_EQ(ce.dlogits.to_host_f32(), logits.to_host_f32()) << "written over the logits";
    check(ce, x, ref::cross_entropy(x, labels));
    // The same numbers as the out-of-place form.
    const auto oop = B::fused_ce(B::upload(x), lt);
    EXPECT_EQ(ce.dlogits.to_host_f32(), oop.dlogits.to_host_f32());
    EXPECT_EQ(ce.loss.to_host_f32(), oop.loss.to_host_f32());
  }
}

TEST_P(FusedCeOn, InPlaceOverTheLogits) {
  test::with_backend(GetParam(), [](auto b) { in_place_over_the_logits<decltype(b)>(); });
}

TEST_P(FusedCeOn, ExplicitDivisor) {
  const auto x = random_host({8, 40});
  const auto labels = random_labels(8, 40, 0.25);
  test::with_backend(GetParam(), [&](auto b) {
    using B = decltype(b);
    check(B::fused_ce(B::upload(x), B::upload_i32({8}, as_i32(labels)), 32), x, ref::cross_entropy(x, labels, 32));
  });
}

TEST_P(FusedCeOn, OutOfRangeLabelsAreErrors) {
  // Found on the host before the dispatch (WebGPU, which knows uploaded labels) or by the kernel (which refuses
  // the row and raises at the next read-back); either way an ArgumentError, and nothing read out of bounds.
  const auto x = random_host({3, 10});
  test::with_backend(GetParam(), [&](auto b) {
    using B = decltype(b);
    EXPECT_THROW(B::fused_ce(B::upload(x), B::upload_i32({3}, {1, 10, 2})).loss.to_host_f32(), ArgumentError);
    // The error word is cleared: good labels afterwards read back.
    EXPECT_NO_THROW(B::fused_ce(B::upload(x), B::upload_i32({3}, {1, 9, 2})).loss.to_host_f32());
    EXPECT_THROW(B::fused_ce(B::upload(x), B::upload_i32({2}, {1, 2})), ArgumentError);
  });
}

// No label counts (a batch that is all prompt under --mask-prompt): the loss is 0 and every gradient 0, exactly,
// rather than PyTorch's NaN (0 / 0), which would poison the weights at the next step.
template <class B>
void no_counted_labels() {
  for (int64_t vocab : {33, 300}) {  // scalar and vec4 rows
    SCOPED_TRACE(vocab);
    const auto x = random_host({6, vocab}, -4, 4);
    const std::vector<int32_t> ignored(6, -100);
    const std::vector<float> zeros(static_cast<size_t>(6 * vocab), 0.0f);
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(in_place ? "in place" : "out of place");
      const auto ce = B::fused_ce(B::upload(x), B::upload_i32({6}, ignored), std::nullopt, in_place);
      EXPECT_EQ(ce.loss.to_host_f32(), std::vector<float>{0.0f});
      EXPECT_EQ(ce.dlogits.to_host_f32(), zeros);
    }
    // n_valid given as 0 (a whole batch with nothing to learn, split in pieces): no row counts, whatever its label.
    const auto labels = random_labels(6, vocab, 0.3);
    const auto ce = B::fused_ce(B::upload(x), B::upload_i32({6}, as_i32(labels)), 0);
    EXPECT_EQ(ce.loss.to_host_f32(), std::vector<float>{0.0f});
    EXPECT_EQ(ce.dlogits.to_host_f32(), zeros);
    const auto want = ref::cross_entropy(x, labels, 0);
    EXPECT_EQ(want.loss, 0.0);
    check(ce, x, want);
  }
  // No rows at all: the mean of nothing is 0 too.
  const auto empty = B::fused_ce(B::upload(ref::HostTensor({0, 5})), B::upload_i32({0}, {}));
  EXPECT_EQ(empty.loss.to_host_f32(), std::vector<float>{0.0f});
  EXPECT_EQ(ref::cross_entropy(ref::HostTensor({0, 5}), {}).loss, 0.0);
  // A negative divisor is still an error.
  EXPECT_THROW(B::fused_ce(B::upload(x_small()), B::upload_i32({2}, {1, 2}), -1), ArgumentError);
}

TEST_P(FusedCeOn, NoCountedLabelsGiveZeroLossAndGradient) {
  test::with_backend(GetParam(), [](auto b) { no_counted_labels<decltype(b)>(); });
}

// Sets the rows kernel's form and threads a row for the scope (ops::detail::fused_ce_force*), restoring after.
struct ForceRows {
  ForceRows(int form, int wg) {
    ops::detail::fused_ce_force = form;
    ops::detail::fused_ce_force_wg = wg;
  }
  ~ForceRows() {
    ops::detail::fused_ce_force = ops::detail::kFusedCeChoice;
    ops::detail::fused_ce_force_wg = 0;
  }
};

// Every form of the rows kernel (fused_ce_force.h) at 256 and 1024 threads a row, on rows that end inside the held
// part, inside a streamed block and in the tail (vec4 and scalar rows), out of place (dlogits poisoned) and in
// place; each against the float64 reference.
template <class B>
void every_rows_form() {
  namespace od = ops::detail;
  // 36768 = 4 x (4096 + 4096 + 1000): at 1024 threads (vec4) 4 held a thread, one block of 4, a tail of 1000; 13488
  // the same at 256; 65936 = 4 x (8192 + 8192 + 100): 8 held, blocks and a tail at 1024; 8969 and 13489 scalar
  // rows with blocks and a tail; 1000 and 40 held whole.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{3, 36768}, {2, 13488}, {2, 65936}, {2, 8969},
                                                           {3, 13489}, {5, 1000},  {3, 40}};
  for (int form : {od::kFusedCeChoice, od::kFusedCeOld, od::kFusedCeStream, od::kFusedCeStreamReverse,
                   od::kFusedCeHold8, od::kFusedCeHold8Unroll2})
    for (int wg : {256, 1024})
      for (const auto& [rows, vocab] : shapes) {
        SCOPED_TRACE("form " + std::to_string(form) + " wg " + std::to_string(wg) + " " + std::to_string(rows) + "x" +
                     std::to_string(vocab));
        const auto x = random_host({rows, vocab}, -8, 8);
        const auto labels = random_labels(rows, vocab, 0.2);
        const auto want = ref::cross_entropy(x, labels);
        const auto lt = B::upload_i32({rows}, as_i32(labels));
        ForceRows force(form, wg);
        try {
          // Out of place, dlogits new (the test devices poison new buffers with NaN: each element must be written).
          const auto ce = B::fused_ce(B::upload(x), lt);
          check(ce, x, want);
          const auto logits = B::upload(x);
          check(B::fused_ce(logits, lt, std::nullopt, true), x, want);
        } catch (const UnsupportedError&) {
          ASSERT_EQ(wg, 1024) << "256 threads a row are always available";
        }
      }
}

TEST_P(FusedCeOn, EveryRowsKernelForm) {
  test::with_backend(GetParam(), [](auto b) { every_rows_form<decltype(b)>(); });
}

// Rows cut over several workgroups (split.wgsl): parts that end inside the row and at its end, labels in the first,
// a middle and the last part, an ignored row, logits of magnitude 1e4 (so that the parts' maxima differ by far more
// than exp's range), against the float64 reference, out of place (dlogits poisoned first) and in place. Each of
// these ways to compute a part must give the default's every bit: who computes or writes a part must not change
// the result. Spin 0: every part not yet published read by the workgroup that needs it (which then writes it);
// defer 1: every part written by split_deferred.wgsl; defer 2: every other one, spin 0 besides.
template <class B>
void split_rows() {
  namespace od = ops::detail;
  // Parts of SPAN = CHUNKS * wg elements (of T). kFusedCeSplit2 at 256 threads: SPAN 512; 6544 = 4 x (3 x 512 + 100)
  // is 4 vec4 parts, 1337 three scalar parts, 131036 = 4 x (63 x 512 + 503) 64 vec4 parts (the most split.wgsl
  // gathers), 33001 65 scalar parts (more: held and streamed instead); at 1024 threads 16412 three vec4 parts.
  // kFusedCeSplit: 36768 five vec4 parts at 256 threads (SPAN 2048), 65936 three at 1024 (SPAN 8192), 8969 two
  // scalar parts at 1024.
  struct Shape {
    int form, wg;
    int64_t rows, vocab;
    double magnitude;
  };
  const std::vector<Shape> shapes = {
      {od::kFusedCeSplit2, 256, 7, 6544, 8},    {od::kFusedCeSplit2, 256, 5, 1337, 1e4},
      {od::kFusedCeSplit2, 256, 3, 131036, 6},   {od::kFusedCeSplit2, 256, 3, 33001, 6},
      {od::kFusedCeSplit2, 1024, 4, 16412, 8},  {od::kFusedCeSplit, 256, 3, 36768, 8},
      {od::kFusedCeSplit, 1024, 3, 65936, 1e4}, {od::kFusedCeSplit, 1024, 3, 8969, 8},
  };
  struct Way {
    uint32_t spin, defer;
  };
  const std::vector<Way> ways = {{od::kFusedCeSpin, 0}, {0, 0}, {od::kFusedCeSpin, 1}, {0, 2}};
  struct Restore {
    ~Restore() {
      od::fused_ce_spin = od::kFusedCeSpin;
      od::fused_ce_defer = 0;
    }
  } restore;
  for (const auto& sh : shapes) {
    const auto x = random_host({sh.rows, sh.vocab}, -sh.magnitude, sh.magnitude);
    auto labels = random_labels(sh.rows, sh.vocab, 0.0);
    labels[0] = static_cast<int>(sh.vocab) - 1;  // the last part
    labels[1] = -100;                            // an ignored row
    labels[2] = static_cast<int>(sh.vocab / 2);  // a middle part
    const auto want = ref::cross_entropy(x, labels);
    const auto lt = B::upload_i32({sh.rows}, as_i32(labels));
    ForceRows force(sh.form, sh.wg);
    std::vector<float> first_d, first_loss;
    for (const auto& way : ways)
      for (bool in_place : {false, true}) {
        SCOPED_TRACE("form " + std::to_string(sh.form) + " wg " + std::to_string(sh.wg) + " " +
                     std::to_string(sh.rows) + "x" + std::to_string(sh.vocab) + " spin " + std::to_string(way.spin) +
                     " defer " + std::to_string(way.defer) + (in_place ? " in place" : ""));
        od::fused_ce_spin = way.spin;
        od::fused_ce_defer = way.defer;
        try {
          const auto ce = B::fused_ce(B::upload(x), lt, std::nullopt, in_place);
          check(ce, x, want);
          const auto d = ce.dlogits.to_host_f32();
          const auto loss = ce.loss.to_host_f32();
          if (first_d.empty()) {
            first_d = d;
            first_loss = loss;
          } else {
            EXPECT_EQ(d, first_d) << "dlogits depend on who computed or wrote a part";
            EXPECT_EQ(loss, first_loss) << "the loss depends on who computed or wrote a part";
          }
        } catch (const UnsupportedError&) {
          ASSERT_EQ(sh.wg, 1024) << "256 threads a row are always available";
        }
      }
  }
  // A label >= V: an error before the dispatch where the host knows the labels (WebGPU), else the split kernel
  // refuses the row in every part and the read-back raises (native Vulkan; SplitRowsRefuseComputedLabels below).
  ForceRows force(od::kFusedCeSplit2, 256);
  const auto x = B::upload(random_host({3, 1337}));
  EXPECT_THROW(B::fused_ce(x, B::upload_i32({3}, {1, 1337, 2})).loss.to_host_f32(), ArgumentError);
  EXPECT_NO_THROW(B::fused_ce(x, B::upload_i32({3}, {1, 1336, 2})).loss.to_host_f32());
}

TEST_P(FusedCeOn, SplitRowsAcrossWorkgroups) {
  test::with_backend(GetParam(), [](auto b) { split_rows<decltype(b)>(); });
}

INSTANTIATE_TEST_SUITE_P(Backends, FusedCeOn, ::testing::ValuesIn(test::kBackends));

// Labels computed on the GPU, so that the kernel itself meets a label >= V in a row cut in parts.
TEST(FusedCe, SplitRowsRefuseComputedLabels) {
  ForceRows force(ops::detail::kFusedCeSplit2, 256);
  const Tensor x = upload(random_host({3, 1337}));
  auto labels = [](int32_t middle) {
    return ops::add(Tensor::from_host(test::device(), {3}, std::vector<int32_t>{1, middle, 2}), 8.0f);
  };
  EXPECT_THROW(ops::fused_ce(x, labels(1329)).loss.to_host_f32(), ArgumentError);
  EXPECT_NO_THROW(ops::fused_ce(x, labels(1328)).loss.to_host_f32());
}

TEST(FusedCe, BadLabels) {
  const Tensor x = upload(random_host({3, 10}));
  try {
    ops::fused_ce(x, Tensor::from_host(test::device(), {3}, std::vector<int32_t>{1, 10, 2}));
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("label 10"), std::string::npos) << e.what();
  }
  // Labels computed on the GPU: the kernel refuses the row and the read-back raises.
  const Tensor computed = ops::add(Tensor::from_host(test::device(), {3}, std::vector<int32_t>{1, 2, 3}), 8.0f);
  EXPECT_THROW(ops::fused_ce(x, computed).loss.to_host_f32(), ArgumentError);
  EXPECT_THROW(ops::fused_ce(x, Tensor::from_host(test::device(), {2}, std::vector<int32_t>{1, 2})), ArgumentError);
  EXPECT_THROW(ops::fused_ce(x, upload(random_host({3}))), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
