// gather and embedding, exact against the reference; out-of-range indices are errors, found on the host where it
// knows the indices and on the GPU where it does not, and never read out of bounds.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/reference.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::all_equal;
using test::random_host;
using test::random_ints;
using test::shape_label;
using test::upload;
using test::upload_i32;

TEST(Gather, AlongEveryDim) {
  const auto x = random_host({5, 7, 3});
  for (int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    const int d = dim < 0 ? dim + 3 : dim;
    Shape is = {4, 6, 2};  // smaller than x outside dim, any size along it
    is[d] = 9;
    const auto idx = random_ints(is, 0, static_cast<int>(x.shape[d]) - 1);
    EXPECT_TRUE(all_close(ops::gather(upload(x), dim, upload_i32(idx)), ref::gather(x, dim, idx), 0, 0));
  }
}

TEST(Gather, Int32InputAndStridedViews) {
  const auto x = random_ints({6, 4}, -1000, 1000);
  const auto idx = random_ints({4, 6}, 0, 3);
  // self transposed: gather rows of x^T.
  ref::HostTensor xt({4, 6});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) xt.data[j * 6 + i] = x.data[i * 4 + j];
  EXPECT_TRUE(all_equal(ops::gather(upload_i32(x).transpose(0, 1), 0, upload_i32(idx)), ref::gather(xt, 0, idx)));
}

TEST(Embedding, LooksUpRows) {
  const auto w = random_host({50, 9});
  const auto idx = random_ints({3, 17}, 0, 49);
  EXPECT_TRUE(all_close(ops::embedding(upload(w), upload_i32(idx)), ref::embedding(w, idx), 0, 0));
  const auto one = random_ints({1}, 0, 49);
  EXPECT_TRUE(all_close(ops::embedding(upload(w), upload_i32(one)), ref::embedding(w, one), 0, 0));
}

TEST(Embedding, OutOfRangeIndexKnownOnTheHost) {
  const Tensor w = upload(random_host({10, 4}));
  for (int bad : {10, -1, 1000000}) {
    std::vector<int32_t> idx = {1, 2, bad, 3};
    try {
      ops::embedding(w, Tensor::from_host(test::device(), {4}, idx));
      FAIL() << "no error for " << bad;
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[0, 10)"), std::string::npos) << e.what();
    }
  }
}

TEST(Embedding, OutOfRangeIndexComputedOnTheGpu) {
  // Indices made on the GPU (here by an add) are unknown to the host: the kernel refuses them without reading and
  // the next read-back raises, naming the op.
  const auto wh = random_host({10, 4});
  const Tensor w = upload(wh);
  std::vector<int32_t> idx = {1, 2, 3, 4};
  const Tensor shifted = ops::add(Tensor::from_host(test::device(), {4}, idx), 6.0f);  // 7, 8, 9, 10
  const Tensor out = ops::embedding(w, shifted);
  try {
    out.to_host_f32();
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("'embedding'"), std::string::npos) << e.what();
  }
  // The flag is cleared: in-range work afterwards reads back the right rows (6, 7, 8, 9), exactly.
  const Tensor ok = ops::embedding(w, ops::add(Tensor::from_host(test::device(), {4}, idx), 5.0f));
  EXPECT_TRUE(all_close(ok, ref::embedding(wh, ref::HostTensor({4}, {6, 7, 8, 9})), 0, 0));
}

// embedding_backward sums grad rows per index in position order, in float32; the float64 reference bounds the
// error by |error| <= 4e-7 * (repeats of the index) * sum |grad| over the summed rows.
::testing::AssertionResult embedding_backward_matches(const ref::HostTensor& grad, const ref::HostTensor& idx,
                                                      int64_t V) {
  const Tensor got = ops::embedding_backward(upload(grad), upload_i32(idx), V);
  const int64_t D = grad.shape.back();
  ref::HostTensor abs_grad = grad;
  for (auto& v : abs_grad.data) v = std::fabs(v);
  ref::HostTensor scale = ref::embedding_backward(abs_grad, idx, V);
  std::vector<int64_t> repeats(V, 0);
  for (double v : idx.data) ++repeats[static_cast<int64_t>(v)];
  for (int64_t v = 0; v < V; ++v)
    for (int64_t j = 0; j < D; ++j) scale.data[v * D + j] *= 4e-7 * static_cast<double>(std::max<int64_t>(repeats[v], 1));
  return all_close(got, ref::embedding_backward(grad, idx, V), 0, 1.0, &scale);
}

TEST(EmbeddingBackward, SumsRowsPerIndexAtAwkwardSizes) {
  struct Case {
    Shape idx;
    int64_t V, D;
  };
  // Tiles of 256 positions, columns 256 a thread apart and 1024 a workgroup: sizes below, at and across them; V = 1;
  // one column.
  for (const Case& c : {Case{{1}, 1, 1}, Case{{5}, 3, 7}, Case{{3, 17}, 50, 9}, Case{{300}, 7, 257},
                        Case{{2, 129}, 1000, 13}, Case{{513}, 2, 31}, Case{{4, 64}, 256, 256},
                        // past one workgroup's 1024 columns; most of 3000 rows named by no position
                        Case{{70}, 5, 1300}, Case{{3, 40}, 3000, 2049}}) {
    SCOPED_TRACE(shape_label(c.idx) + " V " + std::to_string(c.V) + " D " + std::to_string(c.D));
    Shape gshape = c.idx;
    gshape.push_back(c.D);
    const auto grad = random_host(gshape);
    const auto idx = random_ints(c.idx, 0, static_cast<int>(c.V) - 1);
    EXPECT_TRUE(embedding_backward_matches(grad, idx, c.V));
  }
}

TEST(EmbeddingBackward, OneIndexEverywhereAndRowsNoIndexNames) {
  const auto grad = random_host({600, 5});
  ref::HostTensor idx({600});
  for (auto& v : idx.data) v = 3;  // 600 repeats of one row; rows 0-2 and 4 stay zero
  EXPECT_TRUE(embedding_backward_matches(grad, idx, 5));
}

TEST(EmbeddingBackward, IsDeterministic) {
  const auto grad = upload(random_host({1000, 33}, -1e3, 1e3));
  const auto idx = upload_i32(random_ints({1000}, 0, 9));
  const auto a = ops::embedding_backward(grad, idx, 10).to_host_f32();
  const auto b = ops::embedding_backward(grad, idx, 10).to_host_f32();
  EXPECT_EQ(a, b);
}

TEST(EmbeddingBackward, RejectsBadShapesAndIndices) {
  const Tensor g = upload(random_host({4, 3}));
  std::vector<int32_t> ok = {0, 1, 2, 1}, bad = {0, 1, 9, 1}, three = {0, 1, 2};
  EXPECT_THROW(ops::embedding_backward(g, Tensor::from_host(test::device(), {4}, bad), 5), ArgumentError);
  EXPECT_THROW(ops::embedding_backward(g, Tensor::from_host(test::device(), {3}, three), 5), ArgumentError);
  EXPECT_THROW(ops::embedding_backward(g, Tensor::from_host(test::device(), {4}, ok), 0), ArgumentError);
  // Indices the host does not know are checked on the GPU and raised at the next read-back.
  const Tensor shifted = ops::add(Tensor::from_host(test::device(), {4}, ok), 4.0f);  // 4, 5, 6, 5
  const Tensor out = ops::embedding_backward(g, shifted, 5);
  EXPECT_THROW(out.to_host_f32(), ArgumentError);
}

TEST(Gather, PartialViewOfKnownIndicesDefersToTheGpuCheck) {
  // The uploaded tensor holds a bad value outside the view used: no error, since the view never reaches it.
  const auto xh = random_host({4, 3});
  const Tensor x = upload(xh);
  std::vector<int32_t> idx = {0, 1, 2, 3, 99, 99};
  const Tensor all = Tensor::from_host(test::device(), {2, 3}, idx);
  const Tensor y = ops::gather(x, 0, all.slice(0, 0, 1));
  // Its values are x[0][0], x[1][1], x[2][2], exactly.
  EXPECT_TRUE(all_close(y, ref::gather(xh, 0, ref::HostTensor({1, 3}, {0, 1, 2})), 0, 0));
  // The other row reaches it: the GPU check catches it.
  EXPECT_THROW(ops::gather(x, 0, all.slice(0, 1, 2)).to_host_f32(), ArgumentError);
}

TEST(Gather, RejectsBadShapes) {
  const Tensor x = upload(random_host({4, 3}));
  EXPECT_THROW(ops::gather(x, 0, upload_i32(random_ints({2}, 0, 1))), ArgumentError);
  EXPECT_THROW(ops::gather(x, 0, upload_i32(random_ints({2, 4}, 0, 1))), ArgumentError);
  EXPECT_THROW(ops::gather(x, 0, upload(random_host({2, 3}))), ArgumentError);
  EXPECT_THROW(ops::gather(x, 2, upload_i32(random_ints({2, 3}, 0, 1))), ArgumentError);
}

}  // namespace
}  // namespace wgtrain
