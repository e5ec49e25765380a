// A few training steps of a small q4gsw Llama on a fixed batch, the same program natively and in the browser: the
// browser test (web/tests/run.mjs) compares the losses the two print. Everything is fixed by the arguments (steps,
// seed): the weights from the seed, the tokens from a generator of our own (no std:: distribution, whose output the
// standard leaves to the library), a constant learning rate.
//
// Prints WGTRAIN_PARITY {"adapter": ..., "losses": [...]}, then WGTRAIN_EXIT and its exit status (what the page
// watches for).
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "wgtrain/adamw.h"
#include "wgtrain/device.h"
#include "wgtrain/llama.h"
#include "wgtrain/ops.h"
#include "wgtrain/tensor.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 4;
  const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 7;
  try {
    wgtrain::Device device = wgtrain::Device::open({});
    wgtrain::LlamaConfig c;
    c.vocab_size = 256;
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.max_seq_len = 32;
    const int64_t B = 2, T = 32;
    wgtrain::Llama model(device, c, seed);

    wgtrain::Tensor m = wgtrain::ops::full(device, {model.arena_size()}, 0.0);
    wgtrain::Tensor v = wgtrain::ops::full(device, {model.arena_size()}, 0.0);
    wgtrain::ops::AdamWOptions ao;
    ao.lr = 3e-3;
    ao.beta1 = 0.9;
    ao.beta2 = 0.95;
    ao.weight_decay = 0.1;
    wgtrain::ops::AdamW adamw(model.adamw_params(m, v), ao);

    // One batch, a stream with some structure (each token a function of the previous one, plus noise) so the loss
    // falls over the steps.
    std::vector<int32_t> tokens(B * T), targets(B * T);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    auto next = [&x] {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x;
    };
    int32_t prev = 1;
    for (int64_t i = 0; i < B * T + 1; ++i) {
      const int32_t t = static_cast<int32_t>((prev * 5 + 3 + (next() % 4 == 0 ? next() % 7 : 0)) % c.vocab_size);
      if (i < B * T) tokens[i] = t;
      if (i > 0) targets[i - 1] = t;
      prev = t;
    }
    wgtrain::Tensor tok = wgtrain::Tensor::from_host(device, {B, T}, tokens);
    wgtrain::Tensor tgt = wgtrain::Tensor::from_host(device, {B * T}, targets);

    wgtrain::Tensor loss;
    wgtrain::Recording step = device.record([&] { loss = model.train_step(tok, tgt, adamw); });
    std::string out = "{\"adapter\": \"" + device.info().name + "\", \"losses\": [";
    for (int s = 1; s <= steps; ++s) {
      adamw.set_step(s, ao.lr);
      step.replay();
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.9g", s > 1 ? ", " : "", static_cast<double>(loss.to_host_f32()[0]));
      out += buf;
    }
    out += "]}";
    std::printf("WGTRAIN_PARITY %s\nWGTRAIN_EXIT 0\n", out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wgtrain_parity: %s\n", e.what());
    std::printf("WGTRAIN_EXIT 1\n");
    return 1;
  }
}
