// The memory report: the pool's bytes by category (MemoryScope), now and at the high-water mark, through a
// training step, a recording and the release of the idle pool.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <vector>

#include "support/test_support.h"
#include "wgtrain/adamw.h"
#include "wgtrain/device.h"
#include "wgtrain/llama.h"
#include "wgtrain/ops.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/trainer.h"

namespace wgtrain {
namespace {

// A device of its own: the shared one carries the pool state of every test before.
Device fresh_device() {
  DeviceOptions o;
  o.poison = true;
  return Device::open(o);
}

uint64_t sum_of_categories(const MemoryUsage& u) {
  uint64_t n = 0;
  for (uint64_t b : u.by_category) n += b;
  return n;
}

// One recorded training step of a small q4 model (awkward sizes: vocab 300, dim 40, ffn 72, group 8).
TEST(Memory, ATrainingStepsPeakSplitsIntoItsCategories) {
  Device dev = fresh_device();
  LlamaConfig c;
  c.vocab_size = 300;
  c.dim = 40;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 72;
  c.max_seq_len = 24;
  c.group_size = 8;
  c.tie_embeddings = false;
  Llama model(dev, c, 3);
  Tensor m, v;
  {
    const MemoryScope scope(dev, MemoryCategory::OptimizerState);
    m = ops::full(dev, {model.arena_size()}, 0.0);
    v = ops::full(dev, {model.arena_size()}, 0.0);
  }
  ops::AdamW adamw(model.adamw_params(m, v), {});
  const int64_t B = 3, T = 19;
  std::vector<int32_t> ids(static_cast<size_t>(B * T + 1));
  for (auto& t : ids) t = static_cast<int32_t>(test::rng()() % static_cast<uint64_t>(c.vocab_size));
  const Tensor tok = Tensor::from_host(dev, {B, T}, std::span<const int32_t>(ids.data(), B * T));
  const Tensor tgt = Tensor::from_host(dev, {B * T}, std::span<const int32_t>(ids.data() + 1, B * T));
  Tensor loss;
  const Recording step = dev.record([&] { loss = model.train_step(tok, tgt, adamw); });
  adamw.set_step(1, 1e-3);
  step.replay();
  ASSERT_TRUE(std::isfinite(loss.to_host_f32()[0]));

  const MemoryReport r = dev.memory();
  const MemoryUsage& p = r.peak;
  EXPECT_EQ(p.total, dev.stats().peak_bytes_allocated);
  EXPECT_EQ(sum_of_categories(p) + p.pool_overhead, p.total);
  EXPECT_LE(p.idle, p.pool_overhead);
  // The overhead is size-class rounding (at most 1/8 of a buffer, 256 bytes for small ones) and idle buffers: well
  // under a third of a pool this small.
  EXPECT_LT(p.pool_overhead, p.total / 3) << describe_memory(p);

  // Weights: the trainable arena (latents included), q4 codes and scales; as the model counts them, and as counted
  // here from the parameter list.
  uint64_t weights = static_cast<uint64_t>(model.arena_size()) * 4;
  for (const auto& param : model.params())
    if (param.q4 >= 0) {
      const int64_t n = param.shape[0], k = param.shape[1];
      weights += static_cast<uint64_t>(n * q4gsw::words_per_row(k) + q4gsw::groups(k, c.group_size) * n) * 4;
    }
  EXPECT_EQ(model.weight_bytes(), weights);
  EXPECT_EQ(p[MemoryCategory::Weights], weights) << describe_memory(p);
  // AdamW keeps two float32 moments per trainable element (its segment tables and scalars are "other").
  EXPECT_EQ(p[MemoryCategory::OptimizerState], 2 * static_cast<uint64_t>(model.arena_size()) * 4);
  EXPECT_EQ(p[MemoryCategory::Gradients], static_cast<uint64_t>(model.arena_size()) * 4);
  // The forward's tensors, at least the logits [B * T, V]; and the backward's.
  EXPECT_GE(p[MemoryCategory::Activations], static_cast<uint64_t>(B * T * c.vocab_size) * 4) << describe_memory(p);
  EXPECT_GT(p[MemoryCategory::Temporaries], 0u) << describe_memory(p);
  // Tokens, targets, the rotary tables and the optimizer's tables.
  EXPECT_GE(p[MemoryCategory::Other], static_cast<uint64_t>(2 * B * T) * 4);
  // Nothing is allocated by a replay.
  EXPECT_EQ(r.current.total, p.total);
}

// The trainer's wiring: the report it keeps for `wgtrain train` has the model's weights, AdamW's two moments and
// the gradients in their categories, and the recorded step in activations and temporaries. (Set-up only: a
// byte-level model on the Brown corpus, no training.)
TEST(Memory, TheTrainersStepReportHasEveryCategory) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("wgtrain-memory-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "model.json") << R"({"vocab_size": 256, "dim": 32, "n_layers": 1, "n_heads": 2,
                                           "n_kv_heads": 1, "ffn_dim": 64, "max_seq_len": 16})";
  Device dev = fresh_device();
  TrainOptions o;
  o.model = (dir / "model.json").string();
  o.data = "brown";
  o.out_dir = (dir / "run").string();
  o.batch_size = 2;
  o.seq_len = 16;
  o.eval_batches = 1;
  const Trainer trainer(dev, o);
  const MemoryUsage& p = trainer.step_memory().peak;
  const uint64_t arena = static_cast<uint64_t>(trainer.model().arena_size()) * 4;
  EXPECT_EQ(sum_of_categories(p) + p.pool_overhead, p.total);
  EXPECT_EQ(p[MemoryCategory::Weights], trainer.model().weight_bytes()) << describe_memory(p);
  EXPECT_EQ(p[MemoryCategory::OptimizerState], 2 * arena) << describe_memory(p);
  EXPECT_EQ(p[MemoryCategory::Gradients], arena) << describe_memory(p);
  // The logits [2 * 16, 256] are live at the backward's start; the backward frees each rule's saved tensors as it
  // goes, so the peak may come later, with the logits' buffer idle in the pool: it is in the total either way.
  EXPECT_GT(p[MemoryCategory::Activations], 0u) << describe_memory(p);
  EXPECT_GE(p.total, trainer.model().weight_bytes() + 3 * arena + uint64_t{2 * 16 * 256 * 4}) << describe_memory(p);
  EXPECT_GT(p[MemoryCategory::Temporaries], 0u) << describe_memory(p);
  // The validation step, recorded after the report, added its own buffers to the device's.
  EXPECT_GT(dev.memory().peak.total, p.total);
  fs::remove_all(dir);
}

TEST(Memory, ATemporaryFreedInsideAScopeDoesNotCountAfterIt) {
  Device dev = fresh_device();
  const MemoryUsage before = dev.memory().current;
  {
    const MemoryScope scope(dev, MemoryCategory::Temporaries);
    const Tensor t = Tensor::empty(dev, {1001});
    {
      const MemoryScope inner(dev, MemoryCategory::Activations);  // nests: the innermost wins
      const Tensor a = Tensor::empty(dev, {7, 3});
      EXPECT_EQ(dev.memory().current[MemoryCategory::Activations], before[MemoryCategory::Activations] + 84);
    }
    const Tensor u = ops::add(t, 1.0f);  // an op's output takes the scope too
    const MemoryUsage inside = dev.memory().current;
    EXPECT_EQ(inside[MemoryCategory::Temporaries], before[MemoryCategory::Temporaries] + 2 * 4004);
    EXPECT_EQ(inside[MemoryCategory::Activations], before[MemoryCategory::Activations]);
  }
  const MemoryUsage after = dev.memory().current;
  EXPECT_EQ(after[MemoryCategory::Temporaries], before[MemoryCategory::Temporaries]);
  EXPECT_EQ(after.in_use(), before.in_use());
  EXPECT_GT(after.idle, before.idle);  // the buffers stay pooled, as overhead
  // The scope is gone: a new tensor is "other" again.
  const Tensor o = Tensor::empty(dev, {5});
  EXPECT_EQ(dev.memory().current[MemoryCategory::Other], before[MemoryCategory::Other] + 20);
  // The high-water mark saw them all at once.
  EXPECT_GE(dev.memory().peak.total, before.total + 2 * 4004 + 84);
}

TEST(Memory, ARecordingKeepsTheBuffersOfItsReleasedTensorsCounted) {
  Device dev = fresh_device();
  const std::vector<float> host(999, 0.25f);
  const Tensor x = Tensor::from_host(dev, {999}, host);
  const MemoryUsage before = dev.memory().current;
  Tensor y;
  std::optional<Recording> rec;
  rec = dev.record([&] {
    const MemoryScope scope(dev, MemoryCategory::Temporaries);
    const Tensor a = ops::add(x, 1.0f);  // released inside: the replay still writes it
    y = ops::mul(a, 2.0f);
  });
  const MemoryUsage recorded = dev.memory().current;
  EXPECT_EQ(recorded[MemoryCategory::Temporaries], before[MemoryCategory::Temporaries] + 2 * 3996);
  rec->replay();
  EXPECT_EQ(y.to_host_f32().size(), 999u);
  rec.reset();
  y = Tensor();
  const MemoryUsage after = dev.memory().current;
  EXPECT_EQ(after[MemoryCategory::Temporaries], before[MemoryCategory::Temporaries]);
  EXPECT_EQ(after.in_use(), before.in_use());
}

TEST(Memory, ReleasingTheCacheEmptiesThePoolAndResetStartsANewPeak) {
  Device dev = fresh_device();
  const uint64_t held = dev.memory().current.in_use();
  {
    const Tensor big = Tensor::empty(dev, {1 << 18});
    const Tensor small = ops::add(big, 0.5f);
  }
  MemoryUsage now = dev.memory().current;
  EXPECT_GE(now.idle, uint64_t{2} << 20);
  EXPECT_EQ(now.in_use(), held);
  const uint64_t peak = dev.memory().peak.total;
  EXPECT_GE(peak, held + (uint64_t{2} << 20));
  dev.release_cached_memory();
  now = dev.memory().current;
  EXPECT_EQ(now.idle, 0u);
  EXPECT_EQ(now.in_use(), held);
  EXPECT_EQ(dev.stats().bytes_allocated, now.total);
  EXPECT_EQ(dev.memory().peak.total, peak);  // the mark stays until reset
  dev.reset_peak_memory();
  EXPECT_EQ(dev.memory().peak.total, now.total);
}

}  // namespace
}  // namespace wgtrain
