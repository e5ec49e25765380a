// Fused causal attention (src/ops/attention): softmax(scale q k^T, causal) v without the [T, L] scores in memory,
// and its gradients, flash-attention style.
#pragma once

#include "wgtrain/tensor.h"

namespace wgtrain::ops {

struct Attention {
  Tensor out;  // float32 [B, T, H * hd], dense: head h of query t at out[b, t, h * hd ..]
  Tensor lse;  // float32 [B, H, T]: log sum exp of each query's scores, for the backward
};

// q [B, T, H, hd], k and v [B, L, KV, hd] (float32, any views whose last dim is dense or not; L >= T, H a multiple
// of KV). Query head h reads KV head h / (H / KV) (grouped-query attention). Query t sits at position L - T + t
// and sees keys 0 ..= L - T + t: causal over a sequence whose first L - T positions are already cached (L = T:
// plain causal attention; T = 1: one decoded token sees every key). Scores are scale * q.k.
Attention attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale);

struct AttentionGrads {
  Tensor dq;  // [B, T, H, hd], dense
  Tensor dk;  // [B, L, KV, hd], dense
  Tensor dv;  // [B, L, KV, hd], dense
};

// The gradients of attention() given dout ([B, T, H * hd] or [B, T, H, hd]) and the forward's out and lse, the
// scores recomputed tile by tile. Deterministic: no float atomics.
AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Attention& forward, double scale);

}  // namespace wgtrain::ops
