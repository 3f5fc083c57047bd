// Replay of recorded keep decisions (see replay_hook.h).
#include "prune/replay_hook.h"

#include <ATen/ATen.h>

#include "core/errors.h"

namespace vispco {

ReplayHook::ReplayHook(const std::vector<StageTrace>& traces) {
  for (const auto& t : traces) {
    if (t.merged)
      throw InvalidArgument("plan stage " + t.stage.scorer +
                            " merges tokens; prune-then-fine-tune replays "
                            "selection-only stages (fastv, divprune, random, dart, cdpruner, gate, …)");
    const auto counts = t.kept.sum(1);
    if (counts.numel() > 0 && (counts != counts[0]).any().item<bool>())
      throw InvalidArgument("replay: the rows of stage " + t.stage.scorer +
                            " keep different numbers of tokens");
    if (counts.numel() > 0 && counts[0].item<int64_t>() == 0) continue;  // the stage removed nothing
    layers_.push_back(t.stage.layer);
    kept_.push_back(t.kept);
  }
}

bool ReplayHook::acts_before(int64_t layer) const {
  return std::find(layers_.begin(), layers_.end(), layer) != layers_.end();
}

bool ReplayHook::apply(int64_t layer, TokenState& state, const LayerSignals&) {
  const auto it = std::find(layers_.begin(), layers_.end(), layer);
  if (it == layers_.end()) return false;
  const auto& kept = kept_[static_cast<size_t>(it - layers_.begin())].to(state.hidden.device());
  TORCH_CHECK(kept.size(0) == state.hidden.size(0), "replay: the recorded batch has ", kept.size(0),
              " rows, this forward ", state.hidden.size(0));
  auto keep = state.visual.logical_not() | kept.gather(1, state.grid_index.clamp_min(0));  // [B, T]
  const int64_t B = state.hidden.size(0), n = keep.sum().item<int64_t>();
  TORCH_CHECK(n % B == 0, "replay: rows keep different numbers of tokens");
  auto idx = at::nonzero(keep).select(1, 1).view({B, n / B});  // ascending per row: sequence order
  state = gather_tokens(state, idx);
  return true;
}

}  // namespace vispco
