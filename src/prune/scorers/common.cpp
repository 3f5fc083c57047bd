// Helpers shared by the scorers: instruction tokens, row gathers, stage options.
#include <ATen/ATen.h>

#include <cmath>
#include <sstream>

#include "core/errors.h"
#include "prune/scorers/scorers.h"

namespace vispco {

at::Tensor instruction_mask(const TokenState& s) {
  const int64_t T = s.visual.size(1);
  auto idx = at::arange(T, s.positions.options()).unsqueeze(0);                                   // [1, T]
  auto last_visual = at::where(s.visual, idx, at::full_like(idx, -1)).amax(1, /*keepdim=*/true);  // [B, 1]
  return s.valid & s.visual.logical_not() & (idx > last_visual);
}

at::Tensor gather_rows(const at::Tensor& x, const at::Tensor& pos) {
  return x.gather(1, pos.unsqueeze(-1).expand({pos.size(0), pos.size(1), x.size(2)})).to(at::kFloat);
}

double stage_option(const PruneStage& st, const std::string& name, double fallback) {
  const auto it = st.options.find(name);
  if (it == st.options.end()) return fallback;
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw InvalidArgument("plan stage " + st.scorer + ": option " + name + " must be a number (got '" +
                        it->second + "')");
}

int64_t stage_int_option(const PruneStage& st, const std::string& name, int64_t fallback, int64_t lo,
                         int64_t hi) {
  const double v = stage_option(st, name, static_cast<double>(fallback));
  if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi)) {
    std::ostringstream got;
    got << v;
    throw InvalidArgument("plan stage " + st.scorer + ": option " + name + " must be an integer in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "] (got " + got.str() + ")");
  }
  return static_cast<int64_t>(v);
}

}  // namespace vispco
