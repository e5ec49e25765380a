#include "support/test_support.h"

#include "support/backends.h"
#include "wgtrain/precision.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace wgtrain::test {

Device& device() {
  // Never destroyed: tearing Dawn down from a static destructor at exit races llvmpipe's own exit handlers (a
  // segfault after the tests have passed, now and then).
  static Device* dev = [] {
    DeviceOptions o;
    o.poison = true;
    return new Device(Device::open(o));
  }();
  return *dev;
}

Device& native_device() {
  // Never destroyed, like the WebGPU device above (lavapipe shares Mesa's exit handlers).
  static Device* dev = [] {
    DeviceOptions o;
    o.backend = Backend::NativeVulkan;
    o.poison = true;
    // Cooperative matrices enabled where offered, but not in use: the tests that want them switch them on.
    o.cooperative_matrix = true;
    auto* d = new Device(Device::open(o));
    native_coopmat_offered() = d->impl().features.cooperative_matrix;
    d->impl().features.cooperative_matrix = false;
    return d;
  }();
  return *dev;
}

Device& mixed_device() {
  static Device* dev = [] {
    DeviceOptions o;
    o.poison = true;
    precision_options(o, Precision::Mixed);
    return new Device(Device::open(o));
  }();
  return *dev;
}

bool& native_coopmat_offered() {
  static bool offered = false;
  return offered;
}

uint64_t seed() {
  static const uint64_t s = [] {
    if (const char* env = std::getenv("WGTRAIN_TEST_SEED"); env && *env) return static_cast<uint64_t>(std::strtoull(env, nullptr, 10));
    return static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}();
  }();
  return s;
}

std::mt19937_64& rng() {
  static std::mt19937_64 g(seed());
  return g;
}

ref::HostTensor random_host(const Shape& shape, double lo, double hi) {
  ref::HostTensor t(shape);
  std::uniform_real_distribution<double> u(lo, hi);
  // Round to f32 so that the reference sees exactly what the GPU gets.
  for (auto& v : t.data) v = static_cast<float>(u(rng()));
  return t;
}

Tensor upload(const ref::HostTensor& t) {
  std::vector<float> f(t.data.begin(), t.data.end());
  return Tensor::from_host(device(), t.shape, f);
}

Tensor upload_i32(const ref::HostTensor& t) {
  std::vector<int32_t> v(t.data.begin(), t.data.end());
  return Tensor::from_host(device(), t.shape, v);
}

Tensor upload_bool(const ref::HostTensor& t) {
  std::vector<uint8_t> v(t.data.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.data[i] != 0;
  return Tensor::from_host_bool(device(), t.shape, v);
}

ref::HostTensor random_ints(const Shape& shape, int lo, int hi) {
  ref::HostTensor t(shape);
  std::uniform_int_distribution<int> u(lo, hi);
  for (auto& v : t.data) v = u(rng());
  return t;
}

::testing::AssertionResult all_equal(const Tensor& got_t, const ref::HostTensor& want) {
  if (got_t.shape() != want.shape)
    return ::testing::AssertionFailure() << "shape " << shape_str(got_t.shape()) << ", expected "
                                         << shape_str(want.shape);
  const auto got = got_t.to_host_i32();
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i)
    if (static_cast<double>(got[i]) != want.data[i]) {
      if (bad < 5) first << "\n  [" << i << "] got " << got[i] << ", expected " << want.data[i];
      ++bad;
    }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ; WGTRAIN_TEST_SEED="
                                       << seed() << first.str();
}

ref::HostTensor download(const Tensor& t) {
  const auto f = t.to_host_f32();
  return ref::HostTensor(t.shape(), std::vector<double>(f.begin(), f.end()));
}

std::string shape_label(const Shape& s) { return shape_str(s); }

::testing::AssertionResult all_close(const Tensor& got_t, const ref::HostTensor& want, double atol, double rtol,
                                     const ref::HostTensor* scale) {
  if (got_t.shape() != want.shape)
    return ::testing::AssertionFailure() << "shape " << shape_str(got_t.shape()) << ", expected "
                                         << shape_str(want.shape);
  return all_close(got_t.to_host_f32(), got_t.shape(), want, atol, rtol, scale);
}

::testing::AssertionResult all_close(const std::vector<float>& got, const Shape& shape, const ref::HostTensor& want,
                                     double atol, double rtol, const ref::HostTensor* scale) {
  if (shape != want.shape)
    return ::testing::AssertionFailure() << "shape " << shape_str(shape) << ", expected " << shape_str(want.shape);
  int64_t bad = 0;
  double worst = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want.data[i], g = got[i];
    const double s = scale ? scale->data[i] : std::fabs(w);
    const double tol = atol + rtol * s;
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::fabs(g - w) <= tol;  // false for NaN g
    if (!ok) {
      if (bad < 5) first << "\n  [" << i << "] got " << g << ", expected " << w << " (tol " << tol << ")";
      ++bad;
      if (std::isfinite(g)) worst = std::max(worst, std::fabs(g - w) / std::max(tol, 1e-300));
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ (worst at "
                                       << worst << "x the tolerance); WGTRAIN_TEST_SEED=" << seed() << first.str();
}

}  // namespace wgtrain::test
