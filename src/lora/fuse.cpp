// Merging adapters into a model's weights: W + scale * B A, for a plain Hugging Face export.
#include "wgtrain/device.h"
#include "wgtrain/error.h"
#include "wgtrain/lora.h"
#include "wgtrain/ops.h"

namespace wgtrain {

std::vector<float> merged_weight(const Llama& model, const LoraAdapters& lora, size_t param) {
  if (&lora.model() != &model) throw ArgumentError("merged_weight: the adapters belong to another model");
  std::vector<float> w = model.host_value(param);  // a q4 linear dequantised: the weight the adapters trained on
  const std::optional<size_t> k = lora.adapter_of(param);
  if (!k) return w;
  const double scale = lora.adapters()[*k].scale;
  // B A on the device ([out, r] x [r, in]: float32 with a short sum), scaled and added on the host in double.
  const std::vector<float> ba = ops::mm(lora.b(*k), lora.a(*k)).to_host_f32();
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(static_cast<double>(w[i]) + scale * static_cast<double>(ba[i]));
  return w;
}

std::unique_ptr<Llama> fuse(const Llama& model, const LoraAdapters& lora) {
  if (&lora.model() != &model) throw ArgumentError("fuse: the adapters belong to another model");
  LlamaConfig c = model.config();
  c.quantize_blocks = false;  // merged weights are float32: re-quantising them would undo the adapters' small changes
  c.quantize_head = false;
  // Parameters are laid out by name alone, so both models list them in the same order.
  auto fused = std::make_unique<Llama>(model.device(), c, 0, Trainable::None);
  fused->load_weights([&](const Llama::Param& p) { return merged_weight(model, lora, model.index_of(p.name)); });
  return fused;
}

}  // namespace wgtrain
