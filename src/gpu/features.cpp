// WebGPU feature names: the pinned library's WGPUFeatureName, as Dawn's dawn.json names them at commit c5d549e
// (lower case, with hyphens: the WebGPU spelling); tests/features_test.cpp checks this copy against third_party/dawn/webgpu.h.
#include "gpu/features.h"

#include <map>

#include "gpu/webgpu_abi.h"

namespace wgtrain::gpu {

namespace {

const std::map<uint32_t, const char*>& names() {
  static const std::map<uint32_t, const char*> t = {
      {0x00001, "core-features-and-limits"},
      {0x00002, "depth-clip-control"},
      {0x00003, "depth32-float-stencil8"},
      {0x00004, "texture-compression-bc"},
      {0x00005, "texture-compression-bc-sliced-3d"},
      {0x00006, "texture-compression-etc2"},
      {0x00007, "texture-compression-astc"},
      {0x00008, "texture-compression-astc-sliced-3d"},
      {0x00009, "timestamp-query"},
      {0x0000A, "indirect-first-instance"},
      {0x0000B, "shader-f16"},
      {0x0000C, "rg11b10-ufloat-renderable"},
      {0x0000D, "bgra8-unorm-storage"},
      {0x0000E, "float32-filterable"},
      {0x0000F, "float32-blendable"},
      {0x00010, "clip-distances"},
      {0x00011, "dual-source-blending"},
      {0x00012, "subgroups"},
      {0x00013, "texture-formats-tier1"},
      {0x00014, "texture-formats-tier2"},
      {0x00015, "primitive-index"},
      {0x00016, "texture-component-swizzle"},
      {0x50000, "dawn-internal-usages"},
      {0x50001, "dawn-multi-planar-formats"},
      {0x50002, "dawn-native"},
      {0x50003, "chromium-experimental-timestamp-query-inside-passes"},
      {0x50004, "implicit-device-synchronization"},
      {0x50006, "transient-attachments"},
      {0x50007, "msaa-render-to-single-sampled"},
      {0x50008, "d3d11-multithread-protected"},
      {0x50009, "angle-texture-sharing"},
      {0x5000A, "pixel-local-storage-coherent"},
      {0x5000B, "pixel-local-storage-non-coherent"},
      {0x5000C, "unorm16-texture-formats"},
      {0x5000D, "multi-planar-format-extended-usages"},
      {0x5000E, "multi-planar-format-p010"},
      {0x5000F, "host-mapped-pointer"},
      {0x50010, "multi-planar-render-targets"},
      {0x50011, "multi-planar-format-nv12a"},
      {0x50012, "framebuffer-fetch"},
      {0x50013, "buffer-map-extended-usages"},
      {0x50014, "adapter-properties-memory-heaps"},
      {0x50015, "adapter-properties-d3d"},
      {0x50016, "adapter-properties-vk"},
      {0x50017, "dawn-format-capabilities"},
      {0x50018, "dawn-drm-format-capabilities"},
      {0x50019, "multi-planar-format-nv16"},
      {0x5001A, "multi-planar-format-nv24"},
      {0x5001B, "multi-planar-format-p210"},
      {0x5001C, "multi-planar-format-p410"},
      {0x5001D, "shared-texture-memory-vk-dedicated-allocation"},
      {0x5001E, "shared-texture-memory-a-hardware-buffer"},
      {0x5001F, "shared-texture-memory-dma-buf"},
      {0x50020, "shared-texture-memory-opaque-fd"},
      {0x50021, "shared-texture-memory-zircon-handle"},
      {0x50022, "shared-texture-memory-dxgi-shared-handle"},
      {0x50023, "shared-texture-memory-d3d11-texture-2d"},
      {0x50024, "shared-texture-memory-io-surface"},
      {0x50025, "shared-texture-memory-egl-image"},
      {0x50026, "shared-fence-vk-semaphore-opaque-fd"},
      {0x50027, "shared-fence-sync-fd"},
      {0x50028, "shared-fence-vk-semaphore-zircon-handle"},
      {0x50029, "shared-fence-dxgi-shared-handle"},
      {0x5002A, "shared-fence-mtl-shared-event"},
      {0x5002B, "shared-buffer-memory-d3d12-resource"},
      {0x5002C, "static-samplers"},
      {0x5002D, "y-cb-cr-vulkan-samplers"},
      {0x5002E, "shader-module-compilation-options"},
      {0x5002F, "dawn-load-resolve-texture"},
      {0x50030, "dawn-partial-load-resolve-texture"},
      {0x50031, "multi-draw-indirect"},
      {0x50032, "dawn-texel-copy-buffer-row-alignment"},
      {0x50033, "flexible-texture-views"},
      {0x50034, "chromium-experimental-subgroup-matrix"},
      {0x50035, "shared-fence-egl-sync"},
      {0x50036, "dawn-device-allocator-control"},
      {0x50037, "adapter-properties-wgpu"},
      {0x50038, "shared-buffer-memory-d3d12-shared-memory-file-mapping-handle"},
      {0x50039, "shared-texture-memory-d3d12-resource"},
      {0x5003A, "chromium-experimental-sampling-resource-table"},
      {0x5003B, "chromium-experimental-subgroup-size-control"},
      {0x5003C, "atomic-vec2u-min-max"},
      {0x5003D, "unorm16-formats-for-external-texture"},
      {0x5003E, "opaque-y-cb-cr-android-for-external-texture"},
      {0x5003F, "unorm16-filterable"},
      {0x50040, "render-pass-render-area"},
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
      return "16-bit floats in shaders: the mixed-precision GEMM's operands (--precision mixed)";
    case WGPUFeatureName_Subgroups:
      return "subgroup operations in shaders; no WGSL kernel uses them yet";
    case WGPUFeatureName_SubgroupMatrix:
      return "matrix units from WGSL: the mixed-precision GEMM (--precision mixed, which enables them)";
    default:
      return "";
  }
}

}  // namespace wgtrain::gpu
