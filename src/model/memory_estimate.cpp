// The memory a training run needs, from its config: see wgtrain/memory_estimate.h.
#include "wgtrain/memory_estimate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "wgtrain/device.h"
#include "wgtrain/error.h"

namespace wgtrain {

namespace {

std::string count_text(double n) {
  char buf[32];
  if (n < 1e6)
    std::snprintf(buf, sizeof buf, "%.0f", n);
  else
    std::snprintf(buf, sizeof buf, "%.3g", n);
  return buf;
}

std::string field(const char* name, int64_t v) { return std::string(name) + " " + std::to_string(v); }

}  // namespace

std::string format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (b >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

MemoryEstimate estimate_training_memory(const LlamaConfig& c, int64_t batch, int64_t seq_len) {
  const double V = static_cast<double>(c.vocab_size), D = static_cast<double>(c.dim);
  const double L = static_cast<double>(c.n_layers), H = static_cast<double>(c.n_heads);
  const double hd = static_cast<double>(c.head_dim()), qd = H * hd, kv = static_cast<double>(c.n_kv_heads) * hd;
  const double F = static_cast<double>(c.hidden_dim());
  const double B = static_cast<double>(batch), T = static_cast<double>(seq_len);
  // As LlamaConfig::parameter_count, in doubles.
  double block = 2 * D * qd + 2 * kv * D + 3 * D * F + 2 * D;
  if (c.qkv_bias) block += qd + 2 * kv;
  if (c.o_bias) block += D;
  if (c.qk_norm) block += 2 * hd;
  const double embedding = V * D * (c.tie_embeddings ? 1 : 2);
  MemoryEstimate e;
  e.parameters = embedding + L * block + D;
  e.arena_bytes = 4 * e.parameters;  // every weight trains in pre-training (Trainable::All)
  e.logits_bytes = 4 * B * T * V;
  // q4gsw linears keep 4-bit codes and a float32 scale per group beside their latents.
  double q4 = 0;
  if (c.quantize_blocks) {
    const double g = static_cast<double>(c.group_size);
    auto linear = [&](double n, double k) { return n * std::ceil(k / 8) * 4 + n * std::ceil(k / g) * 4; };
    q4 += L * (linear(qd, D) + 2 * linear(kv, D) + linear(D, qd) + 2 * linear(F, D) + linear(D, F));
  }
  // What the tape must keep per layer for the backward, at the least: the inputs of the layer's two norms, the
  // rotated q, k and v, the attention output and its per-query logsumexp (fused attention keeps no [T, T] scores),
  // gate and up. (The normed copies and gate and up's product are made again in the backward.)
  const double per_token = 2 * D + 2 * qd + 2 * kv + 2 * F;
  const double activations = 4 * L * B * T * (per_token + H);
  e.device_bytes = 4 * e.arena_bytes + q4 + activations + e.logits_bytes;
  // A checkpoint save holds the weights and both moments on the host three times over: downloaded, copied into
  // the file's tensors, serialised.
  e.host_bytes = 9 * e.arena_bytes;
  if (embedding >= L * block)
    e.dominant = field("vocab_size", c.vocab_size) + " x " + field("dim", c.dim) +
                 (c.tie_embeddings ? " (the token embedding)" : " (the token embedding and the untied head)");
  else
    e.dominant = field("n_layers", c.n_layers) + " blocks of " + field("dim", c.dim) + ", " +
                 field("ffn_dim", c.hidden_dim());
  return e;
}

void check_training_fits(const MemoryEstimate& e, const DeviceLimits& limits, double host_memory,
                         bool device_on_host) {
  // The largest buffer a kernel may bind whole: the smaller of the two limits.
  const double buffer = static_cast<double>(std::min(limits.max_buffer_size, limits.max_storage_binding_size));
  const char* which = limits.max_buffer_size <= limits.max_storage_binding_size ? "max buffer size"
                                                                                : "max storage buffer binding";
  const std::string model = "the model config gives " + count_text(e.parameters) + " parameters (most of them from " +
                            e.dominant + ")";
  if (e.arena_bytes > buffer)
    throw Error(model + ": one buffer holds every trainable weight, " + format_bytes(e.arena_bytes) +
                ", and this device's largest is " + format_bytes(buffer) + " (" + which + "); make the model smaller");
  // Kernels index elements with 32 bits.
  if (e.arena_bytes / 4 > 4294967295.0)
    throw Error(model + ": more trainable weights than the kernels' 32-bit indices reach (4.29e9); make the model "
                "smaller");
  if (e.logits_bytes > buffer)
    throw Error("a training step's logits (batch x seq_len x vocab_size, float32) need a buffer of " +
                format_bytes(e.logits_bytes) + ", and this device's largest is " + format_bytes(buffer) + " (" +
                which + "); lower --batch-size or --seq-len, or the config's vocab_size");
  if (host_memory > 0) {
    const double need = e.host_bytes + (device_on_host ? e.device_bytes : 0);
    if (need > host_memory)
      throw Error(model + ": training it needs at least " + format_bytes(need) + " of memory (" +
                  (device_on_host ? "the device's buffers, " + format_bytes(e.device_bytes) +
                                        ", live in host memory on a CPU rasteriser; "
                                  : std::string()) +
                  "a checkpoint save copies weights and AdamW moments, " + format_bytes(e.host_bytes) +
                  ") and this machine has " + format_bytes(host_memory) + "; make the model smaller");
  }
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size) : 0.0;
}

}  // namespace wgtrain
