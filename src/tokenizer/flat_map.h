// Open-addressing hash maps for the BPE model's two big tables (Llama 3: 128k tokens, 280k merges): one flat array
// of slots each, so loading and lookups cost about one cache miss instead of a chain of node pointers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace wgtrain::tok {

// Token string -> id. The strings live in one arena.
class TokenMap {
 public:
  size_t size() const { return size_; }
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    if (cap > slots_.size()) rehash(cap);
  }
  void insert_or_assign(std::string_view s, int32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    const uint64_t h = hash(s);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& slot = slots_[i];
      if (slot.len == kEmpty) {
        slot = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(s.size()), id};
        arena_.append(s);
        ++size_;
        return;
      }
      if (slot.hash == h && view(slot) == s) {
        slot.id = id;
        return;
      }
    }
  }
  // The id of s, or -1.
  int32_t find(std::string_view s) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(s);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& slot = slots_[i];
      if (slot.len == kEmpty) return -1;
      if (slot.hash == h && view(slot) == s) return slot.id;
    }
  }
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& slot : slots_)
      if (slot.len != kEmpty) f(view(slot), slot.id);
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash;
    uint32_t offset, len;
    int32_t id;
  };
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  std::string_view view(const Slot& slot) const { return std::string_view(arena_).substr(slot.offset, slot.len); }
  void rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{0, 0, kEmpty, 0});
    for (const Slot& slot : old) {
      if (slot.len == kEmpty) continue;
      size_t i = slot.hash & (cap - 1);
      while (slots_[i].len != kEmpty) i = (i + 1) & (cap - 1);
      slots_[i] = slot;
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  size_t size_ = 0;
};

// (left id, right id) -> (rank, merged id).
class PairMap {
 public:
  struct Value {
    int32_t rank;
    int32_t id;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    if (cap > slots_.size()) rehash(cap);
  }
  void insert_or_assign(int32_t a, int32_t b, Value v) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    const uint64_t k = key(a, b);
    for (size_t i = index(k);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& slot = slots_[i];
      if (slot.key == kEmpty) {
        slot = Slot{k, v};
        ++size_;
        return;
      }
      if (slot.key == k) {
        slot.value = v;
        return;
      }
    }
  }
  const Value* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    const uint64_t k = key(a, b);
    for (size_t i = index(k);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& slot = slots_[i];
      if (slot.key == k) return &slot.value;
      if (slot.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // ids are non-negative, so no pair has this key
  struct Slot {
    uint64_t key;
    Value value;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t index(uint64_t k) const { return (k * 0x9E3779B97F4A7C15ull) >> shift_; }
  void rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{kEmpty, {0, 0}});
    shift_ = 64;
    for (size_t c = cap; c > 1; c >>= 1) --shift_;
    for (const Slot& slot : old) {
      if (slot.key == kEmpty) continue;
      size_t i = index(slot.key);
      while (slots_[i].key != kEmpty) i = (i + 1) & (cap - 1);
      slots_[i] = slot;
    }
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
  int shift_ = 64;
};

}  // namespace wgtrain::tok
