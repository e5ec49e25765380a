// Dim-order copy, expand_copy, fill, cat, slice assignment and slicing views: exact, bit for bit for every dtype.
#include <gtest/gtest.h>

#include <type_traits>

#include <algorithm>
#include <bit>
#include <numeric>

#include "ops/reference.h"
#include "ops/shape/transpose_force.h"
#include "support/backends.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::all_equal;
using test::random_host;
using test::random_ints;
using test::upload;

TEST(Contiguous, EveryPermutationOfARank4Tensor) {
  const auto x = random_host({2, 3, 5, 7});
  std::vector<int> dims = {0, 1, 2, 3};
  do {
    const Tensor y = ops::contiguous(upload(x).permute(dims));
    EXPECT_TRUE(y.is_contiguous());
    EXPECT_TRUE(all_close(y, ref::permute(x, dims), 0, 0)) << dims[0] << dims[1] << dims[2] << dims[3];
  } while (std::next_permutation(dims.begin(), dims.end()));
}

TEST(Contiguous, MovesInt32BitsExactly) {
  // Values whose bits are NaN patterns as floats must survive: copies move words, not floats.
  std::vector<int32_t> v = {INT32_MIN, -1, 0x7fc00001, 0x7f800001, static_cast<int32_t>(0xffc00000u), 12345, 0};
  const Tensor t = Tensor::from_host(test::device(), {7, 1}, v).transpose(0, 1);
  EXPECT_EQ(ops::contiguous(t).to_host_i32(), v);
  EXPECT_EQ(ops::expand_copy(Tensor::from_host(test::device(), {7}, v), {2, 7}).to_host_i32().back(), v.back());
}

TEST(ExpandCopy, MaterialisesABroadcast) {
  const auto x = random_host({3, 1, 4});
  const Tensor y = ops::expand_copy(upload(x), {2, 3, 5, 4});
  EXPECT_TRUE(all_close(y, ref::expand(x, {2, 3, 5, 4}), 0, 0));
  EXPECT_THROW(ops::expand_copy(upload(x), {3, 2, 5}), ArgumentError);
}

TEST(Fill, EveryDtype) {
  auto& dev = test::device();
  for (float v : ops::full(dev, {1031}, -2.5).to_host_f32()) ASSERT_EQ(v, -2.5f);
  for (int32_t v : ops::full(dev, {3, 5}, -7, DType::I32).to_host_i32()) ASSERT_EQ(v, -7);
  for (int32_t v : ops::full(dev, {4}, 1, DType::Bool).to_host_i32()) ASSERT_EQ(v, 1);
  const Tensor like = upload(random_host({2, 3})).transpose(0, 1);
  const Tensor f = ops::fill(like, 3.0);
  EXPECT_EQ(f.shape(), (Shape{3, 2}));
  for (float v : f.to_host_f32()) ASSERT_EQ(v, 3.0f);
  EXPECT_THROW(ops::full(dev, {2}, 0.5, DType::I32), ArgumentError);
}

class FillOn : public ::testing::TestWithParam<std::string> {};

TEST_P(FillOn, FillsEveryElementOfEveryDtype) {
  test::with_backend(GetParam(), [](auto b) {
    using B = decltype(b);
    for (float v : ops::full(B::device(), {1031}, -2.5).to_host_f32()) ASSERT_EQ(v, -2.5f);
    for (int32_t v : ops::full(B::device(), {3, 5}, -7, DType::I32).to_host_i32()) ASSERT_EQ(v, -7);
    for (int32_t v : ops::full(B::device(), {4}, 1, DType::Bool).to_host_i32()) ASSERT_EQ(v, 1);
    EXPECT_THROW(ops::full(B::device(), {2}, 0.5, DType::I32), ArgumentError);
    // copy_ between two tensors of one size (a slice of an arena, here).
    const auto src = test::random_host({6});
    const auto dst = B::zeros({10});
    B::copy_(B::slice(dst, 2, 8), B::upload(src));
    const auto got = dst.to_host_f32();
    for (int i = 0; i < 10; ++i) EXPECT_EQ(got[i], i >= 2 && i < 8 ? static_cast<float>(src.data[i - 2]) : 0.0f) << i;
  });
}

// Reading a strided view back gathers it on the host: no kernel, so it works on a backend without the copy kernels.
TEST_P(FillOn, StridedViewsReadBackAsTheyIndex) {
  test::with_backend(GetParam(), [](auto b) {
    using B = decltype(b);
    const auto h = test::random_host({5, 7, 3});
    const auto t = B::upload(h);
    const auto at = [&](int64_t i, int64_t j, int64_t k) { return static_cast<float>(h.data[(i * 7 + j) * 3 + k]); };
    const auto p = t.permute({2, 0, 1}).slice(2, 1, 7, 2);  // [3, 5, 3]: k, i, j = 1 + 2 m
    const auto got = p.to_host_f32();
    ASSERT_EQ(got.size(), 45u);
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t m = 0; m < 3; ++m) ASSERT_EQ(got[(k * 5 + i) * 3 + m], at(i, 1 + 2 * m, k)) << k << i << m;
    const auto e = t.slice(0, 4, 5).expand({3, 7, 3}).to_host_f32();  // a broadcast (stride 0) view
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t j = 0; j < 21; ++j) ASSERT_EQ(e[r * 21 + j], at(4, j / 3, j % 3));
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, FillOn, ::testing::ValuesIn(test::kBackends));

TEST(Fill, InPlaceOnAContiguousViewOnly) {
  const auto x = random_host({5, 7});
  const Tensor t = upload(x);
  ops::fill_(t.slice(0, 1, 3), 0.25);  // rows 1 and 2: a contiguous view at an offset
  ref::HostTensor want = x;
  for (int64_t i = 7; i < 21; ++i) want.data[i] = 0.25;
  EXPECT_TRUE(all_close(t, want, 0, 0));
  EXPECT_THROW(ops::fill_(t.transpose(0, 1), 1.0), ArgumentError);
}

TEST(Cat, AlongEveryDim) {
  for (int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    Shape sa = {2, 3, 4}, sb = sa, sc = sa;
    const int d = dim < 0 ? dim + 3 : dim;
    sa[d] = 1;
    sb[d] = 5;
    sc[d] = 0;
    const auto a = random_host(sa), b = random_host(sb), c = random_host(sc);
    const Tensor got = ops::cat({upload(a), upload(b), upload(c)}, dim);
    EXPECT_TRUE(all_close(got, ref::cat({a, b, c}, dim), 0, 0));
  }
  EXPECT_THROW(ops::cat({upload(random_host({2, 3})), upload(random_host({3, 3}))}, 1), ArgumentError);
  EXPECT_THROW(ops::cat({}, 0), ArgumentError);
}

TEST(Cat, RotateHalfAsRopeUsesIt) {
  // rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]) over strided slices.
  const auto x = random_host({3, 8});
  const Tensor xt = upload(x);
  const Tensor got = ops::cat({ops::neg(xt.slice(1, 4, 8)), xt.slice(1, 0, 4)}, -1);
  ref::HostTensor want({3, 8});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      want.data[i * 8 + j] = -x.data[i * 8 + 4 + j];
      want.data[i * 8 + 4 + j] = x.data[i * 8 + j];
    }
  EXPECT_TRUE(all_close(got, want, 0, 0));
}

TEST(Copy, IntoASliceOfAnotherTensor) {
  const auto base = random_host({4, 6}), src = random_host({4, 2});
  const Tensor dst = upload(base);
  ops::copy_(dst.slice(1, 3, 5), upload(src));
  ref::HostTensor want = base;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) want.data[i * 6 + 3 + j] = src.data[i * 2 + j];
  EXPECT_TRUE(all_close(dst, want, 0, 0));
  // Within one tensor (source and destination share a buffer), and from a broadcast source.
  ops::copy_(dst.slice(0, 0, 1), dst.slice(0, 3, 4));
  ops::copy_(dst.slice(1, 0, 1), upload(ref::HostTensor({}, {9.0})));
  const auto got = dst.to_host_f32();
  for (int j = 1; j < 6; ++j) EXPECT_EQ(got[j], got[3 * 6 + j]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i * 6], 9.0f);
  EXPECT_THROW(ops::copy_(upload(random_host({1})).expand({3}), upload(random_host({3}))), ArgumentError);
}

// What a view reads, from the host copy of its storage and the view's own shape, strides and offset.
std::vector<float> gather(const std::vector<float>& storage, const Tensor& view) {
  std::vector<float> out(static_cast<size_t>(view.numel()));
  for (int64_t i = 0; i < view.numel(); ++i) {
    int64_t rem = i, at = view.offset();
    for (int k = view.rank() - 1; k >= 0; --k) {
      at += (rem % view.shape()[k]) * view.strides()[k];
      rem /= view.shape()[k];
    }
    out[static_cast<size_t>(i)] = storage[static_cast<size_t>(at)];
  }
  return out;
}

// The copies that transpose (the output's innermost dim strided in the source: the tiled kernel) and those that
// move whole rows (innermost dim contiguous in both: 16-byte words where aligned), at sizes off the 32 x 32 tile,
// from views at offsets, into poisoned outputs; exact. Each tile of the tiled kernels (ops/shape/transpose_force.h)
// forced in turn (the 128 x 32 tile where the device grants the workgroup memory; the 16-byte one where every
// extent, stride and offset is a multiple of 4 words), then the op's choice.
void transposing_copies_at_awkward_shapes();
TEST(Contiguous, TransposingCopiesAtAwkwardShapes) {
  namespace od = ops::detail;
  for (int tile : {1, 2, 4, od::kTransposeVec4, od::kTransposeChoice}) {
    SCOPED_TRACE("transpose tile " + std::to_string(tile));
    if (tile == 4 && 4 * 32 * 33 * 4 > test::device().limits().max_workgroup_storage) continue;
    od::transpose_force = tile;
    transposing_copies_at_awkward_shapes();
  }
  od::transpose_force = od::kTransposeChoice;
}

void transposing_copies_at_awkward_shapes() {
  struct Case {
    Shape storage;
    std::vector<int> dims;
    int slice_dim;
    int64_t slice_start;
  };
  const Case cases[] = {
      {{33, 65}, {1, 0}, -1, 0},                 // one tile and a bit, both ways
      {{8, 8}, {1, 0}, -1, 0},                   // the smallest tiled copy
      {{70, 31}, {1, 0}, 0, 3},                  // an offset view: rows 3..69
      {{3, 37, 41}, {0, 2, 1}, -1, 0},           // a batch of transposes
      {{12, 40, 9}, {2, 1, 0}, 0, 1},            // b outside the batch dim, at an offset
      {{2, 9, 45, 50}, {0, 3, 2, 1}, 2, 7},      // rank 4, two batch dims
      {{4, 33, 10, 40}, {1, 3, 0, 2}, -1, 0},    // the innermost output dim from a middle source dim
      {{2, 35, 4, 8}, {0, 2, 1, 3}, -1, 0},      // head layout: rows of 8 words (vec4 copy)
      {{2, 35, 4, 8}, {0, 2, 1, 3}, 1, 1},       // the same at an offset of 32 words (vec4)
      {{2, 35, 3, 6}, {0, 2, 1, 3}, 1, 1},       // rows of 6 words (one word at a time)
      {{2, 35, 4, 8}, {0, 2, 1, 3}, 3, 2},       // rows cut to 6 words at an offset of 2
      {{200, 70}, {1, 0}, 0, 5},                 // 195 along a: tiles of 64 and 128 words, the last one partial
      {{2, 129, 33}, {0, 2, 1}, -1, 0},          // a batch, 129 along a
      {{20, 300}, {1, 0}, -1, 0},                // 10 tiles along b
      // Everything a multiple of 4 words: the 16-byte tiles where forced (kTransposeVec4), partial ones included.
      {{68, 132}, {1, 0}, -1, 0},                // 2 x 3 tiles of 64, the last ones partial
      {{72, 136}, {1, 0}, 0, 4},                 // at an offset of 4 rows
      {{3, 36, 200}, {0, 2, 1}, -1, 0},          // a batch of transposes
      {{2, 12, 8, 132}, {0, 3, 2, 1}, 2, 4},     // rank 4, two batch dims, at an offset
      {{8, 260}, {1, 0}, -1, 0},                 // 5 tiles along a, one row of tiles
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.storage));
    const auto host = random_host(c.storage);
    const std::vector<float> values(host.data.begin(), host.data.end());
    Tensor view = upload(host);
    if (c.slice_dim >= 0) view = view.slice(c.slice_dim, c.slice_start, c.storage[c.slice_dim]);
    view = view.permute(c.dims);
    const Tensor got = ops::contiguous(view);
    ASSERT_TRUE(got.is_contiguous());
    EXPECT_EQ(got.to_host_f32(), gather(values, view));
    // copy_ into rows 2.. of a poisoned tensor: a destination at an offset, every element written.
    Shape big = view.shape();
    big[0] += 2;
    const Tensor out = Tensor::empty(test::device(), big);
    const Tensor dst = out.slice(0, 2, big[0]);
    ops::copy_(dst, view);
    EXPECT_EQ(dst.to_host_f32(), gather(values, view));
  }
  // Int32 words whose bits are NaN patterns as floats, through the tiled kernel.
  std::vector<int32_t> words(40 * 17);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<int32_t>(0x7fc00001u + i * 2654435761u);
  const Tensor w = Tensor::from_host(test::device(), {40, 17}, words).transpose(0, 1);
  const std::vector<int32_t> got = ops::contiguous(w).to_host_i32();
  for (int64_t i = 0; i < 17; ++i)
    for (int64_t j = 0; j < 40; ++j) ASSERT_EQ(got[i * 40 + j], words[j * 17 + i]) << i << " " << j;
}

TEST(Slice, StepsAndNegativeBounds) {
  const auto x = random_host({10});
  const auto got = upload(x).slice(0, -8, -1, 3).to_host_f32();  // elements 2, 5, 8
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], static_cast<float>(x.data[2]));
  EXPECT_EQ(got[1], static_cast<float>(x.data[5]));
  EXPECT_EQ(got[2], static_cast<float>(x.data[8]));
  EXPECT_THROW(upload(x).slice(0, 0, 5, 0), ArgumentError);
  EXPECT_THROW(upload(x).reshape({3, 3}), ArgumentError);
  EXPECT_EQ(upload(x).reshape({2, -1}).shape(), (Shape{2, 5}));
}

}  // namespace
}  // namespace wgtrain
