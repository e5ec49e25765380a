#include "cli/bench.h"

#include "cli/train.h"
#include "gpu/device_impl.h"
#include "ops/attention/attention_variants.h"
#include "ops/fused_ce/fused_ce_force.h"
#include "ops/matmul/gemm.h"
#include "ops/matmul/gemm_tiling.h"
#include "ops/q4gsw/q4gsw_force.h"
#include "ops/shape/transpose_force.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/atomic_file.h"
#include "wgtrain/attention.h"
#include "wgtrain/autograd.h"
#include "wgtrain/checkpoint.h"
#include "wgtrain/llama.h"
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/fused_ce.h"
#include "wgtrain/ops.h"
#include "wgtrain/precision.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/random.h"
#include "wgtrain/registry.h"

namespace wgtrain::cli {

namespace {

struct Result {
  std::string name, shape;
  double flops = 0, bytes = 0, seconds = 0;
  int reps = 0;
  bool timestamps = false;
  std::optional<MemoryUsage> memory{};  // train_step: the pool's high-water mark, by category
};

// Uniform in [lo, hi) from a counter hash (splitmix64): fast enough for the 4 GB of a 8192 x 128256 logits tensor.
std::vector<float> random_values(int64_t n, float lo, float hi, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) {
    uint64_t z = (seed << 40) + i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v[i] = lo + (hi - lo) * static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  }
  return v;
}

// --only: rows whose name contains the text, or any of its comma-separated parts ("fused_ce,adamw" runs both, in
// the bench's order: to see what one row leaves to the next).
bool bench_wants(const std::string& only, const std::string& name) {
  if (only.empty()) return true;
  std::stringstream ss(only);
  std::string part;
  while (std::getline(ss, part, ','))
    if (!part.empty() && name.find(part) != std::string::npos) return true;
  return false;
}

// The dense copy's bytes a second when the copy row ran in this invocation (0 if not): each row that moves bytes
// prints its share of it.
double copy_bytes_per_s = 0;

// The kernel forms forced by the environment (WGTRAIN_FORCE_<OP>=<n>[,<n>...], for timing forms side by side in
// one call), else {dflt}; `set` says whether the variable was given.
std::vector<int> env_forces(const char* name, int dflt, bool* set = nullptr) {
  const char* v = std::getenv(name);
  if (set) *set = v && *v;
  if (!v || !*v) return {dflt};
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw ArgumentError(std::string(name) + " must be integers separated by commas, got '" + v + "'");
    }
  }
  return out;
}

// Runs `body` twice to warm up, then the timed loop's count of times untimed, then enough times for ~0.2 s (at least
// 3), timed on the GPU. The untimed loop: in run z6 the first of several forms timed at a size ran at half the rate
// of the same kernel timed later, after only the two warm-up calls.
template <class Dev>
Result measure(Dev& dev, const std::string& name, const std::string& shape, double flops, double bytes,
               const std::function<void()>& body) {
  body();
  dev.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  body();
  dev.synchronize();
  const double once = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int reps = std::max(3, std::min(200, static_cast<int>(0.2 / std::max(once, 1e-6))));
  for (int r = 0; r < reps; ++r) body();
  dev.synchronize();
  const auto t = dev.time([&] {
    for (int r = 0; r < reps; ++r) body();
  });
  Result res{name, shape, flops, bytes, t.seconds / reps, reps, t.from_timestamps};
  std::printf("%-26s %-26s %10.3f ms", name.c_str(), shape.c_str(), res.seconds * 1e3);
  if (flops > 0) std::printf("  %9.1f GFLOP/s", flops / res.seconds * 1e-9);
  if (bytes > 0) std::printf("  %8.1f GB/s", bytes / res.seconds * 1e-9);
  if (bytes > 0 && copy_bytes_per_s > 0) std::printf("  %5.1f%% of copy", 100.0 * bytes / res.seconds / copy_bytes_per_s);
  std::printf("\n");
  std::fflush(stdout);
  return res;
}

// Runs body untimed for about `seconds` of wall time. The first row timed at a new size of a section read slow
// whatever its kernel (run z9, H100: fused_ce out of place at V = 128256 55.8% of the copy rate timed first, 84.9%
// timed again later; requant's plain row 36.5% first, below its own +scales row after it, 79.2%), so a section
// settles each size with this before its first row (the untimed loop in measure had not been enough).
template <class Dev>
void settle(Dev& dev, const std::function<void()>& body, double seconds = 0.5) {
  const auto t0 = std::chrono::steady_clock::now();
  do {
    for (int r = 0; r < 8; ++r) body();
    dev.synchronize();
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds);
}

// Random q4gsw weight in the exchange layout: codes, and scales in [0.001, 0.02).
struct HostQ4 {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
};
HostQ4 random_q4_host(int64_t n, int64_t k, int64_t group, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> sc(0.001f, 0.02f);
  HostQ4 q;
  q.bytes.resize(static_cast<size_t>(n * q4gsw::bytes_per_row(k)));
  for (auto& b : q.bytes) b = static_cast<uint8_t>(byte(g));
  q.scales.resize(static_cast<size_t>(q4gsw::groups(k, group) * n));
  for (auto& s : q.scales) s = sc(g);
  return q;
}

// The training kernels under the names the benchmarks use.
struct Kernels {
  using Dev = wgtrain::Device;
  using T = wgtrain::Tensor;
  using Q4 = wgtrain::Q4Weight;
  using AdamWParam = ops::AdamWParam;
  Dev& dev;
  T random(const Shape& s, float lo, float hi, uint64_t seed) const {
    return T::from_host(dev, s, random_values(numel(s), lo, hi, seed));
  }
  T ints(const Shape& s, const std::vector<int32_t>& v) const { return T::from_host(dev, s, v); }
  T zeros(const Shape& s) const { return ops::full(dev, s, 0.0); }
  T slice(const T& t, int64_t a, int64_t b) const { return t.slice(0, a, b); }
  Q4 q4(int64_t n, int64_t k, int64_t g, uint64_t seed) const {
    const HostQ4 h = random_q4_host(n, k, g, seed);
    return q4gsw::upload(dev, h.bytes, h.scales, n, k, g);
  }
  void copy(const T& dst, const T& src) const { ops::copy_(dst, src); }
  void linear_q4gsw(const T& x, const Q4& w) const { ops::linear_q4gsw(x, w); }
  void linear_q4gsw_backward(const T& dy, const Q4& w) const { ops::linear_q4gsw_backward(dy, w); }
  void linear_dW(const T& dy, const T& x, const T* acc) const { ops::linear_dW(dy, x, acc); }
  void requant(const T& latent, Q4& w, bool recompute) const { ops::q4gsw_requant(latent, w, recompute); }
  void fused_ce(const T& logits, const T& labels, bool in_place) const {
    ops::fused_ce(logits, labels, std::nullopt, in_place);
  }
  ops::AdamW optimizer(std::vector<AdamWParam> p) const { return ops::AdamW(std::move(p), {}); }
};

// Results go to stdout as they come, and to the JSON file, so a benchmark that fails (out of memory, say) keeps
// the others'.
// The file is rewritten whole (atomically) after each result: small, and never left half-written.
struct Sink {
  std::string json_path;  // empty: no file
  std::string device, backend;
  int failures = 0;
  std::string lines{};  // what the file holds so far
  void push_back(const Result& r) {
    if (json_path.empty()) return;
    char line[512];
    std::snprintf(line, sizeof line,
                  "{\"name\": \"%s\", \"shape\": \"%s\", \"flops\": %.6g, \"bytes\": %.6g, \"seconds\": %.6g, "
                  "\"reps\": %d, \"timestamps\": %s, \"device\": \"%s\", \"backend\": \"%s\"",
                  r.name.c_str(), r.shape.c_str(), r.flops, r.bytes, r.seconds, r.reps,
                  r.timestamps ? "true" : "false", device.c_str(), backend.c_str());
    lines += line;
    if (r.memory) {
      // Bytes: the pool's high-water mark and its split (wgtrain/device.h MemoryUsage), keys as the categories.
      lines += ", \"memory\": {\"total\": " + std::to_string(r.memory->total);
      for (int c = 0; c < kMemoryCategories; ++c) {
        std::string key = memory_category_name(static_cast<MemoryCategory>(c));
        std::replace(key.begin(), key.end(), ' ', '_');
        lines += ", \"" + key + "\": " + std::to_string(r.memory->by_category[c]);
      }
      lines += ", \"pool_overhead\": " + std::to_string(r.memory->pool_overhead) + "}";
    }
    lines += "}\n";
    write_file_atomic(json_path, lines);
  }
};

// Runs one benchmark; a failure (out of memory, say) is reported and counted, and the others go on.
// Each starts from an emptied pool with a fresh high-water mark, so that no row runs beside the buffers of the rows
// before it (on the H200, adamw_step took twice as long after the multi-GB fused_ce rows as alone). Once a row's
// tensors are gone the pool must hold what it held before the row; a row that leaves buffers behind fails.
// (What does carry over: compiled pipelines, the uniform ring, the GPU's clocks and caches.)
using Guard = std::function<void(const char*, const std::function<void()>&)>;
Guard guard(Sink& results, Device& dev) {
  return [&results, &dev](const char* what, const std::function<void()>& fn) {
    try {
      dev.release_cached_memory();
      const uint64_t before = dev.memory().current.in_use();
      dev.reset_peak_memory();
      fn();
      dev.release_cached_memory();
      const MemoryUsage after = dev.memory().current;
      if (after.in_use() != before || after.idle != 0)
        throw Error("after this row " + std::to_string(after.in_use()) + " bytes are in use (" +
                    std::to_string(before) + " before it) and " + std::to_string(after.idle) +
                    " idle in the pool: the next row would run beside them");
    } catch (const Error& e) {
      ++results.failures;
      std::printf("%-26s failed: %s\n", what, e.what());
      dev.synchronize();
    }
  };
}

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (auto x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
  return s;
}

// --mm-shapes: "MxNxK[,MxNxK...]", each extent 1 to 2^20; an error naming the part that is not one.
std::vector<std::array<int64_t, 3>> parse_mm_shapes(const std::string& text) {
  std::vector<std::array<int64_t, 3>> shapes;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    std::array<int64_t, 3> s{};
    std::stringstream ps(part);
    std::string v;
    int n = 0;
    bool ok = true;
    while (ok && std::getline(ps, v, 'x')) {
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      ok = n < 3 && !v.empty() && *end == '\0' && x >= 1 && x <= (1 << 20);
      if (ok) s[n++] = x;
    }
    if (!ok || n != 3)
      throw ArgumentError("--mm-shapes: '" + part + "' is not MxNxK (three extents, 1 to 1048576, joined by x)");
    shapes.push_back(s);
  }
  return shapes;
}

// The training kernels at fine-tuning sizes (every backend has them): the rows bench/report.py sets side by side.
void bench_kernels(const Kernels& k, const BenchOptions& opt, Sink& results, const Guard& guarded) {
  auto& dev = k.dev;
  const bool q = opt.quick;
  auto want = [&](const std::string& name) { return bench_wants(opt.only, name); };
  const int64_t M = q ? 256 : 4096, N = q ? 256 : 4096, K = q ? 256 : 4096, G = 32;
  if (want("linear_q4gsw") || want("linear_dW")) guarded("linear", [&] {
    const Kernels::Q4 w = k.q4(N, K, G, 4);
    const auto x = k.random({M, K}, -1, 1, 5), dy = k.random({M, N}, -1, 1, 6);
    const double wbytes = N * K / 2.0 + q4gsw::groups(K, G) * N * 4.0;
    if (want("linear_q4gsw"))
      results.push_back(measure(dev, "linear_q4gsw", dims({M, N, K}) + " g" + std::to_string(G), 2.0 * M * N * K,
                                M * K * 4.0 + wbytes + M * N * 4.0, [&] { k.linear_q4gsw(x, w); }));
    if (want("linear_q4gsw_backward"))
      results.push_back(measure(dev, "linear_q4gsw_backward", dims({M, N, K}) + " g" + std::to_string(G),
                                2.0 * M * N * K, M * N * 4.0 + wbytes + M * K * 4.0,
                                [&] { k.linear_q4gsw_backward(dy, w); }));
    if (want("linear_dW")) {
      const auto grad = k.random({N, K}, -1, 1, 7);
      results.push_back(measure(dev, "linear_dW (accumulate)", dims({M, N, K}), 2.0 * M * N * K,
                                (M * N + M * K + 2.0 * N * K) * 4.0, [&] { k.linear_dW(dy, x, &grad); }));
    }
  });
  if (want("q4gsw_requant")) guarded("requant", [&] {
    // WGTRAIN_FORCE_Q4GSW_REQUANT=<form>[,...] (ops/q4gsw/q4gsw_force.h): the kernels forced, rows named after it.
    namespace od = ops::detail;
    bool forced = false;
    const std::vector<int> forms = env_forces("WGTRAIN_FORCE_Q4GSW_REQUANT", od::kRequantChoice, &forced);
    struct Restore {
      ~Restore() { od::q4gsw_requant_force = od::kRequantChoice; }
    } restore;
    // At the fine-tuning size and at 8 times its bytes (not with --quick): whether the share of the copy rate grows
    // with the size says whether fixed costs (the launch, the grid's tail) or the kernel's traffic hold it back.
    for (const int64_t scale : q ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 8}) {
      const int64_t n = N * (scale == 1 ? 1 : 4), kk = K * (scale == 1 ? 1 : 2);
      Kernels::Q4 w = k.q4(n, kk, G, 8);
      const auto latent = k.random({n, kk}, -0.1f, 0.1f, 9);
      // Read the latent and the scales, write the codes; with the scales recomputed the least is the same (the
      // latent read once, the scales written instead of read).
      const double bytes = n * kk * 4.0 + n * kk / 2.0 + q4gsw::groups(kk, G) * n * 4.0;
      // The scales the latent's groups have (k.q4's are random, unrelated to the latent), so that every plain row
      // reads the same scales, whichever form comes first.
      settle(dev, [&] { k.requant(latent, w, true); });
      for (int form : forms) {
        od::q4gsw_requant_force = form;
        const std::string tag = forced ? " (f" + std::to_string(form) + ")" : "";
        results.push_back(measure(dev, "q4gsw_requant" + tag, dims({n, kk}) + " g" + std::to_string(G), 0, bytes,
                                  [&] { k.requant(latent, w, false); }));
        results.push_back(measure(dev, "q4gsw_requant (+scales)" + tag, dims({n, kk}) + " g" + std::to_string(G),
                                  0, bytes, [&] { k.requant(latent, w, true); }));
      }
    }
  });
  if (want("fused_ce")) guarded("fused_ce", [&] {
    // WGTRAIN_FORCE_FUSED_CE=<form>[,...] (ops/fused_ce/fused_ce_force.h), WGTRAIN_FORCE_FUSED_CE_WG=256|1024[,...]:
    // the rows kernel forced, each combination a row named after it.
    namespace od = ops::detail;
    bool forced = false, forced_wg = false;
    const std::vector<int> forms = env_forces("WGTRAIN_FORCE_FUSED_CE", od::kFusedCeChoice, &forced);
    const std::vector<int> wgs = env_forces("WGTRAIN_FORCE_FUSED_CE_WG", 0, &forced_wg);
    struct Restore {
      ~Restore() {
        od::fused_ce_force = od::kFusedCeChoice;
        od::fused_ce_force_wg = 0;
      }
    } restore;
    for (int64_t V : {int64_t{32000}, int64_t{128256}}) {
      // 8192 rows, or half as many where the logits would pass what one binding may hold (WebGPU on the H200: 2 GiB,
      // so V = 128256 runs at 4096 rows there; the row's size says which).
      int64_t R = q ? 64 : 8192;
      const int64_t v = q ? V / 16 : V;
      while (R > 1 && static_cast<uint64_t>(R * v) * 4 > dev.limits().max_storage_binding_size) R /= 2;
      const auto logits = k.random({R, v}, -4, 4, 10);
      std::vector<int32_t> lab(R);
      std::mt19937_64 g(11);
      for (auto& l : lab) l = static_cast<int32_t>(g() % static_cast<uint64_t>(v));
      const auto labels = k.ints({R}, lab);
      const auto scratch = k.random({R, v}, -4, 4, 10);
      settle(dev, [&] { k.fused_ce(logits, labels, false); });
      for (int form : forms)
        for (int wg : wgs) {
          od::fused_ce_force = form;
          od::fused_ce_force_wg = wg;
          std::string tag;
          if (forced) tag += " f" + std::to_string(form);
          if (forced_wg) tag += " wg" + std::to_string(wg);
          if (!tag.empty()) tag = " (" + tag.substr(1) + ")";
          // The least any implementation must move: read the logits once, write dlogits once. Out of place as the
          // op runs, and in place as training runs it (each repetition over the last one's dlogits: finite, and
          // the same work).
          results.push_back(measure(dev, "fused_ce" + tag, dims({R, v}), 0, 2.0 * R * v * 4,
                                    [&] { k.fused_ce(logits, labels, false); }));
          results.push_back(measure(dev, "fused_ce in place" + tag, dims({R, v}), 0, 2.0 * R * v * 4,
                                    [&] { k.fused_ce(scratch, labels, true); }));
        }
    }
  });
  if (want("adamw")) guarded("adamw", [&] {
    // 100M parameters as 100 tensors of 1M in shared arenas (one dispatch), as a flattened model would hold them.
    const int64_t per = q ? 4096 : (1 << 20), count = 100, n = per * count;
    const auto p = k.random({n}, -1, 1, 12), gr = k.random({n}, -1, 1, 13);
    const auto m = k.zeros({n}), v = k.zeros({n});
    std::vector<Kernels::AdamWParam> params;
    for (int64_t i = 0; i < count; ++i)
      params.push_back({k.slice(p, i * per, (i + 1) * per), k.slice(gr, i * per, (i + 1) * per),
                        k.slice(m, i * per, (i + 1) * per), k.slice(v, i * per, (i + 1) * per), -1});
    // The update as a recorded training step runs it: tables built once, the step's scalars set beforehand (their
    // write is not the kernel's cost; with WebGPU it also ends the batch), then one dispatch over every parameter.
    auto optimizer = k.optimizer(std::move(params));
    optimizer.set_step(1, 1e-3);
    results.push_back(measure(dev, "adamw_step", std::to_string(count) + "x" + std::to_string(per), 0, 28.0 * n,
                              [&] { optimizer.update(); }));
  });
}

// The JSON results file, created empty up front so that an unwritable path fails before any benchmark runs.
std::string open_json(const std::string& path) {
  if (!path.empty()) write_file_atomic(path, std::string_view());
  return path;
}

std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// FLOPs of one training step, the one count every runtime's train_step row uses (bench/torch_llama.py and
// bench/torch_hf_llama.py read it from the --dump directory's train_losses.json rather than computing their own):
//   6 B T (L (2 q d + 2 kv d + 3 d h) + V d)  +  12 B T^2 q L
// with d = dim, q = n_heads head_dim, kv = n_kv_heads head_dim, h = the MLP's hidden size, V = vocabulary, L =
// layers: 6 per weight per token for every linear and the head (forward 2, input gradient 2, weight gradient 2), and
// for each layer's two attention products (scores and scores x values, forward and both gradients) 12 B T^2 q, as
// computed: full T x T scores, no causal skipping. Norms, rope, softmax, the loss and the optimizer are not counted.
double train_step_flops(const LlamaConfig& c, int64_t B, int64_t T) {
  const double tokens = static_cast<double>(B * T), kv = static_cast<double>(c.kv_dim());
  const double d = static_cast<double>(c.dim), q = static_cast<double>(c.q_dim()), h = static_cast<double>(c.hidden_dim());
  const double linear = static_cast<double>(c.n_layers) * (2 * q * d + 2 * kv * d + 3 * d * h) +
                        static_cast<double>(c.vocab_size) * d;
  return 6.0 * tokens * linear + 12.0 * static_cast<double>(B) * static_cast<double>(T * T) * q * c.n_layers;
}

void write_words(const std::string& path, const std::vector<int32_t>& v) {
  write_file_atomic(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4));
}

}  // namespace

int run_bench(const BenchOptions& opt) {
  const std::vector<std::array<int64_t, 3>> mm_shapes = parse_mm_shapes(opt.mm_shapes);  // before the device
  DeviceOptions dopt;
  dopt.backend = opt.backend;
  dopt.cooperative_matrix = opt.cooperative_matrix;
  const Precision precision = parse_precision(opt.precision);
  precision_options(dopt, precision);
  dopt.subgroup_matrix = dopt.subgroup_matrix || opt.subgroup_matrix;
  Device dev = Device::open(dopt);
  require_precision(dev, precision);  // before any work
  const bool sm_enabled = dev.features().subgroup_matrix;
  // --subgroup-matrix alone opens the device with the feature and its toggles but keeps the GEMMs fp32: what it
  // compares is the toggles' cost on the fp32 kernels.
  if (precision == Precision::Fp32) dev.impl().features.subgroup_matrix = false;
  const std::string prec = precision_name(precision);
  std::printf("device: %s (%s, %s%s), timestamps: %s", dev.info().name.c_str(), backend_name(dev.info().backend),
              dev.info().backend_label.c_str(), dev.info().compatibility_mode ? ", compatibility" : "",
              dev.features().timestamp_query ? "yes" : "no");
  if (dev.info().backend == Backend::NativeVulkan)
    std::printf(", cooperative matrix: %s", dev.features().cooperative_matrix ? "used" : "not used");
  else if (opt.subgroup_matrix || precision == Precision::Mixed)
    std::printf(", subgroup matrices: %s", sm_enabled ? "enabled (allow_unsafe_apis, use_vulkan_memory_model)"
                                                      : "not offered");
  std::printf(", GEMMs: %s", prec.c_str());
  // WGTRAIN_FORCE_GEMM=<n>: every fp32 GEMM of this run takes entry n of the tiling table (matmul/gemm_tiling.h),
  // so that scripts/h200/gemm_fp32.sh can time each entry.
  if (const char* f = std::getenv("WGTRAIN_FORCE_GEMM"); f && *f) {
    const auto& table = ops::detail::gemm_tilings();
    char* end = nullptr;
    const long n = std::strtol(f, &end, 10);
    if (*end != '\0' || n < 0 || n >= static_cast<long>(table.size()))
      throw ArgumentError(std::string("WGTRAIN_FORCE_GEMM=") + f + ": not an entry of the fp32 GEMM tilings (0 to " +
                          std::to_string(table.size() - 1) + ")");
    ops::detail::gemm_force = static_cast<int>(n);
    std::printf(", fp32 GEMM tiling forced: entry %ld of %zu (%s)", n, table.size(), table[static_cast<size_t>(n)].name);
  }
  // WGTRAIN_SPLIT_K=-1: no GEMM of this run is split along k (0, the default: where the shape calls for it; 1: wherever
  // it can be), so that a run can time what the splits gain (split_k.h).
  if (const char* f = std::getenv("WGTRAIN_SPLIT_K"); f && *f) {
    const std::string v = f;
    if (v != "-1" && v != "0" && v != "1")
      throw ArgumentError("WGTRAIN_SPLIT_K=" + v + ": -1 (never), 0 (where the shape calls for it) or 1 (always)");
    dev.impl().split_k = std::stoi(v);
    std::printf(", split-k: %s", v == "-1" ? "never" : v == "0" ? "by shape" : "always");
  }
  // WGTRAIN_SPLIT_TARGET=<n>: the workgroups a split of the mixed GEMMs aims at (default 384), for a sweep.
  if (const char* f = std::getenv("WGTRAIN_SPLIT_TARGET"); f && *f) {
    char* end = nullptr;
    const long n = std::strtol(f, &end, 10);
    if (*end != '\0' || n < 2 || n > (1 << 20))
      throw ArgumentError(std::string("WGTRAIN_SPLIT_TARGET=") + f + ": a count of workgroups, 2 to 1048576");
    dev.impl().split_target_mixed = n;
    std::printf(", mixed split target: %ld workgroups", n);
  }
  // WGTRAIN_GEMM_SM_ROWS=64|128: the mixed GEMMs' rows a workgroup forced (gemm_sm.wgsl's BM), for comparing them.
  if (const char* f = std::getenv("WGTRAIN_GEMM_SM_ROWS"); f && *f) {
    const std::string v = f;
    if (v != "64" && v != "128") throw ArgumentError("WGTRAIN_GEMM_SM_ROWS=" + v + ": 64 or 128");
    dev.impl().gemm_sm_rows = std::stoi(v);
    std::printf(", mixed GEMM rows a workgroup: %s", v.c_str());
  }
  std::printf("\n");
  const bool q = opt.quick;
  Sink results{open_json(opt.json_path), dev.info().name, backend_name(dev.info().backend)};
  const Guard guarded = guard(results, dev);
  auto want = [&](const std::string& name) { return bench_wants(opt.only, name); };
  // A benchmark whose ops this backend lacks is skipped with a line saying so.
  auto runs = [&](const char* what, const std::vector<std::string>& ops) {
    std::string missing;
    for (const auto& o : ops)
      if (!supports(dev, Registry::global().get(o))) missing += (missing.empty() ? "" : ", ") + o;
    if (missing.empty()) return true;
    std::printf("%-26s skipped: %s has no kernel for %s\n", what, backend_name(dev.info().backend), missing.c_str());
    return false;
  };
  Kernels kernels{dev};

  // Ceilings: a dense copy (bandwidth) and the fp32 GEMM (rate) through this same runtime.
  if (want("copy")) guarded("copy", [&] {
    const int64_t n = q ? (1 << 20) : (int64_t{1} << 26);  // 256 MiB
    const Tensor x = kernels.random({n}, -1, 1, 1), y = kernels.zeros({n});
    // A buffer-to-buffer copy (no shader): the native backend's only copy. Not on WebGPU, whose timestamps are
    // taken at compute passes, which a copy is not inside.
    if (dev.info().backend == Backend::NativeVulkan)
      results.push_back(measure(dev, "copy (buffer)", dims({n}), 0, 2.0 * n * 4, [&] { ops::copy_(y, x); }));
    if (runs("copy (dim-order)", {"contiguous", "add.Scalar"})) {
      // The dense copy first: the rows after it print their share of its bytes a second.
      const Result dense = measure(dev, "copy (dense, add 0)", dims({n}), 0, 2.0 * n * 4, [&] { ops::add(x, 0.0f); });
      results.push_back(dense);
      copy_bytes_per_s = dense.bytes / dense.seconds;
      const Tensor xt = x.reshape({n / 1024, 1024}).transpose(0, 1);  // a strided view: the copy kernel runs
      // WGTRAIN_FORCE_COPY=1|2|4|8[,...]: the transpose's tile forced (ops/shape/transpose_force.h; 8: 16-byte
      // words), rows named after it.
      namespace od = ops::detail;
      bool forced = false;
      const std::vector<int> tiles = env_forces("WGTRAIN_FORCE_COPY", od::kTransposeChoice, &forced);
      // Each also at an odd shape, 1023 x 65521 words (quick: 1023 x 1021): strides that are no power of two, and
      // no multiples of 4 (the 4-byte kernel there).
      const int64_t odd_a = q ? 1021 : 65521, odd_b = 1023;
      const Tensor xo = x.slice(0, 0, odd_a * odd_b).reshape({odd_a, odd_b}).transpose(0, 1);
      struct Restore {
        ~Restore() { od::transpose_force = od::kTransposeChoice; }
      } restore;
      for (int tile : tiles) {
        od::transpose_force = tile;
        const std::string tag = forced ? " f" + std::to_string(tile) : "";
        results.push_back(measure(dev, "copy (dim-order" + tag + ")", dims({1024, n / 1024}), 0, 2.0 * n * 4,
                                  [&] { ops::contiguous(xt); }));
        results.push_back(measure(dev, "copy (dim-order odd" + tag + ")", dims({odd_b, odd_a}), 0,
                                  2.0 * odd_a * odd_b * 4, [&] { ops::contiguous(xo); }));
      }
      od::transpose_force = od::kTransposeChoice;
      // The head-layout copy of attention: [B, T, H, hd] to [B, H, T, hd] (rows of hd words move whole).
      const int64_t B = q ? 2 : 16, T = q ? 64 : 512, H = 8, hd = 64;
      const Tensor heads = x.slice(0, 0, B * T * H * hd).reshape({B, T, H, hd}).permute({0, 2, 1, 3});
      results.push_back(measure(dev, "copy (permute 0,2,1,3)", dims({B, T, H, hd}), 0, 2.0 * B * T * H * hd * 4,
                                [&] { ops::contiguous(heads); }));
    }
  });
  // The mixed GEMMs' absmax pass (sm_absmax.wgsl, WebGPU only) over the step's operands ([tokens, width]: the k and v
  // projections' gradients, the model's width, the MLP's, the tied head's logits): one read gives each row's and
  // each column's maximum, combined atomically into zeros that the step makes once (not timed here).
  if (want("mixed absmax") && dev.info().backend != Backend::NativeVulkan) guarded("mixed absmax", [&] {
    const int64_t rows = q ? 256 : 8192;
    for (const int64_t cols : {int64_t{320}, int64_t{640}, int64_t{1728}, int64_t{8192}}) {
      const Tensor x = kernels.random({rows, cols}, -1, 1, 11), out = kernels.zeros({rows + cols});
      results.push_back(measure(dev, "mixed absmax", dims({rows, cols}), 0, rows * cols * 4.0,
                                [&] { ops::detail::row_and_column_absmax_(x, out); }));
    }
  });
  if (want("mm")) guarded("mm", [&] {
    const int64_t s = q ? 256 : 4096;
    const Tensor a = kernels.random({s, s}, -1, 1, 2), b = kernels.random({s, s}, -1, 1, 3);
    results.push_back(measure(dev, "mm " + prec, dims({s, s, s}), 2.0 * s * s * s, 3.0 * s * s * 4,
                              [&] { ops::mm(a, b); }));
    // The same product with A read through a transposed view (m stride 1): strided loads in fp32, 16-byte ones
    // along m in mixed (gemm_sm.wgsl's A_T).
    if (!runs("mm (A as a view)", {"contiguous"})) return;
    const Tensor at = ops::contiguous(a.transpose(0, 1)).transpose(0, 1);
    results.push_back(measure(dev, "mm " + prec + " (A as a view)", dims({s, s, s}), 2.0 * s * s * s,
                              3.0 * s * s * 4, [&] { ops::mm(at, b); }));
    // And B through one (k stride 1, as W^T of an f32 weight): gemm_sm.wgsl's B_T in mixed.
    const Tensor bt = ops::contiguous(b.transpose(0, 1)).transpose(0, 1);
    results.push_back(measure(dev, "mm " + prec + " (B as a view)", dims({s, s, s}), 2.0 * s * s * s,
                              3.0 * s * s * 4, [&] { ops::mm(a, bt); }));
  });
  // --mm-shapes: the same product at the shapes given, whatever --only says (they were asked for by name).
  if (!mm_shapes.empty()) guarded("mm (shape)", [&] {
    for (const auto& [M, N, K] : mm_shapes) {
      const Tensor a = kernels.random({M, K}, -1, 1, 2), b = kernels.random({K, N}, -1, 1, 3);
      results.push_back(measure(dev, "mm " + prec + " (shape)", dims({M, N, K}), 2.0 * M * N * K,
                                (M * K + K * N + M * N) * 4.0, [&] { ops::mm(a, b); }));
    }
  });
  // The GEMMs of the train_step row's model at its shapes (tokens = batch x seq), in this run's precision: the
  // three q4gsw products of each block linear shape (forward, input gradient, weight gradient accumulated) and the
  // tied head's f32 product.
  if (want("step_gemm") && runs("step_gemm", {"linear_q4gsw", "linear_q4gsw_backward", "linear_dW", "mm"}))
    guarded("step_gemm", [&] {
      const LlamaConfig c = LlamaConfig::preset(q ? "tiny" : opt.train_config);
      const int64_t M = (q ? 2 : opt.train_batch) * std::min(q ? int64_t{32} : opt.train_seq, c.max_seq_len);
      const int64_t D = c.dim, H = c.hidden_dim(), G = 32;
      struct Shape2 {
        const char* what;
        int64_t n, k;
      };
      for (const Shape2& l : {Shape2{"q/o", c.q_dim(), D}, Shape2{"k/v", c.kv_dim(), D}, Shape2{"gate/up", H, D},
                              Shape2{"down", D, H}}) {
        const int64_t N = l.n, K = l.k;
        const Kernels::Q4 w = kernels.q4(N, K, G, 4);
        const Tensor x = kernels.random({M, K}, -1, 1, 5), dy = kernels.random({M, N}, -1e-4, 1e-4, 6);
        const Tensor grad = kernels.random({N, K}, -1, 1, 7);
        const std::string shape = dims({M, N, K}) + " " + l.what;
        const double f = 2.0 * M * N * K, wbytes = N * K / 2.0 + q4gsw::groups(K, G) * N * 4.0;
        results.push_back(measure(dev, "step linear_q4gsw " + prec, shape, f, M * K * 4.0 + wbytes + M * N * 4.0,
                                  [&] { ops::linear_q4gsw(x, w); }));
        results.push_back(measure(dev, "step linear_q4gsw_backward " + prec, shape, f,
                                  M * N * 4.0 + wbytes + M * K * 4.0, [&] { ops::linear_q4gsw_backward(dy, w); }));
        results.push_back(measure(dev, "step linear_dW " + prec, shape, f, (M * N + M * K + 2.0 * N * K) * 4.0,
                                  [&] { ops::linear_dW(dy, x, &grad); }));
      }
      // The head: logits [M, vocab] = h [M, D] E^T, E the tied embedding [vocab, D].
      const int64_t V = c.vocab_size;
      const Tensor h = kernels.random({M, D}, -1, 1, 8), e = kernels.random({V, D}, -1, 1, 9);
      results.push_back(measure(dev, "step mm (head) " + prec, dims({M, V, D}), 2.0 * M * V * D,
                                (M * D + V * D + M * V) * 4.0, [&] { ops::mm(h, e.transpose(0, 1)); }));
    });
  bench_kernels(kernels, opt, results, guarded);

  // Causal attention forward and backward at the train_step model's shape, fused (ops::attention) and as the
  // composite path it replaced (heads permuted out, KV heads expanded, [B * H, T, T] scores, causal softmax, bmm;
  // the backward through autograd). The f+b rows count the same FLOPs: the causal half of the two forward and four
  // backward products, 6 B H T^2 hd (the fused backward also recomputes the scores; not counted). The composite row
  // also scales q and takes the loss's product and sum with dout: elementwise passes over [B, T, H * hd].
  if (want("attention") && runs("attention", {"attention", "attention_backward", "bmm", "_softmax"}))
    guarded("attention", [&] {
      const LlamaConfig c = LlamaConfig::preset(q ? "tiny" : opt.train_config);
      const int64_t B = q ? 2 : opt.train_batch, T = std::min(q ? int64_t{64} : opt.train_seq, c.max_seq_len);
      const int64_t H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim();
      const Tensor qt = kernels.random({B, T, H, hd}, -1, 1, 20), kt = kernels.random({B, T, KV, hd}, -1, 1, 21);
      const Tensor vt = kernels.random({B, T, KV, hd}, -1, 1, 22), dout = kernels.random({B, T, H * hd}, -1, 1, 23);
      const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
      const double flops = 6.0 * static_cast<double>(B * H) * static_cast<double>(T * T) * static_cast<double>(hd);
      const std::string base = dims({B, T}) + " h" + std::to_string(H) + " kv" + std::to_string(KV) + " hd" +
                               std::to_string(hd), shape = base + " f+b";
      // Each kernel set alone and together: the tiled kernels the op picks (their tilings in the name; "rows" where
      // it falls back), then the row kernels forced. Forward 2 B H T^2 hd FLOPs, backward 4 (the causal half).
      namespace od = ops::detail;
      auto tiling = [&](od::AttentionKernel kernel) {
        const od::AttentionTiling* t = od::attention_choice(dev.impl(), kernel, hd);
        return t ? od::attention_tiling_name(*t) : "rows";
      };
      // A dK/dV entry marked s writes dS and dq is dS k (one product): the dq table's entry does not run.
      auto dkv_writes_ds = [&] {
        const od::AttentionTiling* t = od::attention_choice(dev.impl(), od::AttentionKernel::BackwardDkv, hd);
        return t && t->ds;
      };
      // Then every entry of the tables forced (entry i of each; a shorter table's last), for choosing their order.
      int entries = 0;
      for (auto kernel : {od::AttentionKernel::Forward, od::AttentionKernel::BackwardDq, od::AttentionKernel::BackwardDkv}) {
        int n = 0;
        od::attention_tilings(kernel, &n);
        entries = std::max(entries, n);
      }
      // WGTRAIN_FORCE_ATTENTION=<n>[,...] times only those (-3 the subgroup-matrix kernels, -2 the table's choice,
      // -1 the row kernels, 0.. an entry).
      bool forced = false;
      std::vector<int> forces = env_forces("WGTRAIN_FORCE_ATTENTION", od::kTableChoice, &forced);
      if (!forced) {
        forces = {od::kTableChoice, od::kRowKernels};
        for (int i = 0; i < entries; ++i) forces.push_back(i);
      }
      for (int force : forces) {
        od::attention_force = force;
        // The table's choice is the subgroup-matrix kernels where they can run (--precision mixed on a device with
        // the feature): their S, dP and dq products are all in the dq kernel.
        const bool sm = force == od::kSubgroupMatrix ||
                        (force == od::kTableChoice && od::attention_sm_missing(dev.impl(), hd, true).empty());
        std::string tag;
        try {
          tag = sm ? " (subgroup-matrix BN" + std::to_string(od::attention_sm_tile(hd)) + ")"
                : force == od::kRowKernels ? " (rows)"
                                         : std::string(force == od::kTableChoice ? " (choice " : " (entry ") +
                                               tiling(od::AttentionKernel::Forward) + ", " +
                                               (dkv_writes_ds() ? std::string("dq from dS")
                                                                : tiling(od::AttentionKernel::BackwardDq)) +
                                               ", " +
                                               tiling(od::AttentionKernel::BackwardDkv) + ")";
        } catch (const UnsupportedError& e) {
          std::printf("attention entry %d skipped: %s\n", force, e.what());
          continue;
        }
        try {
          const ops::Attention a = ops::attention(qt, kt, vt, scale);
          results.push_back(measure(dev, "attention fwd" + tag, base, flops / 3, 0,
                                    [&] { ops::attention(qt, kt, vt, scale); }));
          results.push_back(measure(dev, "attention bwd" + tag, base, flops * 2 / 3, 0,
                                    [&] { ops::attention_backward(dout, qt, kt, vt, a, scale); }));
          // Each backward kernel alone, counting the products it computes: dQ's 3 (s, dp, dq; 1 from dS, with
          // the D pass), dK/dV's 4 (and the dS writes for an s entry).
          const double dq_flops = !sm && dkv_writes_ds() ? flops / 6 : flops / 2;
          for (int part : {od::kBackwardDq, od::kBackwardDkv}) {
            od::attention_backward_parts = part;
            const bool dq = part == od::kBackwardDq;
            results.push_back(measure(dev, std::string(dq ? "attention bwd dq" : "attention bwd dkv") + tag, base,
                                      dq ? dq_flops : flops * 2 / 3, 0,
                                      [&] { ops::attention_backward(dout, qt, kt, vt, a, scale); }));
          }
          od::attention_backward_parts = od::kBackwardAll;
          results.push_back(measure(dev, "attention f+b" + tag, base, flops, 0, [&] {
            const ops::Attention fa = ops::attention(qt, kt, vt, scale);
            ops::attention_backward(dout, qt, kt, vt, fa, scale);
          }));
        } catch (...) {
          od::attention_force = od::kTableChoice;
          od::attention_backward_parts = od::kBackwardAll;
          throw;
        }
      }
      od::attention_force = od::kTableChoice;
      // The composite path: its forward alone (the graph built, no backward) and forward + backward.
      auto composite = [&](bool backward) {
        namespace ag = autograd;
        const ag::Var qv = ag::Var::leaf(qt), kv = ag::Var::leaf(kt), vv = ag::Var::leaf(vt);
        const ag::Var qh = ag::reshape(ag::mul(ag::permute(qv, {0, 2, 1, 3}), scale), {B * H, T, hd});
        auto heads = [&](const ag::Var& x) {
          const ag::Var e = ag::expand(ag::reshape(ag::permute(x, {0, 2, 1, 3}), {B, KV, 1, T, hd}),
                                       {B, KV, H / KV, T, hd});
          return ag::reshape(e, {B * H, T, hd});
        };
        const ag::Var o = ag::bmm(ag::softmax(ag::bmm(qh, ag::transpose(heads(kv), 1, 2)), -1, true), heads(vv));
        const ag::Var merged = ag::reshape(ag::permute(ag::reshape(o, {B, H, T, hd}), {0, 2, 1, 3}), {B, T, H * hd});
        if (backward) ag::backward(ag::sum(ag::mul(merged, ag::Var::constant(dout)), {}));
      };
      results.push_back(measure(dev, "attention fwd (composite)", base, flops / 3, 0, [&] { composite(false); }));
      results.push_back(measure(dev, "attention (composite)", shape, flops, 0, [&] { composite(true); }));
    });

  // A whole training step of a Llama model (forward, backward, AdamW, requantisation), recorded once and replayed.
  if (want("train_step") && runs("train_step", model_ops())) guarded("train_step", [&] {
    const std::string preset = q ? "tiny" : opt.train_config;
    const LlamaConfig c = LlamaConfig::preset(preset);
    const int64_t B = q ? 2 : opt.train_batch, T = std::min(q ? int64_t{32} : opt.train_seq, c.max_seq_len);
    Llama model(dev, c, 1);
    std::optional<MemoryScope> moments(std::in_place, dev, MemoryCategory::OptimizerState);
    const Tensor m = ops::full(dev, {model.arena_size()}, 0.0), v = ops::full(dev, {model.arena_size()}, 0.0);
    moments.reset();
    ops::AdamWOptions ao;
    ao.lr = 1e-3;
    ao.beta2 = 0.95;
    ao.weight_decay = 0.1;
    ops::AdamW opt_w(model.adamw_params(m, v), ao);
    // A batch of uniform random tokens: the cost of a step does not depend on the text.
    SplitMix64 rng(7);
    std::vector<int32_t> stream(static_cast<size_t>(B * T + 1));
    for (auto& t : stream) t = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(c.vocab_size));
    const std::vector<int32_t> in(stream.begin(), stream.end() - 1), tg(stream.begin() + 1, stream.end());
    const Tensor tokens = Tensor::from_host(dev, {B, T}, in), targets = Tensor::from_host(dev, {B * T}, tg);
    if (!opt.dump_dir.empty()) {
      save_checkpoint(opt.dump_dir + "/train_init.safetensors", model, nullptr, nullptr, "");
      write_words(opt.dump_dir + "/train_inputs.i32", in);
      write_words(opt.dump_dir + "/train_targets.i32", tg);
    }
    Tensor loss;
    const Recording step = dev.record([&] { loss = model.train_step(tokens, targets, opt_w); });
    // The pool's high-water mark of this row (model, optimizer, the recorded step), beside PyTorch's
    // torch.cuda.max_memory_allocated in bench/torch_llama.py.
    const MemoryUsage memory = dev.memory().peak;
    std::printf("train_step GPU memory (pool high-water mark): %s\n", describe_memory(memory).c_str());
    // The first steps' losses, for comparison with the same model elsewhere.
    std::vector<double> losses;
    int64_t s = 0;
    for (; s < 5; ++s) {
      opt_w.set_step(s + 1, ao.lr);
      step.replay();
      losses.push_back(loss.to_host_f32()[0]);
    }
    if (!opt.dump_dir.empty()) {
      std::ostringstream out;
      out << "{\"config\": " << c.to_json() << ", \"batch\": " << B << ", \"seq\": " << T << ", \"lr\": " << ao.lr
          << ", \"beta1\": " << ao.beta1 << ", \"beta2\": " << ao.beta2 << ", \"eps\": " << ao.eps
          << ", \"weight_decay\": " << ao.weight_decay << ", \"flops\": " << fmt_double(train_step_flops(c, B, T))
          << ", \"losses\": [";
      for (size_t i = 0; i < losses.size(); ++i) out << (i ? ", " : "") << fmt_double(losses[i]);
      out << "]}\n";
      write_file_atomic(opt.dump_dir + "/train_losses.json", out.str());
    }
    std::printf("train_step losses of steps 1-5: %.6f %.6f %.6f %.6f %.6f (%zu dispatches a step)\n", losses[0],
                losses[1], losses[2], losses[3], losses[4], step.dispatches());
    const std::string shape = preset + " " + dims({B, T});
    Result r = measure(dev, "train_step", shape, train_step_flops(c, B, T), 0, [&] {
      opt_w.set_step(++s, ao.lr);
      step.replay();
    });
    r.memory = memory;
    results.push_back(r);
    // With the loss read back every step, as the trainer does: wall clock, host included.
    const int reps = q ? 3 : 20;
    dev.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      opt_w.set_step(++s, ao.lr);
      step.replay();
      (void)loss.to_host_f32();
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("train_step %s: %.0f tokens/s on the GPU (%.2f ms), %.0f tokens/s with the loss read every step "
                "(%.2f ms)\n",
                shape.c_str(), static_cast<double>(B * T) / r.seconds, r.seconds * 1e3,
                static_cast<double>(B * T) / wall, wall * 1e3);
    results.push_back({"train_step (loss read each step)", shape, train_step_flops(c, B, T), 0, wall, reps, false});
  });

  print_profile(dev);
  return results.failures ? 1 : 0;
}

}  // namespace wgtrain::cli
