// The memory estimate that refuses an oversized model before any work: sizes from the config alone, and errors
// that name the field and the sizes.
#include <gtest/gtest.h>

#include <string>

#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/memory_estimate.h"

namespace wgtrain {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

DeviceLimits limits(double max_buffer_gib, double max_binding_gib) {
  DeviceLimits l;
  l.max_buffer_size = static_cast<uint64_t>(max_buffer_gib * kGiB);
  l.max_storage_binding_size = static_cast<uint64_t>(max_binding_gib * kGiB);
  return l;
}

std::string refusal(const LlamaConfig& c, int64_t batch, int64_t seq, const DeviceLimits& l, double host,
                    bool device_on_host = false) {
  try {
    check_training_fits(estimate_training_memory(c, batch, seq), l, host, device_on_host);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryEstimate, CountsTheModelsParameters) {
  for (const auto& name : LlamaConfig::preset_names()) {
    const LlamaConfig c = LlamaConfig::preset(name);
    const MemoryEstimate e = estimate_training_memory(c, 16, c.max_seq_len);
    EXPECT_DOUBLE_EQ(e.parameters, static_cast<double>(c.parameter_count())) << name;
    EXPECT_DOUBLE_EQ(e.arena_bytes, 4.0 * static_cast<double>(c.parameter_count())) << name;
    EXPECT_DOUBLE_EQ(e.logits_bytes, 4.0 * 16 * static_cast<double>(c.max_seq_len * c.vocab_size)) << name;
    // Weights, gradients and two moments at least, and the host's copies in a save.
    EXPECT_GT(e.device_bytes, 4 * e.arena_bytes) << name;
    EXPECT_DOUBLE_EQ(e.host_bytes, 9 * e.arena_bytes) << name;
  }
}

TEST(MemoryEstimate, ThePresetsFitAModestDevice) {
  for (const auto& name : LlamaConfig::preset_names()) {
    const LlamaConfig c = LlamaConfig::preset(name);
    // At the trainer's default sizes: 16 x max_seq_len on a GPU, 8 x 64 on a CPU rasteriser.
    EXPECT_EQ(refusal(c, 16, c.max_seq_len, limits(2, 1), 8 * kGiB, false), "") << name;
    EXPECT_EQ(refusal(c, 8, 64, limits(2, 1), 8 * kGiB, true), "") << name;
  }
}

TEST(MemoryEstimate, AHugeDimIsRefusedNamingItAndTheSizes) {
  LlamaConfig c = LlamaConfig::preset("tiny");
  c.dim = 100000;
  c.n_heads = 4;
  const std::string msg = refusal(c, 8, 64, limits(4, 2), 64 * kGiB);
  EXPECT_NE(msg.find("dim 100000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TiB"), std::string::npos) << msg;                          // the buffer it would need
  EXPECT_NE(msg.find("2.0 GiB (max storage buffer binding)"), std::string::npos) << msg;  // and the limit
}

TEST(MemoryEstimate, AHugeVocabularyIsRefusedNamingIt) {
  LlamaConfig c = LlamaConfig::preset("tiny");
  c.vocab_size = 1000000000;
  const std::string msg = refusal(c, 8, 64, limits(1024, 1024), 64 * kGiB);
  EXPECT_NE(msg.find("vocab_size 1000000000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("embedding"), std::string::npos) << msg;
}

TEST(MemoryEstimate, LogitsTooLargeForABufferNameTheBatch) {
  LlamaConfig c = LlamaConfig::preset("tiny");
  c.vocab_size = 100000;  // 400 KB of logits per token
  const std::string msg = refusal(c, 64, 128, limits(2, 2), 64 * kGiB);
  EXPECT_NE(msg.find("logits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--batch-size"), std::string::npos) << msg;
}

TEST(MemoryEstimate, MoreThanTheHostHasIsRefused) {
  const LlamaConfig c = LlamaConfig::preset("base");  // 51M parameters: 200 MB a copy
  std::string msg = refusal(c, 16, 512, limits(64, 64), 1 * kGiB);
  EXPECT_NE(msg.find("this machine has 1.0 GiB"), std::string::npos) << msg;
  // On a CPU rasteriser the device's buffers are host memory too.
  EXPECT_EQ(refusal(c, 16, 512, limits(64, 64), 4 * kGiB, false), "");
  msg = refusal(c, 16, 512, limits(64, 64), 4 * kGiB, true);
  EXPECT_NE(msg.find("CPU rasteriser"), std::string::npos) << msg;
}

TEST(MemoryEstimate, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1.5 * kGiB), "1.5 GiB");
  EXPECT_EQ(format_bytes(3.0 * 1024 * kGiB), "3.0 TiB");
  EXPECT_GT(physical_memory_bytes(), 0.0);
}

}  // namespace
}  // namespace wgtrain
