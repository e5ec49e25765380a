// A run's files belong together: a checkpoint names the tokenizer it was trained with, and generation (or export)
// refuses a tokenizer or config.json from another run before it produces a token.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/test_support.h"
#include "wgtrain/checkpoint.h"
#include "wgtrain/error.h"
#include "wgtrain/generate.h"
#include "wgtrain/tokenizer.h"

namespace wgtrain {
namespace {

namespace fs = std::filesystem;
using test::device;

fs::path scratch_root() { return fs::temp_directory_path() / ("wgtrain-run-files-test-" + std::to_string(::getpid())); }

// Removes this process's scratch directories at exit (forked children leave through _exit, without it).
const struct RemoveScratch {
  ~RemoveScratch() {
    std::error_code ec;
    fs::remove_all(scratch_root(), ec);
  }
} remove_scratch;

fs::path scratch(const std::string& name) {
  const fs::path p = scratch_root() / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

LlamaConfig small_config(int64_t vocab) {
  LlamaConfig c;
  c.vocab_size = vocab;
  c.dim = 32;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.ffn_dim = 64;
  c.max_seq_len = 16;
  return c;
}

// A run directory as the trainer leaves it: a checkpoint bound to its tokenizer, the tokenizer, config.json.
void write_run(const fs::path& dir, const LlamaConfig& c, const Tokenizer& tok) {
  tok.save((dir / "tokenizer.json").string());
  std::ofstream(dir / "config.json") << c.to_json() << "\n";
  const Llama model(device(), c, 1);
  save_checkpoint((dir / "checkpoint.safetensors").string(), model, nullptr, nullptr, "",
                  tokenizer_file_hash((dir / "tokenizer.json").string()));
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Text with enough distinct pairs for a few hundred merges; `seed` picks another text (and so other merges).
std::string text(uint64_t seed) {
  const char* syllables[] = {"ka", "lo", "mi", "ter", "an", "sul", "pe", "dra", "vo", "nix", "qua", "bel", "or", "ut"};
  std::string out;
  uint64_t x = seed;
  for (int w = 0; w < 3000; ++w) {
    for (int k = 0; k < 3; ++k) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      out += syllables[(x >> 33) % 14];
    }
    out += w % 11 == 10 ? ".\n" : " ";
  }
  return out;
}

TEST(RunFiles, TheCheckpointNamesItsTokenizer) {
  const fs::path dir = scratch("bound");
  const Tokenizer tok = train_bpe(text(1), 260);
  write_run(dir, small_config(260), tok);
  const std::string ckpt = (dir / "checkpoint.safetensors").string();
  const CheckpointInfo info = read_checkpoint_info(ckpt);
  EXPECT_EQ(info.tokenizer_hash, tokenizer_file_hash((dir / "tokenizer.json").string()));
  EXPECT_EQ(info.tokenizer_hash.rfind("fnv1a64:", 0), 0u) << info.tokenizer_hash;
  // The header alone says the same, and the checksum still covers the data.
  EXPECT_EQ(peek_checkpoint_info(ckpt).tokenizer_hash, info.tokenizer_hash);
  EXPECT_EQ(peek_checkpoint_info(ckpt).config.to_json(), info.config.to_json());
  EXPECT_NO_THROW(check_tokenizer_binding(info, ckpt, (dir / "tokenizer.json").string()));
  EXPECT_NO_THROW(Generator(device(), dir.string()));
}

TEST(RunFiles, AnotherRunsTokenizerIsRefused) {
  const fs::path dir = scratch("swapped");
  write_run(dir, small_config(260), train_bpe(text(1), 260));
  // Another run's tokenizer of the same size: everything would run, on the wrong text.
  train_bpe(text(2), 260)
      .save((dir / "tokenizer.json").string());
  const std::string msg = error_of([&] { Generator(device(), dir.string()); });
  EXPECT_NE(msg.find("is not the tokenizer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("was trained with"), std::string::npos) << msg;
}

TEST(RunFiles, ACheckpointWithoutATokenizerHashStillLoads) {
  // Checkpoints written before the binding have no hash: nothing to check against, as before.
  const fs::path dir = scratch("old");
  const LlamaConfig c = small_config(260);
  const Tokenizer tok = train_bpe(text(1), 260);
  tok.save((dir / "tokenizer.json").string());
  save_checkpoint((dir / "checkpoint.safetensors").string(), Llama(device(), c, 1), nullptr, nullptr, "");
  EXPECT_EQ(read_checkpoint_info((dir / "checkpoint.safetensors").string()).tokenizer_hash, "");
  EXPECT_NO_THROW(Generator(device(), dir.string()));
}

TEST(RunFiles, ACheckpointFromAnotherConfigIsRefusedFirst) {
  const fs::path dir = scratch("other-config");
  write_run(dir, small_config(300), train_bpe(text(1), 300));
  // The checkpoint of a smaller model copied in: its config.json no longer describes it.
  const fs::path other = scratch("smaller");
  write_run(other, small_config(260), train_bpe(text(1), 260));
  fs::copy_file(other / "checkpoint.safetensors", dir / "checkpoint.safetensors",
                fs::copy_options::overwrite_existing);
  std::string msg = error_of([&] { Generator(device(), dir.string()); });
  EXPECT_NE(msg.find("vocab_size 260 vs 300"), std::string::npos) << msg;
  EXPECT_NE(msg.find("different runs"), std::string::npos) << msg;
  // Without config.json (and without a hash to catch it), the tokenizer's size still gives it away.
  fs::remove(dir / "config.json");
  save_checkpoint((dir / "checkpoint.safetensors").string(), Llama(device(), small_config(260), 1), nullptr, nullptr,
                  "");
  msg = error_of([&] { Generator(device(), dir.string()); });
  EXPECT_NE(msg.find("has 300 tokens and the model only 260"), std::string::npos) << msg;
}

TEST(RunFiles, ADifferentModelIsNamedFieldByField) {
  const fs::path dir = scratch("fields");
  const LlamaConfig c = small_config(260);
  save_checkpoint((dir / "checkpoint.safetensors").string(), Llama(device(), c, 1), nullptr, nullptr, "");
  LlamaConfig other = c;
  other.dim = 64;
  Llama model(device(), other, 1);
  const std::string msg =
      error_of([&] { load_checkpoint((dir / "checkpoint.safetensors").string(), model, nullptr, nullptr); });
  EXPECT_NE(msg.find("different model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dim 32 vs 64"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(config_differences(c, c).size(), 0u);
}

}  // namespace
}  // namespace wgtrain
