// Helpers shared by the GPU tests: one device per test process (poison on), fresh random inputs with a printed
// seed, and comparison against float64 references with a per-element tolerance.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "ops/reference.h"
#include "wgtrain/device.h"
#include "wgtrain/tensor.h"

namespace wgtrain::test {

// The device every test in this process shares. Opened with poison on: every buffer an op gets starts as 0xFF
// bytes (NaN), so an element a kernel forgets to write fails the comparison.
Device& device();
// The native Vulkan device every test in this process shares (lavapipe in CI), opened with poison on, and with
// cooperative matrices enabled where the device offers them but off (features().cooperative_matrix) until a test
// switches them on.
Device& native_device();
bool& native_coopmat_offered();
// The device the mixed-precision tests share: opened for --precision mixed (Dawn's subgroup matrices and their
// toggles where offered), poison on, never destroyed.
Device& mixed_device();

// Inputs are fresh on every run; WGTRAIN_TEST_SEED=<n> replays one. The seed is in every comparison failure.
uint64_t seed();
std::mt19937_64& rng();

ref::HostTensor random_host(const Shape& shape, double lo = -1.0, double hi = 1.0);
Tensor upload(const ref::HostTensor& t);
Tensor upload_i32(const ref::HostTensor& t);   // values must be integers
Tensor upload_bool(const ref::HostTensor& t);  // nonzero is true
ref::HostTensor random_ints(const Shape& shape, int lo, int hi);  // uniform in [lo, hi]
// Exact comparison of an int32 or bool tensor with a reference.
::testing::AssertionResult all_equal(const Tensor& got, const ref::HostTensor& want);
ref::HostTensor download(const Tensor& t);

// Elementwise |got - want| <= atol + rtol * scale, where scale is `scale` if given, else |want|. NaN where want
// is NaN is a match; anywhere else it is a failure (an unwritten, poisoned element).
::testing::AssertionResult all_close(const Tensor& got, const ref::HostTensor& want, double atol, double rtol,
                                     const ref::HostTensor* scale = nullptr);
// The same for values already read back, of shape `shape`.
::testing::AssertionResult all_close(const std::vector<float>& got, const Shape& shape, const ref::HostTensor& want,
                                     double atol, double rtol, const ref::HostTensor* scale = nullptr);

// A few awkward sizes around the kernels' tiles and workgroups.
std::string shape_label(const Shape& s);

}  // namespace wgtrain::test
