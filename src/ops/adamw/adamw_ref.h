// CPU reference for AdamW.
#pragma once

#include <cstdint>
#include <vector>

namespace wgtrain::ref {

void adamw_step(std::vector<double>& p, std::vector<double>& m, std::vector<double>& v, const std::vector<double>& g,
                double lr, double beta1, double beta2, double eps, double wd, int64_t step);

}  // namespace wgtrain::ref
