// How many chunks of k one GEMM is split into: one policy for the WebGPU (matmul.cpp) and the native Vulkan
// (gemm_vulkan.cpp) launchers.
#pragma once

#include <algorithm>
#include <cstdint>

namespace wgtrain::ops::detail {

struct SplitK {
  int64_t splits = 1;  // grid layers, each writing its partial tile; 1: no split
  int64_t chunk = 0;   // k per layer, a multiple of k_tile (K itself when not split)
};

// Split k where a product has too few output tiles to fill a GPU and a long k: each chunk becomes a grid layer and a
// second pass adds the partial tiles. Not on a CPU rasteriser (`software`), which has no idle cores to give the
// chunks to. `mode` is the device's split_k setting: 0 where the shape calls for it, 1 wherever possible (tests),
// -1 never. `k_tile` is the kernel's k step, which every chunk but the last must be a multiple of.
// `target`: the workgroups a split aims at. 1024 was measured on the H200 with the 50M model's fp32 weight gradients
// (640 x 640 over 8192 tokens): it beat 256 by 12% a training step, 2048 lost 5%.
constexpr int64_t kSplitTargetWorkgroups = 1024;
inline SplitK plan_split_k(int64_t tiles, int64_t K, int mode, bool software, int64_t k_tile,
                           int64_t target = kSplitTargetWorkgroups) {
  constexpr int64_t kMinChunk = 256;
  int64_t splits = 1;
  if (mode > 0)
    splits = std::min<int64_t>(4, (K + 15) / 16);
  else if (mode == 0 && !software && tiles < target / 2 && K >= 2 * kMinChunk)
    splits = std::min((target + tiles - 1) / tiles, K / kMinChunk);
  if (splits <= 1) return {1, K};
  const int64_t chunk = ((K + splits - 1) / splits + k_tile - 1) / k_tile * k_tile;
  return {(K + chunk - 1) / chunk, chunk};
}

}  // namespace wgtrain::ops::detail
