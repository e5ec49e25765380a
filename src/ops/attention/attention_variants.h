// Which attention kernels run: the tiled (flash-attention 2) kernels in the first variant of attention.cpp's
// ordered tables that fits the device and the shape, else the row kernels. Internal: for tests and the benchmark.
#pragma once

#include <cstdint>
#include <string>

namespace wgtrain::detail {
struct DeviceImpl;
}

namespace wgtrain::ops::detail {

enum class AttentionKernel { Forward, BackwardDq, BackwardDkv };

// One tiled variant: WG invocations; `rows` of the workgroup's own (queries for the forward and dq, keys for dk/dv),
// `r` per invocation; `tile` rows of the other side staged through workgroup memory per step; `dot`: scores summed
// as scalars rather than vec4s; `ds` (dK/dV only): the dK/dV kernel also writes dS to a [B, H, L, T] scratch buffer
// and dq is dS k (backward_dq_ds.wgsl, after backward_delta.wgsl's D), the dq table's entry unused. The forward
// takes r = 4 and dot false only.
struct AttentionTiling {
  int wg, rows, tile;
  int r = 4;
  bool dot = false;
  bool ds = false;
};

// "WGxROWSxTILE", then "r8" where r is not 4, "d" with dot, "s" with ds: the benchmark's and the errors' name.
std::string attention_tiling_name(const AttentionTiling& t);

// The ordered table for a kernel (the first entry that fits is used) and its length.
const AttentionTiling* attention_tilings(AttentionKernel kernel, int* count);

// Bytes of workgroup storage the tiled kernel needs for this tiling at hd4 vec4s per head row.
int64_t attention_tiled_storage(AttentionKernel kernel, const AttentionTiling& t, int64_t hd4);
// The same for backward_dq_ds.wgsl (run after a dK/dV entry with ds), whose tiling is fixed.
int64_t attention_dq_ds_storage(int64_t hd4);

// For tests and the benchmark: kTableChoice (the default) picks as the op does; kRowKernels forces the row kernels;
// i >= 0 forces entry i of each kernel's table (an error if it does not fit the device or the shape);
// kSubgroupMatrix forces the subgroup-matrix kernels (an UnsupportedError saying why where they cannot run).
constexpr int kSubgroupMatrix = -3, kTableChoice = -2, kRowKernels = -1;
extern int attention_force;

// The subgroup-matrix kernels (forward_sm.wgsl, backward_dq_sm.wgsl, backward_dkv_sm.wgsl; f16 products with f32
// accumulation, mixed precision) run unforced wherever the device runs its GEMMs in mixed precision (gemm_sm_missing
// is empty), head_dim is a multiple of 16 up to 128, q, k, v (and dO) are vec4 views and the tiles fit the device's
// workgroup storage. Why they cannot run here, or "" where they can.
std::string attention_sm_missing(const wgtrain::detail::DeviceImpl& dev, int64_t hd, bool vec4);
// Rows of a subgroup-matrix tile at this head dim: 64 up to hd 64, 32 past it (32 where emulated).
int64_t attention_sm_tile(int64_t hd);
// Bytes of workgroup storage the subgroup-matrix kernel needs (f16 tiles; twice their size where emulated).
int64_t attention_sm_storage(AttentionKernel kernel, int64_t hd);
// For the tests: lets the subgroup-matrix kernels run on a device without subgroup matrices, where the test has put
// their texts with the subgroup-matrix builtins written out in plain WGSL (f16 taken as f32, rounded to f16 where
// the kernels convert) into WGTRAIN_KERNEL_OVERRIDES. Not for anything else: without those texts the kernels do not
// compile there.
extern bool attention_sm_emulated;

// For the benchmark: which of attention_backward's dispatches run (kBackwardDq: dQ and D; kBackwardDkv: dK and dV,
// reading whatever D holds), to time each kernel alone. Both (the default) for anything that uses the results.
constexpr int kBackwardDq = 1, kBackwardDkv = 2, kBackwardAll = 3;
extern int attention_backward_parts;

// The most bytes the `ds` entries' dS scratch may take (1 GiB; the device's binding size too): past it the first
// entry without ds runs, and a forced ds entry throws UnsupportedError. A variable for the tests.
extern int64_t attention_max_ds_bytes;

// The tiling the op runs for this kernel on this device at head dim hd (honouring attention_force), or nullptr for
// the row kernel.
const AttentionTiling* attention_choice(const wgtrain::detail::DeviceImpl& dev, AttentionKernel kernel, int64_t hd);

}  // namespace wgtrain::ops::detail
