// Fine-tuning examples drawn as fixed-shape batches, padded (one example a row) or packed (best fit decreasing).
#include <algorithm>
#include <map>

#include "wgtrain/dataset.h"
#include "wgtrain/error.h"
#include "wgtrain/random.h"

namespace wgtrain::data {

ExampleBatcher::ExampleBatcher(std::vector<Example> examples, int64_t batch, int64_t seq_len, uint64_t seed,
                               bool pack, int32_t pad_id)
    : examples_(std::move(examples)), batch_(batch), seq_(seq_len), seed_(seed), pack_(pack), pad_(pad_id) {
  if (batch < 1 || seq_len < 1) throw ArgumentError("ExampleBatcher: batch and sequence length must be >= 1");
  if (examples_.empty()) throw Error("no examples to draw batches from");
  for (size_t i = 0; i < examples_.size(); ++i) {
    if (examples_[i].tokens.empty() || examples_[i].tokens.size() != examples_[i].loss.size())
      throw ArgumentError("ExampleBatcher: example " + std::to_string(i) + " has " +
                          std::to_string(examples_[i].tokens.size()) + " tokens and " +
                          std::to_string(examples_[i].loss.size()) + " mask entries (both must be equal, and > 0)");
  }
  const int64_t n = static_cast<int64_t>(examples_.size());
  if (!pack) {
    rows_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) rows_[i] = {i};
    return;
  }
  // Best fit decreasing: longest first, each into the row with the least room that still holds it. An example
  // takes min(size, seq_len) positions (a longer one fills a row alone, cut as in padded rows).
  auto width = [&](int64_t i) { return std::min<int64_t>(static_cast<int64_t>(examples_[i].tokens.size()), seq_); };
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return width(a) > width(b); });
  std::multimap<int64_t, size_t> room;  // room left -> row
  for (int64_t i : order) {
    const auto it = room.lower_bound(width(i));
    size_t row;
    int64_t left;
    if (it == room.end()) {
      row = rows_.size();
      rows_.emplace_back();
      left = seq_;
    } else {
      row = it->second;
      left = it->first;
      room.erase(it);
    }
    rows_[row].push_back(i);
    if (left - width(i) > 0) room.emplace(left - width(i), row);
  }
  for (auto& r : rows_) std::sort(r.begin(), r.end());  // file order inside a row
}

int64_t ExampleBatcher::batches_per_epoch() const { return (rows() + batch_ - 1) / batch_; }

void ExampleBatcher::prepare(int64_t epoch) const {
  if (epoch == cached_epoch_) return;
  SplitMix64 rng(seed_ * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(epoch) + 1);
  const int64_t n = rows();
  order_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order_[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(order_[i], order_[rng.next() % static_cast<uint64_t>(i + 1)]);
  cached_epoch_ = epoch;
}

void ExampleBatcher::fill_row(int64_t row, int32_t* inputs, int32_t* targets) const {
  std::fill(inputs, inputs + seq_, pad_);
  std::fill(targets, targets + seq_, -1);
  int64_t at = 0;
  for (int64_t e : rows_[row]) {
    const Example& ex = examples_[e];
    const int64_t len = static_cast<int64_t>(ex.tokens.size());
    // Inputs: up to seq_ - at tokens. Targets: token j + 1 where it counts, within this example only.
    const int64_t take = std::min(len, seq_ - at);
    for (int64_t j = 0; j < take; ++j) {
      inputs[at + j] = ex.tokens[j];
      if (j + 1 < len && ex.loss[j + 1]) targets[at + j] = ex.tokens[j + 1];
    }
    at += take;
  }
}

void ExampleBatcher::batch(int64_t step, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const {
  if (step < 0) throw ArgumentError("ExampleBatcher: negative step");
  inputs.resize(static_cast<size_t>(batch_ * seq_));
  targets.resize(inputs.size());
  const int64_t n = rows();
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t global = step * batch_ + b;
    prepare(global / n);
    fill_row(order_[global % n], inputs.data() + b * seq_, targets.data() + b * seq_);
  }
}

}  // namespace wgtrain::data
