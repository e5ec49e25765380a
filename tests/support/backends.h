// The training kernels as each backend offers them (WebGPU through Dawn, and the native Vulkan backend), behind one
// set of names, so that a test body written once as a template runs the same cases on both:
//
//   INSTANTIATE_TEST_SUITE_P(..., ::testing::Combine(cases, ::testing::ValuesIn(test::kBackends)));
//   test::with_backend(name, [&](auto b) { using B = decltype(b); check<B>(...); });
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpu/device_impl.h"
#include "support/test_support.h"
#include "vulkan/context.h"
#include "wgtrain/adamw.h"
#include "wgtrain/fused_ce.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/vulkan.h"

namespace wgtrain::test {

// The native Vulkan device every test in this process shares (lavapipe in CI), opened with poison on, and with
// cooperative matrices enabled where the device offers them but off until a test switches them on (ctx().coopmat).
vk::Device& vk_device();

inline const std::vector<std::string> kBackends = {"webgpu", "vulkan"};

struct WebGpu {
  using T = wgtrain::Tensor;
  using Q4 = wgtrain::Q4Weight;
  using CE = wgtrain::ops::CrossEntropy;
  using AdamWParam = wgtrain::ops::AdamWParam;
  static T upload(const ref::HostTensor& h) { return test::upload(h); }
  static T upload_i32(const Shape& s, const std::vector<int32_t>& v) { return T::from_host(device(), s, v); }
  static T zeros(const Shape& s) { return ops::full(device(), s, 0.0); }
  static T empty(const Shape& s) { return T::empty(device(), s); }
  static T slice(const T& t, int64_t a, int64_t b) { return t.slice(0, a, b); }
  static Q4 upload_q4(const std::vector<uint8_t>& bytes, const std::vector<float>& scales, int64_t n, int64_t k,
                      int64_t g) {
    return q4gsw::upload(device(), bytes, scales, n, k, g);
  }
  static std::vector<uint8_t> q4_bytes(const Q4& w) { return q4gsw::download_bytes(w); }
  static T linear_q4gsw(const T& x, const Q4& w) { return ops::linear_q4gsw(x, w); }
  static T linear_q4gsw_backward(const T& dy, const Q4& w) { return ops::linear_q4gsw_backward(dy, w); }
  static T linear_dW(const T& dy, const T& x, const T* acc = nullptr) { return ops::linear_dW(dy, x, acc); }
  static void q4gsw_requant(const T& latent, Q4& w, bool recompute) { ops::q4gsw_requant(latent, w, recompute); }
  static CE fused_ce(const T& logits, const T& labels, std::optional<int64_t> n = std::nullopt, bool in_place = false) {
    return ops::fused_ce(logits, labels, n, in_place);
  }
  static void adamw_step(const std::vector<AdamWParam>& p, const ops::AdamWOptions& o, int64_t step) {
    ops::adamw_step(p, o, step);
  }
  static void copy_(const T& dst, const T& src) { ops::copy_(dst, src); }
  static void set_split_k(int v) { device().impl().split_k = v; }
  static uint64_t dispatches() {
    device().synchronize();
    return device().stats().dispatches;
  }
};

struct Vulkan {
  using T = vk::Tensor;
  using Q4 = vk::Q4Weight;
  using CE = vk::ops::CrossEntropy;
  using AdamWParam = vk::ops::AdamWParam;
  static T upload(const ref::HostTensor& h) {
    const std::vector<float> f(h.data.begin(), h.data.end());
    return T::from_host(vk_device(), h.shape, f);
  }
  static T upload_i32(const Shape& s, const std::vector<int32_t>& v) { return T::from_host(vk_device(), s, v); }
  static T zeros(const Shape& s) { return vk::ops::full(vk_device(), s, 0.0); }
  static T empty(const Shape& s) { return T::empty(vk_device(), s); }
  static T slice(const T& t, int64_t a, int64_t b) { return t.slice(a, b); }
  static Q4 upload_q4(const std::vector<uint8_t>& bytes, const std::vector<float>& scales, int64_t n, int64_t k,
                      int64_t g) {
    return vk::upload_q4(vk_device(), bytes, scales, n, k, g);
  }
  static std::vector<uint8_t> q4_bytes(const Q4& w) { return vk::download_q4_bytes(w); }
  static T linear_q4gsw(const T& x, const Q4& w) { return vk::ops::linear_q4gsw(x, w); }
  static T linear_q4gsw_backward(const T& dy, const Q4& w) { return vk::ops::linear_q4gsw_backward(dy, w); }
  static T linear_dW(const T& dy, const T& x, const T* acc = nullptr) { return vk::ops::linear_dW(dy, x, acc); }
  static void q4gsw_requant(const T& latent, Q4& w, bool recompute) { vk::ops::q4gsw_requant(latent, w, recompute); }
  static CE fused_ce(const T& logits, const T& labels, std::optional<int64_t> n = std::nullopt, bool in_place = false) {
    return vk::ops::fused_ce(logits, labels, n, in_place);
  }
  static void adamw_step(const std::vector<AdamWParam>& p, const ops::AdamWOptions& o, int64_t step) {
    vk::ops::adamw_step(p, o, step);
  }
  static void copy_(const T& dst, const T& src) { vk::ops::copy_(dst, src); }
  static void set_split_k(int v) { vk_device().ctx().split_k = v; }
  static uint64_t dispatches() {
    vk_device().synchronize();
    return vk_device().stats().dispatches;
  }
};

template <class F>
void with_backend(const std::string& name, F&& f) {
  if (name == "vulkan")
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
