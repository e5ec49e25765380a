// Checkpoint files: the model's parameters, q4 codes and scales, optimizer moments, config and state, checksummed.
#include "wgtrain/checkpoint.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "wgtrain/error.h"
#include "wgtrain/q4gsw.h"
#include "wgtrain/safetensors.h"
#include "train/checkpoint_format.h"

namespace wgtrain {

namespace st = safetensors;

namespace detail {

std::string checkpoint_checksum(const st::Contents& c) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  };
  for (const auto& [name, a] : c.tensors) {
    mix(reinterpret_cast<const uint8_t*>(name.data()), name.size());
    mix(a.bytes.data(), a.bytes.size());
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

st::Array f32_array(const float* data, const Shape& shape) {
  st::Array a;
  a.dtype = "F32";
  a.shape = shape;
  a.bytes.resize(static_cast<size_t>(numel(shape)) * 4);
  std::memcpy(a.bytes.data(), data, a.bytes.size());
  return a;
}

const st::Array& need_tensor(const st::Contents& c, const std::string& path, const std::string& name,
                             const char* dtype, const Shape& shape) {
  auto it = c.tensors.find(name);
  if (it == c.tensors.end()) throw Error("checkpoint '" + path + "' has no tensor '" + name + "'");
  if (it->second.dtype != dtype || it->second.shape != shape)
    throw Error("checkpoint '" + path + "': tensor '" + name + "' is " + it->second.dtype + " " +
                shape_str(it->second.shape) + ", the model needs " + dtype + " " + shape_str(shape));
  return it->second;
}

st::Contents read_checked(const std::string& path, const std::string& format, const std::string& kind) {
  st::Contents c;
  try {
    c = st::load(path);
  } catch (const Error& e) {
    throw Error("cannot read " + kind + " '" + path + "': " + e.what());
  }
  auto meta = [&](const char* key) {
    auto it = c.metadata.find(key);
    return it == c.metadata.end() ? std::string() : it->second;
  };
  if (meta("format") != format)
    throw Error("'" + path + "' is not a wgtrain " + kind + " (format '" + meta("format") + "', expected '" + format +
                "')");
  if (meta("checksum") != checkpoint_checksum(c))
    throw Error(kind + " '" + path + "' is corrupt: its data does not match its checksum");
  return c;
}

}  // namespace detail

namespace {

constexpr const char* kFormat = "wgtrain-checkpoint-1";

std::string base_of(const std::string& weight_name) {
  const std::string suffix = ".weight";
  return weight_name.substr(0, weight_name.size() - suffix.size());
}

st::Contents read_checked(const std::string& path) { return detail::read_checked(path, kFormat, "checkpoint"); }

const st::Array& need(const st::Contents& c, const std::string& path, const std::string& name, const char* dtype,
                      const Shape& shape) {
  return detail::need_tensor(c, path, name, dtype, shape);
}

CheckpointInfo info_of(const std::map<std::string, std::string>& metadata, const std::string& path) {
  CheckpointInfo info;
  try {
    info.config = LlamaConfig::from_json(metadata.at("config"));
  } catch (const std::exception& e) {
    throw Error("checkpoint '" + path + "': its model config is unusable: " + e.what());
  }
  if (auto it = metadata.find("state"); it != metadata.end()) info.state = it->second;
  info.has_optimizer = metadata.count("optimizer") && metadata.at("optimizer") == "adamw";
  if (auto it = metadata.find("tokenizer"); it != metadata.end()) info.tokenizer_hash = it->second;
  return info;
}

CheckpointInfo info_of(const st::Contents& c, const std::string& path) { return info_of(c.metadata, path); }

}  // namespace

void save_checkpoint(const std::string& path, const Llama& model, const Tensor* m, const Tensor* v,
                     const std::string& state_json, const std::string& tokenizer_hash) {
  if ((m == nullptr) != (v == nullptr)) throw ArgumentError("save_checkpoint: give both moments or neither");
  st::Contents c;
  std::vector<float> values, mh, vh;
  if (model.arena_size() > 0) values = model.values().to_host_f32();
  if (m) {
    mh = m->to_host_f32();
    vh = v->to_host_f32();
    if (mh.size() != values.size() || vh.size() != values.size())
      throw ArgumentError("save_checkpoint: the moments are not laid out as the model's parameters");
  }
  for (size_t i = 0; i < model.params().size(); ++i) {
    const Llama::Param& p = model.params()[i];
    if (p.trainable) {
      c.tensors[p.name] = detail::f32_array(values.data() + p.offset, p.shape);
      if (m) {
        c.tensors["optimizer.m." + p.name] = detail::f32_array(mh.data() + p.offset, p.shape);
        c.tensors["optimizer.v." + p.name] = detail::f32_array(vh.data() + p.offset, p.shape);
      }
    } else if (p.q4 < 0) {
      c.tensors[p.name] = detail::f32_array(model.value(i).to_host_f32().data(), p.shape);
    }
    if (p.q4 < 0) continue;
    const Q4Weight& w = model.q4_weights()[p.q4];
    st::Array codes;
    codes.dtype = "U8";
    codes.shape = {w.out_features(), q4gsw::bytes_per_row(w.in_features)};
    codes.bytes = q4gsw::download_bytes(w);
    c.tensors[base_of(p.name) + ".qweight"] = std::move(codes);
    c.tensors[base_of(p.name) + ".scales"] = st::from_tensor(w.scales);
  }
  c.metadata["format"] = kFormat;
  c.metadata["config"] = model.config().to_json();
  if (!state_json.empty()) c.metadata["state"] = state_json;
  if (m) c.metadata["optimizer"] = "adamw";
  if (!tokenizer_hash.empty()) c.metadata["tokenizer"] = tokenizer_hash;
  c.metadata["checksum"] = detail::checkpoint_checksum(c);
  st::save(path, c);
}

CheckpointInfo read_checkpoint_info(const std::string& path) { return info_of(read_checked(path), path); }

CheckpointInfo peek_checkpoint_info(const std::string& path) {
  std::map<std::string, std::string> metadata;
  try {
    metadata = st::MappedFile(path).metadata();
  } catch (const Error& e) {
    throw Error("cannot read checkpoint '" + path + "': " + e.what());
  }
  const auto format = metadata.find("format");
  const std::string got = format == metadata.end() ? "" : format->second;
  if (got != kFormat)
    throw Error("'" + path + "' is not a wgtrain checkpoint (format '" + got + "', expected '" + kFormat + "')");
  return info_of(metadata, path);
}

std::string tokenizer_file_hash(const std::string& tokenizer_path) {
  if (std::filesystem::is_directory(tokenizer_path))
    throw Error("cannot read tokenizer '" + tokenizer_path + "': it is a directory");
  std::ifstream in(tokenizer_path, std::ios::binary);
  if (!in) throw Error("cannot read tokenizer '" + tokenizer_path + "': " + std::strerror(errno));
  uint64_t h = 0xcbf29ce484222325ull;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    const std::streamsize n = in.gcount();
    for (std::streamsize i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(buf[i])) * 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("fnv1a64:") + hex;
}

void check_tokenizer_binding(const CheckpointInfo& info, const std::string& checkpoint_path,
                             const std::string& tokenizer_path) {
  if (info.tokenizer_hash.empty()) return;
  const std::string here = tokenizer_file_hash(tokenizer_path);
  if (here != info.tokenizer_hash)
    throw Error("'" + tokenizer_path + "' is not the tokenizer '" + checkpoint_path + "' was trained with (" +
                here + ", the checkpoint names " + info.tokenizer_hash +
                "): put that run's tokenizer.json back, or train anew");
}

void check_run_files(const std::string& run_dir, const CheckpointInfo& info) {
  namespace fs = std::filesystem;
  const fs::path ckpt = fs::path(run_dir) / "checkpoint.safetensors";
  const fs::path config = fs::path(run_dir) / "config.json";
  if (fs::exists(config)) {
    std::ifstream in(config);
    std::stringstream text;
    text << in.rdbuf();
    LlamaConfig described;
    try {
      described = LlamaConfig::from_json(text.str());
    } catch (const Error& e) {
      throw Error("'" + config.string() + "' is unusable: " + e.what());
    }
    if (const auto diff = config_differences(info.config, described); !diff.empty()) {
      std::string list;
      for (const auto& d : diff) list += (list.empty() ? "" : ", ") + d;
      throw Error("'" + ckpt.string() + "' is not the model '" + config.string() + "' describes (checkpoint vs " +
                  "config.json: " + list + "): the run's files come from different runs");
    }
  }
  const fs::path tokenizer = fs::path(run_dir) / "tokenizer.json";
  if (fs::exists(tokenizer)) check_tokenizer_binding(info, ckpt.string(), tokenizer.string());
}

std::vector<std::string> config_differences(const LlamaConfig& a, const LlamaConfig& b) {
  const auto ja = nlohmann::json::parse(a.to_json()), jb = nlohmann::json::parse(b.to_json());
  std::vector<std::string> out;
  for (const auto& [key, va] : ja.items()) {
    const auto vb = jb.contains(key) ? jb.at(key) : nlohmann::json();
    if (va != vb) out.push_back(key + " " + va.dump() + " vs " + vb.dump());
  }
  return out;
}

CheckpointInfo load_checkpoint(const std::string& path, Llama& model, const Tensor* m, const Tensor* v) {
  const st::Contents c = read_checked(path);
  CheckpointInfo info = info_of(c, path);
  if (const auto diff = config_differences(info.config, model.config()); !diff.empty()) {
    std::string list;
    for (const auto& d : diff) list += (list.empty() ? "" : ", ") + d;
    throw Error("checkpoint '" + path + "' holds a different model than the one here (checkpoint vs here: " + list +
                ")");
  }
  const bool moments = m != nullptr;
  if (moments && !info.has_optimizer)
    throw Error("checkpoint '" + path + "' has no optimizer state to resume from (it holds weights only)");
  // Check every tensor before touching the device. A parameter's float32 weight is there when it was trainable or
  // float when saved; a frozen q4 weight is its codes and scales alone.
  std::set<std::string> known;
  for (const auto& p : model.params()) {
    known.insert(p.name);
    if (info.has_optimizer) known.insert({"optimizer.m." + p.name, "optimizer.v." + p.name});
    if (p.q4 >= 0) known.insert({base_of(p.name) + ".qweight", base_of(p.name) + ".scales"});
  }
  for (const auto& [name, a] : c.tensors)
    if (!known.count(name)) throw Error("checkpoint '" + path + "' holds a tensor the model does not have: '" + name + "'");
  struct Q4Load {
    std::vector<int32_t> words;
    std::vector<float> scales;
  };
  std::map<size_t, Q4Load> q4;
  std::map<size_t, const st::Array*> floats;
  std::vector<float> mh, vh;
  if (moments) {
    mh.assign(static_cast<size_t>(model.arena_size()), 0.0f);
    vh.assign(mh.size(), 0.0f);
  }
  for (size_t i = 0; i < model.params().size(); ++i) {
    const Llama::Param& p = model.params()[i];
    const size_t n = static_cast<size_t>(numel(p.shape));
    if (p.has_float() || c.tensors.count(p.name)) floats[i] = &need(c, path, p.name, "F32", p.shape);
    if (moments && p.trainable) {
      std::memcpy(mh.data() + p.offset, need(c, path, "optimizer.m." + p.name, "F32", p.shape).bytes.data(), n * 4);
      std::memcpy(vh.data() + p.offset, need(c, path, "optimizer.v." + p.name, "F32", p.shape).bytes.data(), n * 4);
    }
    if (p.q4 < 0) continue;
    const Q4Weight& w = model.q4_weights()[p.q4];
    const int64_t rows = w.out_features(), k = w.in_features;
    const st::Array& codes = need(c, path, base_of(p.name) + ".qweight", "U8", {rows, q4gsw::bytes_per_row(k)});
    const st::Array& scales = need(c, path, base_of(p.name) + ".scales", "F32", w.scales.shape());
    Q4Load& l = q4[i];
    l.words = q4gsw::pack_bytes(codes.bytes, rows, k);
    l.scales.resize(static_cast<size_t>(w.scales.numel()));
    std::memcpy(l.scales.data(), scales.bytes.data(), scales.bytes.size());
  }
  for (const auto& [i, a] : floats) {
    const Llama::Param& p = model.params()[i];
    if (!p.has_float()) continue;  // a frozen q4 weight here: its codes below are the weight
    std::vector<float> host(static_cast<size_t>(numel(p.shape)));
    std::memcpy(host.data(), a->bytes.data(), a->bytes.size());
    model.value(i).write(host);
  }
  for (const auto& [i, l] : q4) {
    const Q4Weight& w = model.q4_weights()[model.params()[i].q4];
    w.codes.write(l.words);
    w.scales.write(l.scales);
  }
  if (moments) {
    m->write(mh);
    v->write(vh);
  }
  return info;
}

}  // namespace wgtrain
