// Device::record and Recording::replay: recorded work replays exactly, with new inputs written between replays,
// without new buffers, pipelines or host checks; the buffers a recording uses are never handed to other work.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/reference.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::all_close;
using test::device;
using test::random_host;
using test::upload;

ref::HostTensor chain_ref(const ref::HostTensor& x, const ref::HostTensor& w) {
  // y = sum(exp(x * w) + 1, dim 1)
  return ref::reduce(ref::binary_scalar("add", ref::unary("exp", ref::binary("mul", x, w)), 1.0), {1}, false, false);
}

// A float64 reference of one float32 operation, rounded as the GPU rounds it (exact comparison).
ref::HostTensor as_f32(ref::HostTensor t) {
  for (auto& v : t.data) v = static_cast<float>(v);
  return t;
}

TEST(Recording, ReplaysWithNewInputsAndNoNewBuffersOrPipelines) {
  Device& dev = device();
  const Shape shape = {7, 13};
  const Tensor x = Tensor::empty(dev, shape);
  const ref::HostTensor w_host = random_host(shape);
  const Tensor w = upload(w_host);
  Tensor y;
  const auto before = dev.stats();
  const Recording rec = dev.record([&] { y = ops::sum(ops::add(ops::exp(ops::mul(x, w)), 1.0f), {1}); });
  EXPECT_EQ(dev.stats().dispatches, before.dispatches) << "recording must not run anything";
  EXPECT_EQ(rec.dispatches(), 4u);
  for (int round = 0; round < 3; ++round) {
    const ref::HostTensor xh = random_host(shape);
    const std::vector<float> xf(xh.data.begin(), xh.data.end());
    x.write(xf);
    const auto mid = dev.stats();
    rec.replay();
    EXPECT_TRUE(all_close(y, chain_ref(xh, w_host), 1e-5, 1e-5)) << "round " << round;
    const auto after = dev.stats();
    EXPECT_EQ(after.dispatches - mid.dispatches, 4u);
    EXPECT_EQ(after.pipelines_created, mid.pipelines_created);
    // The read-back staging buffer may be new once; the replay itself allocates nothing.
    EXPECT_LE(after.buffers_created - mid.buffers_created, round == 0 ? 1u : 0u);
  }
}

TEST(Recording, ReusesItsOwnTemporariesButKeepsHostDataAndEarlierTensors) {
  Device& dev = device();
  const int64_t n = 1031;
  const ref::HostTensor xh = random_host({n});
  const Tensor x = upload(xh);
  const ref::HostTensor ch = random_host({n});
  Tensor y, z;
  const auto before = dev.stats();
  const Recording rec = dev.record([&] {
    {
      const Tensor c = upload(ch);  // a constant of the recording, dropped right away
      y = ops::add(x, c);
    }
    Tensor t = y;
    for (int k = 0; k < 30; ++k) t = ops::mul(t, 1.0f);  // 30 temporaries of c's size
    z = t;
  });
  // Temporaries were recycled inside the recording (2 live at a time), and c's buffer was not among them.
  EXPECT_LT(dev.stats().buffers_created - before.buffers_created, 8u);
  for (int round = 0; round < 3; ++round) {
    rec.replay();
    const ref::HostTensor want = as_f32(ref::binary("add", xh, ch));
    EXPECT_TRUE(all_close(y, want, 0, 0)) << "round " << round;
    EXPECT_TRUE(all_close(z, want, 0, 0)) << "round " << round;
  }
}

TEST(Recording, KeepsTheBuffersItReferencesFromOtherWork) {
  Device& dev = device();
  const int64_t n = 4099;
  const ref::HostTensor xh = random_host({n});
  Tensor y;
  Recording rec;
  {
    const Tensor x = upload(xh);
    rec = dev.record([&] { y = ops::add(x, 1.0f); });
  }  // x's last handle is gone: the recording still reads its buffer
  dev.synchronize();
  std::vector<Tensor> others;
  for (int k = 0; k < 8; ++k) others.push_back(ops::full(dev, {n}, 7.0, DType::F32));
  Tensor y_copy;
  {
    // The output too stays the recording's after the caller drops it.
    const Recording r2 = dev.record([&] { y_copy = ops::mul(y, 1.0f); });
    rec.replay();
    r2.replay();
  }
  EXPECT_TRUE(all_close(y_copy, as_f32(ref::binary_scalar("add", xh, 1.0)), 0, 0));
  for (const Tensor& t : others) EXPECT_TRUE(all_close(t, ref::HostTensor({n}, std::vector<double>(n, 7.0)), 0, 0));
}

TEST(Recording, HostStepsInsideARecordingAreErrorsAndLeaveTheDeviceUsable) {
  Device& dev = device();
  const Tensor x = upload(random_host({5}));
  EXPECT_THROW(dev.record([&] { (void)ops::add(x, 1.0f).to_host_f32(); }), Error);
  const std::vector<float> v(5, 1.0f);
  EXPECT_THROW(dev.record([&] { x.write(v); }), Error);
  EXPECT_THROW(dev.record([&] { dev.record([] {}); }), Error);
  // Eager work still runs after the aborted recordings.
  EXPECT_EQ(ops::add(x, 0.0f).to_host_f32(), x.to_host_f32());
  EXPECT_THROW(Recording{}.replay(), ArgumentError);
}

TEST(Recording, IndexErrorsOfAReplayAreReportedAtTheNextReadBack) {
  Device& dev = device();
  const Tensor table = upload(random_host({10, 3}));
  const Tensor idx = Tensor::empty(dev, {4}, DType::I32);
  Tensor out;
  const Recording rec = dev.record([&] { out = ops::embedding(table, idx); });
  const std::vector<int32_t> good = {0, 9, 3, 3}, bad = {0, 10, 3, 3};
  idx.write(good);
  rec.replay();
  EXPECT_NO_THROW(out.to_host_f32());
  idx.write(bad);
  rec.replay();
  try {
    (void)out.to_host_f32();
    ADD_FAILURE() << "an out-of-range index passed";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("embedding"), std::string::npos) << e.what();
  }
  idx.write(good);
  rec.replay();
  EXPECT_NO_THROW(out.to_host_f32());
}

}  // namespace
}  // namespace wgtrain
