// The two runtimes' devices (WebGPU through Dawn, and the native Vulkan backend) behind one set of names, so that a
// test body written once as a template runs the same cases on both. The ops are the same functions on either; only
// the device differs.
//
//   INSTANTIATE_TEST_SUITE_P(..., ::testing::Combine(cases, ::testing::ValuesIn(test::kBackends)));
//   test::with_backend(name, [&](auto b) { using B = decltype(b); check<B>(...); });
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpu/device_impl.h"
#include "support/test_support.h"
#include "wgtrain/adamw.h"
#include "wgtrain/fused_ce.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"

namespace wgtrain::test {

#ifdef __EMSCRIPTEN__
inline const std::vector<std::string> kBackends = {"webgpu"};  // the browser build has no native backend
#else
inline const std::vector<std::string> kBackends = {"webgpu", "native-vulkan"};
#endif

template <Device& (*Dev)()>
struct On {
  using T = wgtrain::Tensor;
  using Q4 = wgtrain::Q4Weight;
  using CE = wgtrain::ops::CrossEntropy;
  using AdamWParam = wgtrain::ops::AdamWParam;
  static Device& device() { return Dev(); }
  static T upload(const ref::HostTensor& h) {
    const std::vector<float> f(h.data.begin(), h.data.end());
    return T::from_host(Dev(), h.shape, f);
  }
  static T upload_i32(const Shape& s, const std::vector<int32_t>& v) { return T::from_host(Dev(), s, v); }
  static T zeros(const Shape& s) { return ops::full(Dev(), s, 0.0); }
  static T empty(const Shape& s) { return T::empty(Dev(), s); }
  static T slice(const T& t, int64_t a, int64_t b) { return t.slice(0, a, b); }
  static Q4 upload_q4(const std::vector<uint8_t>& bytes, const std::vector<float>& scales, int64_t n, int64_t k,
                      int64_t g) {
    return q4gsw::upload(Dev(), bytes, scales, n, k, g);
  }
  static std::vector<uint8_t> q4_bytes(const Q4& w) { return q4gsw::download_bytes(w); }
  static T linear_q4gsw(const T& x, const Q4& w) { return ops::linear_q4gsw(x, w); }
  static T linear_q4gsw_backward(const T& dy, const Q4& w, const T* acc = nullptr) {
    return ops::linear_q4gsw_backward(dy, w, acc);
  }
  static T linear_dW(const T& dy, const T& x, const T* acc = nullptr) { return ops::linear_dW(dy, x, acc); }
  static void q4gsw_requant(const T& latent, Q4& w, bool recompute) { ops::q4gsw_requant(latent, w, recompute); }
  static CE fused_ce(const T& logits, const T& labels, std::optional<int64_t> n = std::nullopt, bool in_place = false) {
    return ops::fused_ce(logits, labels, n, in_place);
  }
  static void adamw_step(const std::vector<AdamWParam>& p, const ops::AdamWOptions& o, int64_t step) {
    ops::adamw_step(p, o, step);
  }
  static void copy_(const T& dst, const T& src) { ops::copy_(dst, src); }
  static void set_split_k(int v) { Dev().impl().split_k = v; }
  static uint64_t dispatches() {
    Dev().synchronize();
    return Dev().stats().dispatches;
  }
};

using WebGpu = On<device>;
using Vulkan = On<native_device>;

template <class F>
void with_backend(const std::string& name, F&& f) {
  if (name == "native-vulkan")
    f(Vulkan{});
  else
    f(WebGpu{});
}

// all_close for a tensor of either backend.
template <class Tensor>
::testing::AssertionResult close_to(const Tensor& got, const ref::HostTensor& want, double atol, double rtol,
                                    const ref::HostTensor* scale = nullptr) {
  return all_close(got.to_host_f32(), got.shape(), want, atol, rtol, scale);
}

}  // namespace wgtrain::test
