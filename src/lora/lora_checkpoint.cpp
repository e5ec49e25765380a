// LoRA checkpoints for resuming: adapters, their AdamW moments, the model's trainable norm gains and theirs, the
// configs and the trainer's state, in one checksummed safetensors file (the format pieces of train/checkpoint.cpp).
#include <cstring>
#include <set>

#include "train/checkpoint_format.h"
#include "wgtrain/error.h"
#include "wgtrain/lora.h"
#include "wgtrain/safetensors.h"

namespace wgtrain {

namespace st = safetensors;

namespace {

constexpr const char* kFormat = "wgtrain-lora-checkpoint-1";
constexpr const char* kKind = "LoRA checkpoint";

const char* trainable_name(Trainable t) {
  return t == Trainable::All ? "all" : t == Trainable::Norms ? "norms" : "none";
}

// One named float32 block of the checkpoint: where it lives in its arena (values, m, v share the offset).
struct Block {
  std::string name;
  Shape shape;
  int64_t offset;
};

std::vector<Block> lora_blocks(const LoraAdapters& lora) {
  std::vector<Block> out;
  for (size_t i = 0; i < lora.adapters().size(); ++i) {
    const LoraAdapters::Adapter& a = lora.adapters()[i];
    out.push_back({lora.name_a(i), {a.rank, a.in}, a.a_offset});
    out.push_back({lora.name_b(i), {a.out, a.rank}, a.b_offset});
  }
  return out;
}

std::vector<Block> model_blocks(const Llama& model) {
  std::vector<Block> out;
  for (const Llama::Param& p : model.params())
    if (p.trainable) out.push_back({p.name, p.shape, p.offset});
  return out;
}

void check_moments(const char* what, const Tensor* m, const Tensor* v, int64_t size) {
  if (size == 0) return;
  if (!m || !v) throw ArgumentError(std::string(what) + ": the model has trainable parameters: give their moments");
  if (m->shape() != Shape{size} || v->shape() != Shape{size})
    throw ArgumentError(std::string(what) + ": the moments must be arenas of " + std::to_string(size) + " floats");
}

}  // namespace

void save_lora_checkpoint(const std::string& path, const Llama& model, const LoraAdapters& lora,
                          const Tensor& lora_m, const Tensor& lora_v, const Tensor* model_m, const Tensor* model_v,
                          const std::string& state_json) {
  const char* what = "save_lora_checkpoint";
  if (&lora.model() != &model) throw ArgumentError(std::string(what) + ": the adapters belong to another model");
  // A LoRA checkpoint holds float32 tensors only: trainable q4 linears (their codes and scales) are save_checkpoint's.
  if (model.trainable() == Trainable::All)
    throw ArgumentError(std::string(what) + ": the whole model trains (Trainable::All): save it with save_checkpoint");
  check_moments(what, &lora_m, &lora_v, lora.arena_size());
  check_moments(what, model_m, model_v, model.arena_size());
  st::Contents c;
  auto put = [&c](const std::vector<Block>& blocks, const Tensor& values, const Tensor* m, const Tensor* v) {
    if (blocks.empty()) return;
    const std::vector<float> hv = values.to_host_f32(), hm = m->to_host_f32(), hs = v->to_host_f32();
    for (const Block& b : blocks) {
      c.tensors[b.name] = detail::f32_array(hv.data() + b.offset, b.shape);
      c.tensors["optimizer.m." + b.name] = detail::f32_array(hm.data() + b.offset, b.shape);
      c.tensors["optimizer.v." + b.name] = detail::f32_array(hs.data() + b.offset, b.shape);
    }
  };
  put(lora_blocks(lora), lora.values(), &lora_m, &lora_v);
  put(model_blocks(model), model.values(), model_m, model_v);
  c.metadata["format"] = kFormat;
  c.metadata["lora_config"] = lora.config().to_json();
  c.metadata["model_config"] = model.config().to_json();
  c.metadata["trainable"] = trainable_name(model.trainable());
  if (!state_json.empty()) c.metadata["state"] = state_json;
  c.metadata["checksum"] = detail::checkpoint_checksum(c);
  st::save(path, c);
}

LoraConfig read_lora_checkpoint_config(const std::string& path) {
  const st::Contents c = detail::read_checked(path, kFormat, kKind);
  try {
    return LoraConfig::from_json(c.metadata.at("lora_config"));
  } catch (const std::exception& e) {
    throw Error(std::string(kKind) + " '" + path + "': its LoRA config is unusable: " + e.what());
  }
}

std::string load_lora_checkpoint(const std::string& path, Llama& model, LoraAdapters& lora, const Tensor& lora_m,
                                 const Tensor& lora_v, const Tensor* model_m, const Tensor* model_v) {
  const char* what = "load_lora_checkpoint";
  if (&lora.model() != &model) throw ArgumentError(std::string(what) + ": the adapters belong to another model");
  check_moments(what, &lora_m, &lora_v, lora.arena_size());
  check_moments(what, model_m, model_v, model.arena_size());
  const st::Contents c = detail::read_checked(path, kFormat, kKind);
  auto meta = [&](const char* key) {
    auto it = c.metadata.find(key);
    return it == c.metadata.end() ? std::string() : it->second;
  };
  const std::string head = std::string(kKind) + " '" + path + "'";
  if (meta("model_config") != model.config().to_json())
    throw Error(head + " was saved for another model:\n" + meta("model_config") + "\nthe model here is:\n" +
                model.config().to_json());
  if (meta("lora_config") != lora.config().to_json())
    throw Error(head + " holds other adapters:\n" + meta("lora_config") + "\nthe adapters here are:\n" +
                lora.config().to_json());
  if (meta("trainable") != trainable_name(model.trainable()))
    throw Error(head + " was saved with the model's trainable parameters '" + meta("trainable") + "', the model here "
                "has '" + trainable_name(model.trainable()) + "'");
  // Every tensor checked, and the arenas assembled on the host, before anything is written.
  std::set<std::string> known;
  auto take = [&](const std::vector<Block>& blocks, int64_t size) {
    std::vector<std::vector<float>> host(3, std::vector<float>(static_cast<size_t>(size), 0.0f));
    const char* prefixes[3] = {"", "optimizer.m.", "optimizer.v."};
    for (const Block& b : blocks)
      for (int k = 0; k < 3; ++k) {
        const std::string name = prefixes[k] + b.name;
        const st::Array& a = detail::need_tensor(c, path, name, "F32", b.shape);
        std::memcpy(host[k].data() + b.offset, a.bytes.data(), a.bytes.size());
        known.insert(name);
      }
    return host;
  };
  const auto lora_host = take(lora_blocks(lora), lora.arena_size());
  const auto model_host = take(model_blocks(model), model.arena_size());
  for (const auto& [name, a] : c.tensors)
    if (!known.count(name)) throw Error(head + " holds a tensor these adapters do not have: '" + name + "'");
  lora.values().write(lora_host[0]);
  lora_m.write(lora_host[1]);
  lora_v.write(lora_host[2]);
  if (model.arena_size() > 0) {
    model.values().write(model_host[0]);
    model_m->write(model_host[1]);
    model_v->write(model_host[2]);
  }
  return meta("state");
}

}  // namespace wgtrain
