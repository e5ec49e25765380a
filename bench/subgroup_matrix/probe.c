// Probe: load Dawn from npm webgpu@0.6.2's dawn.node (a Node addon whose wgpu* functions are local symbols), list
// adapter features with Dawn's unsafe/f16 toggles, and compile an f16 + subgroup-matrix shader.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>
#include <math.h>
#include <time.h>
#include "webgpu.h"

static void* lib; static uintptr_t base; static Elf64_Sym* syms; static size_t nsyms; static const char* strtab;
static void* sym(const char* name) {
  for (size_t i = 0; i < nsyms; i++) if (syms[i].st_name && !strcmp(strtab + syms[i].st_name, name) && syms[i].st_value)
    return (void*)(base + syms[i].st_value);
  fprintf(stderr, "missing %s\n", name); exit(2);
}
static void load(const char* path) {
  if (!dlopen("./libnapi_stub.so", RTLD_NOW | RTLD_GLOBAL)) { fprintf(stderr, "stub: %s\n", dlerror()); exit(1); }
  lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(1); }
  struct link_map* lm; dlinfo(lib, RTLD_DI_LINKMAP, &lm); base = lm->l_addr;
  int fd = open(path, O_RDONLY); struct stat st; fstat(fd, &st);
  const char* m = mmap(0, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const Elf64_Ehdr* eh = (const Elf64_Ehdr*)m; const Elf64_Shdr* sh = (const Elf64_Shdr*)(m + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) if (sh[i].sh_type == SHT_SYMTAB) {
    syms = (Elf64_Sym*)(m + sh[i].sh_offset); nsyms = sh[i].sh_size / sizeof(Elf64_Sym);
    strtab = m + sh[sh[i].sh_link].sh_offset; }
}
typedef struct { WGPUChainedStruct chain; size_t ne; const char* const* en; size_t nd; const char* const* dis; } Toggles;
typedef struct { uint32_t componentType, resultComponentType, M, N, K; } SMConfig;
typedef struct { WGPUChainedStruct chain; size_t n; const SMConfig* configs; } SMConfigs;

static WGPUAdapter adapter; static WGPUDevice device; static int done;
static void on_adapter(WGPURequestAdapterStatus s, WGPUAdapter a, WGPUStringView msg, void* u1, void* u2) {
  (void)u1; (void)u2; if (s != WGPURequestAdapterStatus_Success) printf("adapter: %d %.*s\n", s, (int)msg.length, msg.data);
  adapter = a; done = 1; }
static void on_device(WGPURequestDeviceStatus s, WGPUDevice d, WGPUStringView msg, void* u1, void* u2) {
  (void)u1; (void)u2; if (s != WGPURequestDeviceStatus_Success) printf("device: %d %.*s\n", s, (int)msg.length, msg.data);
  device = d; done = 1; }
static void on_error(WGPUDevice const* d, WGPUErrorType t, WGPUStringView msg, void* u1, void* u2) {
  (void)d; (void)u1; (void)u2; printf("uncaptured error %d: %.*s\n", t, (int)msg.length, msg.data); }

static void on_done_cb(WGPUQueueWorkDoneStatus s, WGPUStringView m, void* u1, void* u2) { (void)s; (void)m; (void)u1; (void)u2; done = 1; }
static void on_map_cb(WGPUMapAsyncStatus s, WGPUStringView m, void* u1, void* u2) { if (s != 1) printf("map %d %.*s\n", s, (int)m.length, m.data); (void)u1; (void)u2; done = 1; }
int main(int argc, char** argv) {
  load(argc > 1 ? argv[1] : "dawn.node");
  const void* (*getProcs)(void) = sym("_ZN4dawn6native8GetProcsEv");
  void (*setProcs)(const void*) = sym("dawnProcSetProcs");
  setProcs(getProcs());
  int backend = argc > 2 ? atoi(argv[2]) : WGPUBackendType_Vulkan;
  WGPUInstance (*createInstance)(const WGPUInstanceDescriptor*) = sym("wgpuCreateInstance");
  void (*processEvents)(WGPUInstance) = sym("wgpuInstanceProcessEvents");
  WGPUFuture (*requestAdapter)(WGPUInstance, const WGPURequestAdapterOptions*, WGPURequestAdapterCallbackInfo) = sym("wgpuInstanceRequestAdapter");
  void (*getFeatures)(WGPUAdapter, WGPUSupportedFeatures*) = sym("wgpuAdapterGetFeatures");
  WGPUStatus (*getInfo)(WGPUAdapter, WGPUAdapterInfo*) = sym("wgpuAdapterGetInfo");
  WGPUFuture (*requestDevice)(WGPUAdapter, const WGPUDeviceDescriptor*, WGPURequestDeviceCallbackInfo) = sym("wgpuAdapterRequestDevice");
  WGPUShaderModule (*createModule)(WGPUDevice, const WGPUShaderModuleDescriptor*) = sym("wgpuDeviceCreateShaderModule");
  WGPUComputePipeline (*createPipeline)(WGPUDevice, const WGPUComputePipelineDescriptor*) = sym("wgpuDeviceCreateComputePipeline");

  const char* en[] = {"allow_unsafe_apis", "vulkan_enable_f16_on_nvidia", "use_vulkan_memory_model"};
  Toggles tg = {{NULL, (WGPUSType)0x5000A}, 3, en, 0, NULL};
  WGPUInstanceFeatureName ifeat[] = {WGPUInstanceFeatureName_TimedWaitAny};
  WGPUInstanceDescriptor idesc = {0}; idesc.nextInChain = &tg.chain; idesc.requiredFeatureCount = 1; idesc.requiredFeatures = ifeat;
  WGPUInstance inst = createInstance(&idesc);
  printf("instance %p\n", (void*)inst);
  WGPURequestAdapterOptions ao = {0}; ao.nextInChain = &tg.chain; ao.backendType = backend;
  ao.featureLevel = backend == WGPUBackendType_OpenGL || backend == WGPUBackendType_OpenGLES ? WGPUFeatureLevel_Compatibility : WGPUFeatureLevel_Core;
  WGPURequestAdapterCallbackInfo cb = {0}; cb.mode = WGPUCallbackMode_AllowProcessEvents; cb.callback = on_adapter;
  requestAdapter(inst, &ao, cb);
  while (!done) processEvents(inst);
  if (!adapter) return 3;
  WGPUSupportedFeatures f = {0}; getFeatures(adapter, &f);
  int f16 = 0, sm = 0, sg = 0;
  printf("features:");
  for (size_t i = 0; i < f.featureCount; i++) { printf(" 0x%x", f.features[i]);
    if (f.features[i] == 0xB) f16 = 1; if (f.features[i] == 0x50034) sm = 1; if (f.features[i] == 0x12) sg = 1; }
  printf("\nshader-f16 %d subgroups %d subgroup-matrix %d\n", f16, sg, sm);
  SMConfigs smc = {{NULL, (WGPUSType)0x5003B}, 0, NULL};
  WGPUAdapterInfo info = {0}; if (sm) info.nextInChain = &smc.chain;
  getInfo(adapter, &info);
  printf("adapter: %.*s | %.*s | backend %d\n", (int)info.device.length, info.device.data, (int)info.description.length, info.description.data, info.backendType);
  for (size_t i = 0; i < smc.n; i++) printf("  config comp %u result %u  M%u N%u K%u\n", smc.configs[i].componentType,
    smc.configs[i].resultComponentType, smc.configs[i].M, smc.configs[i].N, smc.configs[i].K);
  WGPUFeatureName req[3]; int nr = 0; if (f16) req[nr++] = 0xB; if (sg) req[nr++] = 0x12; if (sm) req[nr++] = 0x50034;
  static uint64_t lim[256]; ((void**)lim)[0] = NULL;
  WGPUStatus (*getLimits)(WGPUAdapter, void*) = sym("wgpuAdapterGetLimits"); getLimits(adapter, lim);
  WGPUDeviceDescriptor dd = {0}; dd.requiredLimits = (const WGPULimits*)lim; dd.nextInChain = &tg.chain; dd.requiredFeatureCount = nr; dd.requiredFeatures = req;
  dd.uncapturedErrorCallbackInfo.callback = on_error;
  WGPURequestDeviceCallbackInfo dcb = {0}; dcb.mode = WGPUCallbackMode_AllowProcessEvents; dcb.callback = on_device;
  done = 0; requestDevice(adapter, &dd, dcb); while (!done) processEvents(inst);
  printf("device %p\n", (void*)device);
  if (!device) return 4;

  // ---- a GEMM C[M,N] = A[M,K] B[K,N] (f16 in, f32 out) on subgroup matrices, or f32 naive without them --------
  WGPUBuffer (*createBuffer)(WGPUDevice, const WGPUBufferDescriptor*) = sym("wgpuDeviceCreateBuffer");
  WGPUQueue (*getQueue)(WGPUDevice) = sym("wgpuDeviceGetQueue");
  void (*writeBuffer)(WGPUQueue, WGPUBuffer, uint64_t, const void*, size_t) = sym("wgpuQueueWriteBuffer");
  WGPUBindGroupLayout (*getBGL)(WGPUComputePipeline, uint32_t) = sym("wgpuComputePipelineGetBindGroupLayout");
  WGPUBindGroup (*createBG)(WGPUDevice, const WGPUBindGroupDescriptor*) = sym("wgpuDeviceCreateBindGroup");
  WGPUCommandEncoder (*createEnc)(WGPUDevice, const WGPUCommandEncoderDescriptor*) = sym("wgpuDeviceCreateCommandEncoder");
  WGPUComputePassEncoder (*beginPass)(WGPUCommandEncoder, const WGPUComputePassDescriptor*) = sym("wgpuCommandEncoderBeginComputePass");
  void (*setPipe)(WGPUComputePassEncoder, WGPUComputePipeline) = sym("wgpuComputePassEncoderSetPipeline");
  void (*setBG)(WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t, const uint32_t*) = sym("wgpuComputePassEncoderSetBindGroup");
  void (*dispatch)(WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t) = sym("wgpuComputePassEncoderDispatchWorkgroups");
  void (*endPass)(WGPUComputePassEncoder) = sym("wgpuComputePassEncoderEnd");
  void (*copyB2B)(WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t, uint64_t) = sym("wgpuCommandEncoderCopyBufferToBuffer");
  WGPUCommandBuffer (*finish)(WGPUCommandEncoder, const WGPUCommandBufferDescriptor*) = sym("wgpuCommandEncoderFinish");
  void (*submit)(WGPUQueue, size_t, const WGPUCommandBuffer*) = sym("wgpuQueueSubmit");
  WGPUFuture (*mapAsync)(WGPUBuffer, WGPUMapMode, size_t, size_t, WGPUBufferMapCallbackInfo) = sym("wgpuBufferMapAsync");
  const void* (*getMapped)(WGPUBuffer, size_t, size_t) = sym("wgpuBufferGetConstMappedRange");
  void (*unmap)(WGPUBuffer) = sym("wgpuBufferUnmap");
  WGPUFuture (*onDone)(WGPUQueue, WGPUQueueWorkDoneCallbackInfo) = sym("wgpuQueueOnSubmittedWorkDone");
  const int use_sm = f16 && sm && smc.n > 0;
  uint32_t tm = 16, tn = 16, tk = 16;
  for (size_t i = 0; i < smc.n; i++) if (smc.configs[i].componentType == 2 && smc.configs[i].resultComponentType == 1) {
    tm = smc.configs[i].M; tn = smc.configs[i].N; tk = smc.configs[i].K; break; }
  const uint32_t n = argc > 3 ? atoi(argv[3]) : 4096;
  const int RM = argc > 4 ? atoi(argv[4]) : 4, RN = argc > 5 ? atoi(argv[5]) : 4;  // result tiles per subgroup
  static char wgsl[1 << 16];
  const char* kfile = getenv("KERNEL"); const int in_f32 = getenv("F32IN") != NULL;
  if (kfile) { FILE* kf = fopen(kfile, "r"); size_t m = fread(wgsl, 1, sizeof wgsl - 1, kf); wgsl[m] = 0; fclose(kf); }
  else {

  if (use_sm) {
    char body[4096] = "", tmp[512];
    for (int i = 0; i < RM; i++) { sprintf(tmp, "  var l%d: subgroup_matrix_left<f16, %u, %u>;\n", i, tk, tm); strcat(body, tmp); }
    for (int j = 0; j < RN; j++) { sprintf(tmp, "  var r%d: subgroup_matrix_right<f16, %u, %u>;\n", j, tn, tk); strcat(body, tmp); }
    for (int i = 0; i < RM; i++) for (int j = 0; j < RN; j++) { sprintf(tmp, "  var c%d_%d = subgroup_matrix_result<f32, %u, %u>();\n", i, j, tn, tm); strcat(body, tmp); }
    strcat(body, "  for (var kk = 0u; kk < K; kk += TK) {\n");
    for (int i = 0; i < RM; i++) { sprintf(tmp, "    l%d = subgroupMatrixLoad<subgroup_matrix_left<f16, %u, %u>>(&a, (row0 + %uu) * K + kk, false, K);\n", i, tk, tm, i * tm); strcat(body, tmp); }
    for (int j = 0; j < RN; j++) { sprintf(tmp, "    r%d = subgroupMatrixLoad<subgroup_matrix_right<f16, %u, %u>>(&b, kk * N + col0 + %uu, false, N);\n", j, tn, tk, j * tn); strcat(body, tmp); }
    for (int i = 0; i < RM; i++) for (int j = 0; j < RN; j++) { sprintf(tmp, "    c%d_%d = subgroupMatrixMultiplyAccumulate(l%d, r%d, c%d_%d);\n", i, j, i, j, i, j); strcat(body, tmp); }
    strcat(body, "  }\n");
    for (int i = 0; i < RM; i++) for (int j = 0; j < RN; j++) { sprintf(tmp, "  subgroupMatrixStore(&c, (row0 + %uu) * N + col0 + %uu, c%d_%d, false, N);\n", i * tm, j * tn, i, j); strcat(body, tmp); }
    sprintf(wgsl, "enable f16;\nenable chromium_experimental_subgroup_matrix;\n"
      "const K = %uu; const N = %uu; const TK = %uu;\n"
      "@group(0) @binding(0) var<storage, read> a: array<f16>;\n@group(0) @binding(1) var<storage, read> b: array<f16>;\n"
      "@group(0) @binding(2) var<storage, read_write> c: array<f32>;\n"
      "@compute @workgroup_size(32) fn main(@builtin(workgroup_id) wg: vec3u) {\n"
      "  let row0 = wg.y * %uu; let col0 = wg.x * %uu;\n%s}\n", n, n, tk, RM * tm, RN * tn, body);
  } else {
    sprintf(wgsl, "const K = %uu; const N = %uu;\n"
      "@group(0) @binding(0) var<storage, read> a: array<f32>;\n@group(0) @binding(1) var<storage, read> b: array<f32>;\n"
      "@group(0) @binding(2) var<storage, read_write> c: array<f32>;\n"
      "@compute @workgroup_size(8, 8) fn main(@builtin(global_invocation_id) g: vec3u) {\n"
      "  var s = 0.0; for (var k = 0u; k < K; k++) { s += a[g.y * K + k] * b[k * N + g.x]; }\n  c[g.y * N + g.x] = s;\n}\n", n, n);
  }
  }
  if (getenv("SHOW")) puts(wgsl);
  WGPUShaderSourceWGSL src = {{NULL, WGPUSType_ShaderSourceWGSL}, {wgsl, strlen(wgsl)}};
  WGPUShaderModuleDescriptor md = {0}; md.nextInChain = &src.chain;
  WGPUShaderModule mod = createModule(device, &md);
  WGPUComputePipelineDescriptor pd = {0}; pd.compute.module = mod; pd.compute.entryPoint = (WGPUStringView){"main", 4};
  WGPUComputePipeline pipe = createPipeline(device, &pd);
  printf("%s pipeline %p (%s, tile %ux%ux%u, %dx%d per subgroup)\n", kfile ? kfile : "builtin", (void*)pipe, use_sm ? "f16 subgroup matrix" : "f32 naive", tm, tn, tk, RM, RN);
  const size_t es = (use_sm && !in_f32) ? 2 : 4, nn = (size_t)n * n;
  uint16_t* ha = malloc(nn * 4); float* fa = (float*)ha;
  // small integers: exact in f16 and in the f32 sums
  for (size_t i = 0; i < nn; i++) { int v = (int)((i * 2654435761u) >> 28) % 5 - 2;
    if (use_sm && !in_f32) { _Float16 h = (_Float16)v; memcpy(&ha[i], &h, 2); } else fa[i] = (float)v; }
  WGPUBufferDescriptor bd = {0}; bd.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopyDst; bd.size = nn * es;
  WGPUBuffer A = createBuffer(device, &bd), B = createBuffer(device, &bd);
  bd.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc; bd.size = nn * 4; WGPUBuffer C = createBuffer(device, &bd);
  bd.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst; WGPUBuffer R = createBuffer(device, &bd);
  WGPUQueue q = getQueue(device);
  writeBuffer(q, A, 0, ha, nn * es); writeBuffer(q, B, 0, ha, nn * es);
  WGPUBindGroupEntry e[3] = {{0}}; WGPUBuffer bufs[3] = {A, B, C};
  for (int i = 0; i < 3; i++) { e[i].binding = i; e[i].buffer = bufs[i]; e[i].size = WGPU_WHOLE_SIZE; }
  WGPUBindGroupDescriptor bgd = {0}; bgd.layout = getBGL(pipe, 0); bgd.entryCount = 3; bgd.entries = e;
  WGPUBindGroup bg = createBG(device, &bgd);
  uint32_t gx = use_sm ? n / (RN * tn) : n / 8, gy = use_sm ? n / (RM * tm) : n / 8;
  if (getenv("GX")) { gx = atoi(getenv("GX")); gy = atoi(getenv("GY")); }
  for (int round = 0; round < 2; round++) {
    const int reps = round == 0 ? 1 : (argc > 6 ? atoi(argv[6]) : 20);
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    WGPUCommandEncoder enc = createEnc(device, NULL);
    WGPUComputePassEncoder pass = beginPass(enc, NULL);
    setPipe(pass, pipe); setBG(pass, 0, bg, 0, NULL);
    for (int r = 0; r < reps; r++) dispatch(pass, gx, gy, 1);
    endPass(pass);
    WGPUCommandBuffer cbuf = finish(enc, NULL); submit(q, 1, &cbuf);
    WGPUQueueWorkDoneCallbackInfo wd = {0}; wd.mode = WGPUCallbackMode_AllowProcessEvents; wd.callback = (WGPUQueueWorkDoneCallback)(void*)on_done_cb;
    done = 0; onDone(q, wd); while (!done) processEvents(inst);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    printf("%s n=%u reps=%d: %.3f ms each, %.1f TFLOP/s\n", round ? "timed" : "warm", n, reps, 1e3 * s / reps, 2.0 * n * n * (double)n * reps / s / 1e12);
  }
  WGPUCommandEncoder enc = createEnc(device, NULL); copyB2B(enc, C, 0, R, 0, nn * 4);
  WGPUCommandBuffer cbuf = finish(enc, NULL); submit(q, 1, &cbuf);
  WGPUBufferMapCallbackInfo mc = {0}; mc.mode = WGPUCallbackMode_AllowProcessEvents; mc.callback = (WGPUBufferMapCallback)(void*)on_map_cb;
  done = 0; mapAsync(R, WGPUMapMode_Read, 0, nn * 4, mc); while (!done) processEvents(inst);
  const float* c = getMapped(R, 0, nn * 4);
  int bad = 0; double maxerr = 0;
  for (int t = 0; t < 64; t++) { size_t i = (t * 7919u) % n, j = (t * 104729u + 13) % n; double ref = 0;
    for (size_t k = 0; k < n; k++) { int va = (int)(((i * n + k) * 2654435761u) >> 28) % 5 - 2, vb = (int)(((k * n + j) * 2654435761u) >> 28) % 5 - 2; ref += va * vb; }
    double err = fabs(ref - c[i * n + j]); if (err > maxerr) maxerr = err; if (err > 0) bad++; }
  printf("check: %d of 64 entries differ, max error %g\n", bad, maxerr);
  unmap(R);
  return 0;
}
