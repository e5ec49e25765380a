// The float64 reference of the Llama model: forward, a backward pass derived by hand, AdamW, re-quantisation.
#include "model/llama_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/adamw/adamw_ref.h"
#include "ops/dropout/dropout_ref.h"
#include "ops/q4gsw/q4gsw_ref.h"
#include "wgtrain/dropout.h"
#include "wgtrain/error.h"

namespace wgtrain::ref {

namespace {

using Mat = std::vector<double>;

// out[n][m] = sum_k a[n][k] w[m][k]   (x W^T)
Mat mul_nt(const Mat& a, const Mat& w, int64_t n, int64_t k, int64_t m) {
  Mat out(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t q = 0; q < k; ++q) s += a[i * k + q] * w[j * k + q];
      out[i * m + j] = s;
    }
  return out;
}

// out[n][k] = sum_m dy[n][m] w[m][k]   (dY W)
Mat mul_nn(const Mat& dy, const Mat& w, int64_t n, int64_t m, int64_t k) {
  Mat out(static_cast<size_t>(n * k), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      const double d = dy[i * m + j];
      if (d == 0) continue;
      for (int64_t q = 0; q < k; ++q) out[i * k + q] += d * w[j * k + q];
    }
  return out;
}

// dw[m][k] += sum_n dy[n][m] x[n][k]   (dY^T X)
void acc_tn(Mat& dw, const Mat& dy, const Mat& x, int64_t n, int64_t m, int64_t k) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      const double d = dy[i * m + j];
      if (d == 0) continue;
      for (int64_t q = 0; q < k; ++q) dw[j * k + q] += d * x[i * k + q];
    }
}

struct Norm {
  Mat y;          // x * r * g
  std::vector<double> r;  // 1 / sqrt(mean(x^2) + eps) per row
};

Norm rms_forward(const Mat& x, const Mat& g, int64_t n, int64_t d, double eps) {
  Norm out{Mat(x.size()), std::vector<double>(static_cast<size_t>(n))};
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += x[i * d + j] * x[i * d + j];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    out.r[i] = r;
    for (int64_t j = 0; j < d; ++j) out.y[i * d + j] = x[i * d + j] * r * g[j];
  }
  return out;
}

// Returns dx; adds into dg.
Mat rms_backward(const Mat& dy, const Mat& x, const Mat& g, const std::vector<double>& r, int64_t n, int64_t d,
                 Mat& dg) {
  Mat dx(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0;
    for (int64_t j = 0; j < d; ++j) {
      dg[j] += dy[i * d + j] * x[i * d + j] * r[i];
      dot += dy[i * d + j] * g[j] * x[i * d + j];
    }
    const double r3 = r[i] * r[i] * r[i] / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) dx[i * d + j] = r[i] * dy[i * d + j] * g[j] - x[i * d + j] * r3 * dot;
  }
  return dx;
}

// Rotates each head's halves (i, i + half) at position t = row % T; `inverse` applies the transpose (backward).
void rope(Mat& x, int64_t n, int64_t heads, int64_t hd, int64_t T, const std::vector<double>& cs,
          const std::vector<double>& sn, bool inverse) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = i % T;
    for (int64_t h = 0; h < heads; ++h) {
      double* p = &x[(i * heads + h) * hd];
      for (int64_t q = 0; q < half; ++q) {
        const double c = cs[t * half + q], s = inverse ? -sn[t * half + q] : sn[t * half + q];
        const double a = p[q], b = p[q + half];
        p[q] = a * c - b * s;
        p[q + half] = b * c + a * s;
      }
    }
  }
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double silu_grad(double x) {
  const double s = 1.0 / (1.0 + std::exp(-x));
  return s * (1.0 + x * (1.0 - s));
}

HostTensor host(const std::vector<double>& v, const Shape& shape) { return HostTensor(shape, v); }

}  // namespace

LlamaRef::LlamaRef(const Llama& model) : config_(model.config()), params_(model.params()) {
  const size_t np = params_.size();
  values_.resize(np);
  weights_.resize(np);
  scales_.resize(np);
  grads_.resize(np);
  m_.resize(np);
  v_.resize(np);
  for (size_t i = 0; i < np; ++i) {
    const auto& p = params_[i];
    const int64_t n = numel(p.shape);
    m_[i].assign(static_cast<size_t>(n), 0.0);
    v_[i].assign(static_cast<size_t>(n), 0.0);
    if (p.has_float()) {
      const auto host = model.value(i).to_host_f32();
      values_[i].assign(host.begin(), host.end());
    }
    if (p.q4 < 0) {
      weights_[i] = values_[i];
      continue;
    }
    const Q4Weight& w = model.q4_weights()[p.q4];
    scales_[i] = w.scales.to_host_f32();
    const auto bytes = q4gsw::download_bytes(w);
    weights_[i] = q4_dequant(bytes, scales_[i], p.shape[0], p.shape[1], config_.group_size).data;
  }
  std::vector<float> cs, sn;
  rope_tables(config_, cs, sn);
  cos_.assign(cs.begin(), cs.end());
  sin_.assign(sn.begin(), sn.end());
}

void LlamaRef::set_moments(const std::vector<float>& m_arena, const std::vector<float>& v_arena) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (!p.trainable) continue;
    const size_t at = static_cast<size_t>(p.offset), n = static_cast<size_t>(numel(p.shape));
    if (at + n > m_arena.size() || at + n > v_arena.size())
      throw ArgumentError("LlamaRef::set_moments: the arenas are smaller than the model's");
    m_[i].assign(m_arena.begin() + at, m_arena.begin() + at + n);
    v_[i].assign(v_arena.begin() + at, v_arena.begin() + at + n);
  }
}

void LlamaRef::dequantize(size_t i, bool recompute_scales) {
  const auto& p = params_[i];
  const HostTensor latent = host(values_[i], p.shape);
  if (recompute_scales) scales_[i] = q4_scales(latent, config_.group_size);
  const auto bytes = q4_requant(latent, scales_[i], config_.group_size);
  weights_[i] = q4_dequant(bytes, scales_[i], p.shape[0], p.shape[1], config_.group_size).data;
}

namespace {

// out[n][m] += b[m]
void add_bias(Mat& out, const Mat& b, int64_t n, int64_t m) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) out[i * m + j] += b[j];
}

// db[m] += sum_n dy[n][m]
void acc_bias(Mat& db, const Mat& dy, int64_t n, int64_t m) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) db[j] += dy[i * m + j];
}

}  // namespace

double LlamaRef::loss(const std::vector<int32_t>& tokens, int64_t B, int64_t T, const std::vector<int32_t>& targets,
                      bool with_grads) {
  const LlamaConfig& c = config_;
  const int64_t N = B * T, d = c.dim, H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim(), rep = H / KV;
  const int64_t qd = H * hd, kvd = KV * hd, hidden = c.hidden_dim(), V = c.vocab_size;
  if (static_cast<int64_t>(tokens.size()) != N || static_cast<int64_t>(targets.size()) != N)
    throw ArgumentError("LlamaRef: token or target count does not match batch x time");
  const double qs = 1.0 / std::sqrt(static_cast<double>(hd));
  const auto& W = weights_;
  // Parameters by their Hugging Face names; -1 where the config has none.
  auto at = [&](const std::string& name) -> int64_t {
    for (size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == name) return static_cast<int64_t>(i);
    return -1;
  };
  struct Idx {
    int64_t gn1, wq, wk, wv, wo, bq, bk, bv, bo, qn, kn, gn2, gate, up, down;
  };
  std::vector<Idx> idx;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    idx.push_back({at(pre + "input_layernorm.weight"), at(pre + "self_attn.q_proj.weight"),
                   at(pre + "self_attn.k_proj.weight"), at(pre + "self_attn.v_proj.weight"),
                   at(pre + "self_attn.o_proj.weight"), at(pre + "self_attn.q_proj.bias"),
                   at(pre + "self_attn.k_proj.bias"), at(pre + "self_attn.v_proj.bias"),
                   at(pre + "self_attn.o_proj.bias"), at(pre + "self_attn.q_norm.weight"),
                   at(pre + "self_attn.k_norm.weight"), at(pre + "post_attention_layernorm.weight"),
                   at(pre + "mlp.gate_proj.weight"), at(pre + "mlp.up_proj.weight"), at(pre + "mlp.down_proj.weight")});
  }
  const int64_t emb = at("model.embed_tokens.weight"), gf = at("model.norm.weight");
  const int64_t head = c.tie_embeddings ? emb : at("lm_head.weight");

  struct Layer {
    Mat x_in, h, q_pre, k_pre, q, k, v, p, o, x_mid, h2, a1, a3, m;
    std::vector<double> r1, r2, rq, rk;
  };
  std::vector<Layer> layers(static_cast<size_t>(c.n_layers));

  Mat x(static_cast<size_t>(N * d));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < d; ++j) x[i * d + j] = W[emb][tokens[i] * d + j];

  for (int64_t l = 0; l < c.n_layers; ++l) {
    Layer& L = layers[l];
    const Idx& I = idx[l];
    L.x_in = x;
    Norm n1 = rms_forward(x, W[I.gn1], N, d, c.norm_eps);
    L.h = n1.y;
    L.r1 = n1.r;
    L.q = mul_nt(L.h, W[I.wq], N, d, qd);
    L.k = mul_nt(L.h, W[I.wk], N, d, kvd);
    L.v = mul_nt(L.h, W[I.wv], N, d, kvd);
    lora_forward(I.wq, L.h, L.q, N);
    lora_forward(I.wk, L.h, L.k, N);
    lora_forward(I.wv, L.h, L.v, N);
    if (I.bq >= 0) add_bias(L.q, W[I.bq], N, qd);
    if (I.bk >= 0) add_bias(L.k, W[I.bk], N, kvd);
    if (I.bv >= 0) add_bias(L.v, W[I.bv], N, kvd);
    if (I.qn >= 0) {  // per-head norms: rows of hd
      L.q_pre = L.q;
      L.k_pre = L.k;
      Norm nq = rms_forward(L.q, W[I.qn], N * H, hd, c.norm_eps), nk = rms_forward(L.k, W[I.kn], N * KV, hd, c.norm_eps);
      L.q = nq.y;
      L.rq = nq.r;
      L.k = nk.y;
      L.rk = nk.r;
    }
    rope(L.q, N, H, hd, T, cos_, sin_, false);
    rope(L.k, N, KV, hd, T, cos_, sin_, false);
    for (auto& e : L.q) e *= qs;
    // Attention: P[b][h][t1][t2], o[b, t1, h, :]
    L.p.assign(static_cast<size_t>(B * H * T * T), 0.0);
    L.o.assign(static_cast<size_t>(N * H * hd), 0.0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / rep;
        for (int64_t t1 = 0; t1 < T; ++t1) {
          double* prow = &L.p[((b * H + h) * T + t1) * T];
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t t2 = 0; t2 <= t1; ++t2) {
            double s = 0;
            for (int64_t e = 0; e < hd; ++e)
              s += L.q[((b * T + t1) * H + h) * hd + e] * L.k[((b * T + t2) * KV + g) * hd + e];
            prow[t2] = s;
            mx = std::max(mx, s);
          }
          double z = 0;
          for (int64_t t2 = 0; t2 <= t1; ++t2) z += (prow[t2] = std::exp(prow[t2] - mx));
          for (int64_t t2 = 0; t2 <= t1; ++t2) prow[t2] /= z;
          for (int64_t t2 = 0; t2 <= t1; ++t2)
            for (int64_t e = 0; e < hd; ++e)
              L.o[((b * T + t1) * H + h) * hd + e] += prow[t2] * L.v[((b * T + t2) * KV + g) * hd + e];
        }
      }
    Mat att = mul_nt(L.o, W[I.wo], N, qd, d);
    lora_forward(I.wo, L.o, att, N);
    if (I.bo >= 0) add_bias(att, W[I.bo], N, d);
    for (size_t i = 0; i < x.size(); ++i) x[i] += att[i];
    L.x_mid = x;
    Norm n2 = rms_forward(x, W[I.gn2], N, d, c.norm_eps);
    L.h2 = n2.y;
    L.r2 = n2.r;
    L.a1 = mul_nt(L.h2, W[I.gate], N, d, hidden);
    L.a3 = mul_nt(L.h2, W[I.up], N, d, hidden);
    lora_forward(I.gate, L.h2, L.a1, N);
    lora_forward(I.up, L.h2, L.a3, N);
    L.m.resize(L.a1.size());
    for (size_t i = 0; i < L.m.size(); ++i) L.m[i] = silu(L.a1[i]) * L.a3[i];
    Mat f = mul_nt(L.m, W[I.down], N, hidden, d);
    lora_forward(I.down, L.m, f, N);
    for (size_t i = 0; i < x.size(); ++i) x[i] += f[i];
  }
  const Norm nf = rms_forward(x, W[gf], N, d, c.norm_eps);
  Mat logits = mul_nt(nf.y, W[head], N, d, V);

  // Cross-entropy; dlogits = (softmax - onehot) / n_valid on valid rows; no valid row: loss 0, no gradient.
  int64_t n_valid = 0;
  for (int32_t t : targets) n_valid += t >= 0;
  double total = 0;
  Mat dlogits(logits.size(), 0.0);
  for (int64_t i = 0; i < N; ++i) {
    if (targets[i] < 0) continue;
    const double* row = &logits[i * V];
    const double mx = *std::max_element(row, row + V);
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(row[j] - mx);
    total += mx + std::log(z) - row[targets[i]];
    for (int64_t j = 0; j < V; ++j)
      dlogits[i * V + j] = (std::exp(row[j] - mx) / z - (j == targets[i] ? 1.0 : 0.0)) / static_cast<double>(n_valid);
  }
  const double loss = n_valid ? total / static_cast<double>(n_valid) : 0.0;
  if (!with_grads) return loss;

  for (size_t i = 0; i < grads_.size(); ++i) grads_[i].assign(W[i].size(), 0.0);
  for (Lora& a : lora_) {
    a.ga.assign(a.a.size(), 0.0);
    a.gb.assign(a.b.size(), 0.0);
  }
  auto& G = grads_;
  acc_tn(G[head], dlogits, nf.y, N, V, d);
  Mat dx = rms_backward(mul_nn(dlogits, W[head], N, V, d), x, W[gf], nf.r, N, d, G[gf]);

  for (int64_t l = c.n_layers - 1; l >= 0; --l) {
    const Layer& L = layers[l];
    const Idx& I = idx[l];
    // MLP: x = x_mid + (silu(h2 Wgate^T) * h2 Wup^T) Wdown^T
    acc_tn(G[I.down], dx, L.m, N, d, hidden);
    Mat dm = mul_nn(dx, W[I.down], N, d, hidden);
    lora_backward(I.down, dx, dm);
    Mat da1(dm.size()), da3(dm.size());
    for (size_t i = 0; i < dm.size(); ++i) {
      da1[i] = dm[i] * L.a3[i] * silu_grad(L.a1[i]);
      da3[i] = dm[i] * silu(L.a1[i]);
    }
    acc_tn(G[I.gate], da1, L.h2, N, hidden, d);
    acc_tn(G[I.up], da3, L.h2, N, hidden, d);
    Mat dh2 = mul_nn(da1, W[I.gate], N, hidden, d);
    const Mat dh2b = mul_nn(da3, W[I.up], N, hidden, d);
    for (size_t i = 0; i < dh2.size(); ++i) dh2[i] += dh2b[i];
    lora_backward(I.gate, da1, dh2);
    lora_backward(I.up, da3, dh2);
    const Mat dmid = rms_backward(dh2, L.x_mid, W[I.gn2], L.r2, N, d, G[I.gn2]);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += dmid[i];
    // Attention: x_mid = x_in + o Wo^T (+ bo)
    acc_tn(G[I.wo], dx, L.o, N, d, qd);
    if (I.bo >= 0) acc_bias(G[I.bo], dx, N, d);
    Mat dO = mul_nn(dx, W[I.wo], N, d, qd);
    lora_backward(I.wo, dx, dO);
    Mat dq(L.q.size(), 0.0), dk(L.k.size(), 0.0), dv(L.v.size(), 0.0);
    std::vector<double> dp(static_cast<size_t>(T));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / rep;
        for (int64_t t1 = 0; t1 < T; ++t1) {
          const double* prow = &L.p[((b * H + h) * T + t1) * T];
          const double* dorow = &dO[((b * T + t1) * H + h) * hd];
          double dot = 0;
          for (int64_t t2 = 0; t2 <= t1; ++t2) {
            double s = 0;
            for (int64_t e = 0; e < hd; ++e) {
              s += dorow[e] * L.v[((b * T + t2) * KV + g) * hd + e];
              dv[((b * T + t2) * KV + g) * hd + e] += prow[t2] * dorow[e];
            }
            dp[t2] = s;
            dot += prow[t2] * s;
          }
          for (int64_t t2 = 0; t2 <= t1; ++t2) {
            const double ds = prow[t2] * (dp[t2] - dot);
            for (int64_t e = 0; e < hd; ++e) {
              dq[((b * T + t1) * H + h) * hd + e] += ds * L.k[((b * T + t2) * KV + g) * hd + e];
              dk[((b * T + t2) * KV + g) * hd + e] += ds * L.q[((b * T + t1) * H + h) * hd + e];
            }
          }
        }
      }
    for (auto& e : dq) e *= qs;
    rope(dq, N, H, hd, T, cos_, sin_, true);
    rope(dk, N, KV, hd, T, cos_, sin_, true);
    if (I.qn >= 0) {
      const Mat gq = W[I.qn], gk = W[I.kn];
      dq = rms_backward(dq, L.q_pre, gq, L.rq, N * H, hd, G[I.qn]);
      dk = rms_backward(dk, L.k_pre, gk, L.rk, N * KV, hd, G[I.kn]);
    }
    if (I.bq >= 0) acc_bias(G[I.bq], dq, N, qd);
    if (I.bk >= 0) acc_bias(G[I.bk], dk, N, kvd);
    if (I.bv >= 0) acc_bias(G[I.bv], dv, N, kvd);
    acc_tn(G[I.wq], dq, L.h, N, qd, d);
    acc_tn(G[I.wk], dk, L.h, N, kvd, d);
    acc_tn(G[I.wv], dv, L.h, N, kvd, d);
    Mat dh = mul_nn(dq, W[I.wq], N, qd, d);
    const Mat dhk = mul_nn(dk, W[I.wk], N, kvd, d), dhv = mul_nn(dv, W[I.wv], N, kvd, d);
    for (size_t i = 0; i < dh.size(); ++i) dh[i] += dhk[i] + dhv[i];
    lora_backward(I.wq, dq, dh);
    lora_backward(I.wk, dk, dh);
    lora_backward(I.wv, dv, dh);
    const Mat din = rms_backward(dh, L.x_in, W[I.gn1], L.r1, N, d, G[I.gn1]);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += din[i];
  }
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < d; ++j) G[emb][tokens[i] * d + j] += dx[i * d + j];
  return loss;
}

double LlamaRef::train_step(const std::vector<int32_t>& tokens, int64_t batch, int64_t time,
                            const std::vector<int32_t>& targets, const ops::AdamWOptions& o, double lr,
                            int64_t step) {
  const double l = loss(tokens, batch, time, targets, true);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].trainable) continue;
    const double wd = params_[i].decay ? o.weight_decay : 0.0;
    adamw_step(values_[i], m_[i], v_[i], grads_[i], lr, o.beta1, o.beta2, o.eps, wd, step);
    // Stored as float32, as on the device.
    for (auto* vec : {&values_[i], &m_[i], &v_[i]})
      for (auto& e : *vec) e = static_cast<float>(e);
    if (params_[i].q4 >= 0)
      dequantize(i, config_.recompute_scales);
    else
      weights_[i] = values_[i];
  }
  auto to_f32 = [](std::vector<double>& v) {
    for (auto& e : v) e = static_cast<float>(e);
  };
  for (Lora& a : lora_) {
    adamw_step(a.a, a.ma, a.va, a.ga, lr, o.beta1, o.beta2, o.eps, o.weight_decay, step);
    adamw_step(a.b, a.mb, a.vb, a.gb, lr, o.beta1, o.beta2, o.eps, o.weight_decay, step);
    for (auto* vec : {&a.a, &a.ma, &a.va, &a.b, &a.mb, &a.vb}) to_f32(*vec);
  }
  return l;
}

// ---- LoRA -----------------------------------------------------------------------------------------------------------

LoraLinear lora_linear(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& a,
                       const std::vector<double>& b, const std::vector<double>& mask, int64_t n, int64_t in,
                       int64_t out, int64_t r, double scale, const std::vector<double>& dy) {
  LoraLinear g;
  Mat xd = x;
  if (!mask.empty())
    for (size_t i = 0; i < xd.size(); ++i) xd[i] *= mask[i];
  Mat u = mul_nt(xd, a, n, in, r);
  for (auto& e : u) e *= scale;
  g.y = mul_nt(x, w, n, in, out);
  const Mat lora_y = mul_nt(u, b, n, r, out);
  for (size_t i = 0; i < g.y.size(); ++i) g.y[i] += lora_y[i];
  // Backward: dB = dy^T u; du = dy B; dA = scale du^T xd; dx = dy W + m * (scale du A).
  g.db.assign(b.size(), 0.0);
  g.da.assign(a.size(), 0.0);
  acc_tn(g.db, dy, u, n, out, r);
  Mat dz = mul_nn(dy, b, n, out, r);
  for (auto& e : dz) e *= scale;
  acc_tn(g.da, dz, xd, n, r, in);
  Mat dxd = mul_nn(dz, a, n, r, in);
  if (!mask.empty())
    for (size_t i = 0; i < dxd.size(); ++i) dxd[i] *= mask[i];
  g.dx = mul_nn(dy, w, n, out, in);
  for (size_t i = 0; i < g.dx.size(); ++i) g.dx[i] += dxd[i];
  return g;
}

void LlamaRef::set_lora(const LoraAdapters& lora) {
  lora_.clear();
  lora_of_.assign(params_.size(), -1);
  for (size_t i = 0; i < lora.adapters().size(); ++i) {
    const LoraAdapters::Adapter& ad = lora.adapters()[i];
    Lora a;
    a.param = ad.param;
    a.in = ad.in;
    a.out = ad.out;
    a.rank = ad.rank;
    a.scale = ad.scale;
    a.stream = static_cast<uint32_t>(i);
    const auto av = lora.a(i).to_host_f32(), bv = lora.b(i).to_host_f32();
    a.a.assign(av.begin(), av.end());
    a.b.assign(bv.begin(), bv.end());
    for (auto* vec : {&a.ma, &a.va}) vec->assign(a.a.size(), 0.0);
    for (auto* vec : {&a.mb, &a.vb}) vec->assign(a.b.size(), 0.0);
    lora_of_[ad.param] = static_cast<int>(i);
    lora_.push_back(std::move(a));
  }
  lora_saved_.assign(lora_.size(), {});
  lora_p_ = lora.config().dropout;
  lora_seed_ = lora.config().seed;
}

void LlamaRef::set_lora_dropout(bool on, uint64_t counter) {
  lora_dropout_ = on;
  lora_counter_ = counter;
}

void LlamaRef::lora_forward(int64_t param, const std::vector<double>& x, std::vector<double>& y, int64_t n) {
  if (param < 0 || static_cast<size_t>(param) >= lora_of_.size() || lora_of_[param] < 0) return;
  const Lora& a = lora_[lora_of_[param]];
  LoraSaved& s = lora_saved_[lora_of_[param]];
  s.n = n;
  s.xd = x;
  s.mask.clear();
  if (lora_dropout_ && lora_p_ > 0) {
    s.mask = dropout_mask(ops::dropout_key(lora_seed_, lora_counter_), a.stream, n * a.in, lora_p_);
    for (size_t i = 0; i < s.xd.size(); ++i) s.xd[i] *= s.mask[i];
  }
  s.u = mul_nt(s.xd, a.a, n, a.in, a.rank);
  for (auto& e : s.u) e *= a.scale;
  const Mat add = mul_nt(s.u, a.b, n, a.rank, a.out);
  for (size_t i = 0; i < y.size(); ++i) y[i] += add[i];
}

void LlamaRef::lora_backward(int64_t param, const std::vector<double>& dy, std::vector<double>& dx) {
  if (param < 0 || static_cast<size_t>(param) >= lora_of_.size() || lora_of_[param] < 0) return;
  Lora& a = lora_[lora_of_[param]];
  const LoraSaved& s = lora_saved_[lora_of_[param]];
  acc_tn(a.gb, dy, s.u, s.n, a.out, a.rank);
  Mat dz = mul_nn(dy, a.b, s.n, a.out, a.rank);
  for (auto& e : dz) e *= a.scale;
  acc_tn(a.ga, dz, s.xd, s.n, a.rank, a.in);
  const Mat dxd = mul_nn(dz, a.a, s.n, a.rank, a.in);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] += s.mask.empty() ? dxd[i] : dxd[i] * s.mask[i];
}

}  // namespace wgtrain::ref
