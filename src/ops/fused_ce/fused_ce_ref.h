// CPU reference for fused_ce.
#pragma once

#include <vector>

#include "ops/reference.h"

namespace wgtrain::ref {

struct CrossEntropyRef {
  double loss;
  HostTensor dlogits;
};

// n_valid < 0: count the labels >= 0. With no row counting (n_valid 0), loss 0 and dlogits 0.
CrossEntropyRef cross_entropy(const HostTensor& logits, const std::vector<int>& labels, double n_valid = -1);

}  // namespace wgtrain::ref
