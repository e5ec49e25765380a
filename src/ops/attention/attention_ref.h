// CPU reference for fused causal attention (float64).
#pragma once

#include "ops/reference.h"

namespace wgtrain::ref {

struct AttentionRef {
  HostTensor out;  // [B, T, H * hd]
  HostTensor lse;  // [B, H, T]
};
// q [B, T, H, hd], k and v [B, L, KV, hd]; query t at position L - T + t sees keys 0 ..= L - T + t; query head h
// reads KV head h / (H / KV).
AttentionRef attention(const HostTensor& q, const HostTensor& k, const HostTensor& v, double scale);

struct AttentionGradRef {
  HostTensor dq;  // [B, T, H, hd]
  HostTensor dk, dv;  // [B, L, KV, hd]
};
// The gradients for dout [B, T, H * hd], from the textbook formulas (probabilities materialised).
AttentionGradRef attention_backward(const HostTensor& dout, const HostTensor& q, const HostTensor& k,
                                    const HostTensor& v, double scale);

}  // namespace wgtrain::ref
