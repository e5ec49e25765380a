// The GPU layer: adapter and limits, buffers and the pool, poisoning, batching, the pipeline cache, and device
// errors turned into exceptions that name the op.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "gpu/device_impl.h"
#include "gpu/webgpu_backend.h"
#include "support/test_support.h"
#include "wgtrain/error.h"
#include "wgtrain/ops.h"

namespace wgtrain {
namespace {

using test::device;
using test::random_host;
using test::upload;

TEST(Device, OpensAnAdapterWithTheLimitsKernelsNeed) {
  const auto& info = device().info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_NE(info.backend, Backend::Auto);
  const auto& l = device().limits();
  EXPECT_GE(l.max_invocations_per_workgroup, 256u);
  EXPECT_GE(l.max_workgroup_storage, 16u * 1024);
  EXPECT_GE(l.max_storage_buffers_per_stage, 4u);
  EXPECT_GE(l.max_workgroups_per_dim, 65535u);
  EXPECT_GE(l.max_storage_binding_size, 128u << 20);
}

TEST(Device, BackendNamesParse) {
  for (Backend b : {Backend::Auto, Backend::WebGpu, Backend::WebGpuVulkan, Backend::WebGpuOpenGL,
                    Backend::WebGpuOpenGLES, Backend::NativeVulkan})
    EXPECT_EQ(parse_backend(backend_name(b)), b) << backend_name(b);
  EXPECT_EQ(parse_backend("WebGPU-Vulkan"), Backend::WebGpuVulkan);
  EXPECT_THROW(parse_backend("metal2"), ArgumentError);
  // The old spellings meant two different things; each is refused with the new name(s) in the message.
  try {
    parse_backend("vulkan");
    ADD_FAILURE() << "'vulkan' parsed";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("native-vulkan"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("webgpu-vulkan"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_backend("opengl"), ArgumentError);
}

TEST(Device, ForcingAnAbsentBackendFailsWithWhatWasTried) {
  // This machine's backend is known; forcing a different one either works (a GPU machine) or says why not.
  DeviceOptions o;
  o.backend = device().info().backend == Backend::WebGpuVulkan ? Backend::WebGpuOpenGLES : Backend::WebGpuVulkan;
  try {
    Device other = Device::open(o);
    EXPECT_EQ(other.info().backend, o.backend);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable WebGPU adapter"), std::string::npos) << e.what();
  }
}

TEST(Device, UploadDownloadRoundTripsAtOddSizes) {
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{255}, int64_t{257}, int64_t{100003},
                    (int64_t{64} << 20) / 4 + 3}) {  // the last crosses a 64 MiB transfer chunk
    std::vector<float> f(n);
    std::vector<int32_t> i(n);
    for (int64_t k = 0; k < n; ++k) {
      f[k] = static_cast<float>(k) * 0.5f - 7.0f;
      i[k] = static_cast<int32_t>(k * 7919 - 123456);
    }
    EXPECT_EQ(Tensor::from_host(device(), {n}, f).to_host_f32(), f);
    EXPECT_EQ(Tensor::from_host(device(), {n}, i).to_host_i32(), i);
  }
}

TEST(Device, FreshBuffersArePoisoned) {
  const auto f = Tensor::empty(device(), {37}).to_host_f32();
  for (float v : f) EXPECT_TRUE(std::isnan(v));
  const auto i = Tensor::empty(device(), {5}, DType::I32).to_host_i32();
  for (int32_t v : i) EXPECT_EQ(v, -1);
}

TEST(Device, OpsAreBatchedUntilARead) {
  const Tensor a = upload(random_host({1000}));
  device().synchronize();
  const auto before = device().stats();
  Tensor x = a;
  for (int k = 0; k < 50; ++k) x = ops::add(x, 1.0f);
  const auto mid = device().stats();
  EXPECT_EQ(mid.submits, before.submits) << "recording ops must not submit";
  EXPECT_EQ(mid.dispatches, before.dispatches + 50);
  const auto got = x.to_host_f32();
  EXPECT_EQ(device().stats().submits, before.submits + 1) << "one submit for the whole batch";
  const auto want = a.to_host_f32();
  for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], want[k] + 50.0f, 1e-4);
}

TEST(Device, PoolReusesBuffers) {
  { Tensor warm = Tensor::empty(device(), {4096}); }  // first use may create the uniform staging buffer too
  device().synchronize();
  const auto before = device().stats();
  for (int k = 0; k < 20; ++k) {
    { Tensor t = Tensor::empty(device(), {4096}); }
    device().flush();  // released buffers rejoin the pool at a submit
  }
  const auto after = device().stats();
  EXPECT_EQ(after.buffers_created, before.buffers_created);
  EXPECT_GE(after.pool_hits - before.pool_hits, 20u);
}

TEST(Device, OpOutputsReuseBuffersWithinABatch) {
  // A chain of ops recorded without a submit: each output may take the buffer its predecessor released, since the
  // dispatches run in order. The pool must not grow with the chain's length.
  const Tensor a = upload(random_host({1 << 16}));
  Tensor x = ops::add(a, 1.0f);
  device().synchronize();
  const auto before = device().stats();
  for (int k = 0; k < 100; ++k) x = ops::add(x, 1.0f);
  EXPECT_LE(device().stats().buffers_created - before.buffers_created, 2u);
  const auto got = x.to_host_f32();
  const auto want = a.to_host_f32();
  for (size_t i = 0; i < got.size(); i += 997) EXPECT_NEAR(got[i], want[i] + 101.0f, 1e-3);
}

TEST(Device, ABufferStillReadByRecordedWorkIsNotReused) {
  // y reads a; a is dropped before the batch is submitted; a new tensor written from the host must not land in
  // a's buffer before y is computed.
  std::vector<float> ones(2048, 1.0f), twos(2048, 2.0f);
  Tensor y;
  {
    Tensor a = Tensor::from_host(device(), {2048}, ones);
    y = ops::mul(a, 3.0f);
  }
  Tensor b = Tensor::from_host(device(), {2048}, twos);
  for (float v : y.to_host_f32()) ASSERT_EQ(v, 3.0f);
  for (float v : b.to_host_f32()) ASSERT_EQ(v, 2.0f);
}

TEST(Device, PipelinesAreCachedByVariant) {
  const Tensor a = upload(random_host({10}));
  ops::add(a, a);
  ops::add(a, 2.0f);
  const auto before = device().stats().pipelines_created;
  ops::add(a, a);
  ops::add(a, 2.0f);
  ops::add(upload(random_host({3, 7})), upload(random_host({7})));  // other shapes, same variant
  EXPECT_EQ(device().stats().pipelines_created, before);
  ops::sub(a, a);  // another variant of the same kernel, cached the first time it runs
  const auto after_sub = device().stats().pipelines_created;
  ops::sub(a, a);
  EXPECT_EQ(device().stats().pipelines_created, after_sub);
}

TEST(Device, TooLargeATensorIsRejectedBeforeAllocation) {
  const int64_t too_many = static_cast<int64_t>(device().limits().max_storage_binding_size / 4) + 1;
  try {
    Tensor::empty(device(), {too_many});
    FAIL() << "no error";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("more than this device can bind"), std::string::npos) << e.what();
  }
}

TEST(Device, ValidationErrorsNameTheOp) {
  auto& impl = device().impl();
  const auto& pipe = impl.pipeline("shape/fill", {});
  const auto x = random_host({4});
  const Tensor t = upload(x);
  uint32_t params[4] = {};
  // Two storage bindings where the kernel declares one: the device rejects the bind group.
  EXPECT_THROW(
      {
        try {
          impl.dispatch({"my-broken-op", &pipe, params, sizeof params, {{t.storage()->buffer}, {t.storage()->buffer}},
                         1, 1, 1});
        } catch (const GpuError& e) {
          EXPECT_NE(std::string(e.what()).find("my-broken-op"), std::string::npos) << e.what();
          throw;
        }
      },
      GpuError);
  // The device keeps working afterwards: an op's values are right (float32 addition rounds exactly as the
  // reference's sum rounded to float32).
  impl.flush();
  ref::HostTensor want = x;
  for (auto& v : want.data) v = static_cast<float>(v + 1.0);
  EXPECT_TRUE(test::all_close(ops::add(t, 1.0f), want, 0, 0));
}

TEST(Device, ShaderCompileErrorsAreReported) {
  auto& impl = detail::webgpu_backend(*device().impl().backend);
  try {
    impl.build_pipeline("broken-kernel", "@compute @workgroup_size(1) fn main() { let x: f32 = undefined_thing; }");
    FAIL() << "no error";
  } catch (const GpuError& e) {
    EXPECT_NE(std::string(e.what()).find("broken-kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("undefined_thing"), std::string::npos) << e.what();
  }
}

TEST(Device, KernelTemplatesRejectMissingAndUnusedKeys) {
  EXPECT_THROW(detail::render_kernel("k", "a {{X}} b", {}), Error);
  EXPECT_THROW(detail::render_kernel("k", "a b", {{"X", "1"}}), Error);
  EXPECT_EQ(detail::render_kernel("k", "a {{X}} b {{X}}", {{"X", "1"}}), "a 1 b 1");
  EXPECT_THROW(detail::kernel_source("no/such-kernel"), Error);
  EXPECT_FALSE(detail::embedded_kernels().empty());
}

TEST(Device, LostDeviceRaisesInsteadOfCrashing) {
  Device dev = Device::open();
  const std::vector<float> v(16, 1.0f);
  Tensor t = Tensor::from_host(dev, {16}, v);
  auto& w = detail::webgpu_backend(*dev.impl().backend);
  w.api.DeviceDestroy(w.device);
  EXPECT_THROW(
      {
        Tensor y = ops::add(t, 1.0f);
        y.to_host_f32();
      },
      DeviceLostError);
}

TEST(Device, TimingReportsElapsedTime) {
  // Enough work to be well above any timestamp quantisation (Dawn rounds timestamps), and the GPU's time for it is
  // at most the wall-clock time around it.
  const Tensor a = upload(random_host({512, 512})), b = upload(random_host({512, 512}));
  ops::mm(a, b);
  device().synchronize();
  const auto start = std::chrono::steady_clock::now();
  const auto t = device().time([&] {
    for (int k = 0; k < 8; ++k) ops::mm(a, b);
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(t.seconds, 0.0);
  EXPECT_LE(t.seconds, wall * 1.01);
  EXPECT_EQ(t.from_timestamps, device().features().timestamp_query);
}

}  // namespace
}  // namespace wgtrain
