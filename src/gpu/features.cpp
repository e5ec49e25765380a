// WebGPU feature names: the table of the pinned library's WGPUFeatureName (bun-webgpu 0.1.7's index.js,
// WGPUFeatureNameDef; tests/device_test.cpp checks this copy against it).
#include "gpu/features.h"

#include <map>

#include "gpu/webgpu_abi.h"

namespace wgtrain::gpu {

namespace {

const std::map<uint32_t, const char*>& names() {
  static const std::map<uint32_t, const char*> t = {
      {1, "depth-clip-control"},
      {2, "depth32float-stencil8"},
      {3, "timestamp-query"},
      {4, "texture-compression-bc"},
      {5, "texture-compression-bc-sliced-3d"},
      {6, "texture-compression-etc2"},
      {7, "texture-compression-astc"},
      {8, "texture-compression-astc-sliced-3d"},
      {9, "indirect-first-instance"},
      {10, "shader-f16"},
      {11, "rg11b10ufloat-renderable"},
      {12, "bgra8unorm-storage"},
      {13, "float32-filterable"},
      {14, "float32-blendable"},
      {15, "clip-distances"},
      {16, "dual-source-blending"},
      {17, "subgroups"},
      {18, "core-features-and-limits"},
      {327680, "dawn-internal-usages"},
      {327681, "dawn-multi-planar-formats"},
      {327682, "dawn-native"},
      {327683, "chromium-experimental-timestamp-query-inside-passes"},
      {327684, "implicit-device-synchronization"},
      {327685, "chromium-experimental-immediate-data"},
      {327686, "transient-attachments"},
      {327687, "msaa-render-to-single-sampled"},
      {327688, "subgroups-f16"},
      {327689, "d3d11-multithread-protected"},
      {327690, "angle-texture-sharing"},
      {327691, "pixel-local-storage-coherent"},
      {327692, "pixel-local-storage-non-coherent"},
      {327693, "unorm16-texture-formats"},
      {327694, "snorm16-texture-formats"},
      {327695, "multi-planar-format-extended-usages"},
      {327696, "multi-planar-format-p010"},
      {327697, "host-mapped-pointer"},
      {327698, "multi-planar-render-targets"},
      {327699, "multi-planar-format-nv12a"},
      {327700, "framebuffer-fetch"},
      {327701, "buffer-map-extended-usages"},
      {327702, "adapter-properties-memory-heaps"},
      {327703, "adapter-properties-d3d"},
      {327704, "adapter-properties-vk"},
      {327705, "r8-unorm-storage"},
      {327706, "dawn-format-capabilities"},
      {327707, "dawn-drm-format-capabilities"},
      {327708, "norm16-texture-formats"},
      {327709, "multi-planar-format-nv16"},
      {327710, "multi-planar-format-nv24"},
      {327711, "multi-planar-format-p210"},
      {327712, "multi-planar-format-p410"},
      {327713, "shared-texture-memory-vk-dedicated-allocation"},
      {327714, "shared-texture-memory-a-hardware-buffer"},
      {327715, "shared-texture-memory-dma-buf"},
      {327716, "shared-texture-memory-opaque-fd"},
      {327717, "shared-texture-memory-zircon-handle"},
      {327718, "shared-texture-memory-dxgi-shared-handle"},
      {327719, "shared-texture-memory-d3d11-texture2d"},
      {327720, "shared-texture-memory-iosurface"},
      {327721, "shared-texture-memory-egl-image"},
      {327722, "shared-fence-vk-semaphore-opaque-fd"},
      {327723, "shared-fence-sync-fd"},
      {327724, "shared-fence-vk-semaphore-zircon-handle"},
      {327725, "shared-fence-dxgi-shared-handle"},
      {327726, "shared-fence-mtl-shared-event"},
      {327727, "shared-buffer-memory-d3d12-resource"},
      {327728, "static-samplers"},
      {327729, "ycbcr-vulkan-samplers"},
      {327730, "shader-module-compilation-options"},
      {327731, "dawn-load-resolve-texture"},
      {327732, "dawn-partial-load-resolve-texture"},
      {327733, "multi-draw-indirect"},
      {327734, "dawn-texel-copy-buffer-row-alignment"},
      {327735, "flexible-texture-views"},
      {327736, "chromium-experimental-subgroup-matrix"},
      {327737, "shared-fence-egl-sync"},
      {327738, "dawn-device-allocator-control"},
  };
  return t;
}

}  // namespace

std::string feature_name(uint32_t value) {
  const auto it = names().find(value);
  return it == names().end() ? std::string() : it->second;
}

std::string feature_use(uint32_t value) {
  using namespace webgpu;
  switch (value) {
    case WGPUFeatureName_TimestampQuery:
      return "times kernels on the GPU (WGTRAIN_PROFILE, bench); without it, the wall clock";
    case WGPUFeatureName_ShaderF16:
      return "16-bit floats in shaders; no WGSL kernel uses them yet";
    case WGPUFeatureName_Subgroups:
      return "subgroup operations in shaders; no WGSL kernel uses them yet";
    case WGPUFeatureName_SubgroupMatrix:
      return "matrix units from WGSL; enabled only on request (--subgroup-matrix); no kernel uses them yet";
    default:
      return "";
  }
}

}  // namespace wgtrain::gpu
