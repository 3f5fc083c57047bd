// Learned gate scorer (seed-described, DESIGN.md §5; the gate itself in prune/gate.h): before the LLM, each
// projected visual token's gate logit (from its embedding and, when the gate was trained so, the question's
// pooled embedding) ranks it; the top K are kept. The gate file is the stage option file=PATH, or
// gate.safetensors in the model folder (`vispco train-gate`); its content hash joins the result-store key.
#include "prune/gate.h"

#include <ATen/ATen.h>

#include "core/errors.h"
#include "core/hash.h"
#include "prune/question_independent.h"
#include "prune/scorers/scorers.h"

namespace vispco {
namespace {

class GateScorer : public Scorer, public QuestionIndependent {
 public:
  // A gate trained with use_question reads the pooled question (score()).
  bool question_independent() const override { return gate_ && !gate_->cfg.use_question; }
  HookPoint hook_point() const override { return HookPoint::kPreLlm; }
  ScorerNeeds needs() const override { return {.prompt_only = true}; }
  std::vector<std::string> option_names() const override { return {"file"}; }

  void bind(const PruneStage& stage, const ModelShape& shape, const ScorerEnv& env) override {
    std::string path;
    if (auto it = stage.options.find("file"); it != stage.options.end()) {
      path = it->second;
    } else if (!env.model_dir.empty()) {
      path = default_gate_path(env.model_dir);
    } else {
      throw InvalidArgument(
          "plan stage gate: no gate file (name it with file=PATH; the model folder is unknown here)");
    }
    gate_ = load_gate(path, shape.hidden_size);
    gate_->eval();
    key_ = "gate=sha256:" + sha256_file_hex(path).substr(0, 16);
  }
  std::string resource_key() const override { return key_; }
  bool provides_scores() const override { return true; }
  // The gate's logits z [B, N] fp32 (σ(z / temperature) is the keep probability).
  at::Tensor score(const ScoreInput& in) const override {
    if (!gate_) throw InvalidArgument("gate: no gate loaded (the stage was not bound)");
    const auto& h = in.state->hidden;
    if (gate_->fc1->weight.device() != h.device()) gate_->to(h.device());
    auto tokens = gather_rows(h, in.visual_pos);  // [B, N, D] fp32
    return gate_->logits(tokens, gate_->cfg.use_question ? pooled_question(*in.state) : at::Tensor());
  }

  Selection select(const ScoreInput& in) const override {
    auto z = score(in);
    Selection s;
    s.scores = at::sigmoid(z / gate_->cfg.temperature);
    s.keep = top_k_indices(z, in.stage->keep);  // logits: σ saturates to ties in fp32
    return s;
  }

 private:
  mutable TokenGate gate_{nullptr};  // moved to the tokens' device on first use
  std::string key_;
};

}  // namespace

std::unique_ptr<Scorer> make_gate_scorer() { return std::make_unique<GateScorer>(); }

}  // namespace vispco
