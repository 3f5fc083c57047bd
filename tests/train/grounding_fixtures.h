// Fixtures shared by the grounding and stage-2 loss tests: a two-object scene, a question tokenizer, the
// training tests' micro model with more decoder layers, and one single-turn conversation laid out by hand.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "eval/synthvqa/generator.h"
#include "io/tokenizer.h"
#include "model/generate.h"
#include "model/llava/llava.h"
#include "model/llava/llava_prompt.h"
#include "model/llava/presets.h"
#include "test_util.h"
#include "train/conversation_loss.h"
#include "train/grounding.h"
#include "train/micro_recipe.h"

namespace vispco::train::testing_grounding {

// A scene with two overlapping objects (hand-derived patches in the tests that use it).
inline eval::synthvqa::Scene two_objects() {
  eval::synthvqa::Scene s;
  eval::synthvqa::SceneObject a;
  a.x = 42, a.y = 42, a.radius = 20;  // covers patch centres within 15 px: (35|49, 35|49)
  eval::synthvqa::SceneObject b;
  b.x = 56, b.y = 35, b.radius = 10;  // within 7.5 px: (49, 35) and (63, 35); drawn on top of a
  s.objects = {a, b};
  return s;
}

// A SentencePiece model trained on 300 SynthVQA questions and answers (seed 5).
inline io::Tokenizer question_tokenizer(const testing::TempDir& tmp) {
  std::vector<std::string> corpus;
  for (uint64_t i = 0; i < 300; ++i) {
    auto s = eval::synthvqa::make_sample(5, i);
    corpus.push_back(s.question + " " + s.answer);
  }
  io::train_sentencepiece(corpus, 400, tmp.str("tok.model"));
  return io::Tokenizer::load(tmp.str("tok.model"));
}

// The training tests' micro model with a third decoder layer (grounding records layers 0 and 1, each < L −
// 1).
inline LlavaConfig micro_model() {
  auto c = testing_micro::micro_recipe().model;
  c.text.num_hidden_layers = 3;
  return c;
}

// One single-turn conversation about sample 0 of seed 11 on a random micro model, and the same sequence laid
// out by hand ("USER: <image>\n{q} ASSISTANT:{a}</s>", no padding) for the independent computations of the
// tests.
struct OneTurn {
  testing::TempDir tmp;
  io::Tokenizer tok;
  LlavaConfig cfg;
  VisionLanguageModel m;
  eval::synthvqa::SynthSample s = eval::synthvqa::make_sample(11, 0);
  at::Tensor images;
  std::vector<std::vector<std::pair<std::string, std::string>>> turns;
  std::vector<int64_t> ans;  ///< answer ids + EOS
  VlmRequest req;            ///< prompt + answer + EOS

  explicit OneTurn(int64_t layers, int64_t kv_heads = 1)
      : tok(question_tokenizer(tmp)),
        cfg(with_layers(layers, kv_heads)),
        m(cfg, random_llava_net(cfg, 3, at::kFloat), tok, RunContext{}) {
    images = m.preprocess(s.rgb).unsqueeze(0);
    turns = {{{s.question, s.answer}}};
    req.prompt_ids = llava_prompt_ids(tok, s.question, cfg.image_token_index);
    ans = tok.encode(s.answer, false);
    ans.push_back(tok.eos_id());
    req.prompt_ids.insert(req.prompt_ids.end(), ans.begin(), ans.end());
  }
  static LlavaConfig with_layers(int64_t layers, int64_t kv_heads) {
    auto c = micro_model();
    c.text.num_hidden_layers = layers;
    c.text.num_key_value_heads = kv_heads;
    return c;
  }
  /// The prefill state of `req` built directly from the tower and projector.
  TokenState state() {
    auto feats = m.net()->vision_tower->forward(images, cfg.n_vision_layers_used(), true).features;
    return build_prefill_state(m, {req}, m.net()->multi_modal_projector->forward(feats));
  }
};

// Keeps the full hidden state entering decoder layer `layer` (the engine's PrefillHook contract).
struct HiddenTap : PrefillHook {
  int64_t layer;
  at::Tensor hidden;
  explicit HiddenTap(int64_t l) : layer(l) {}
  bool acts_before(int64_t l) const override { return l == layer; }
  bool apply(int64_t l, TokenState& state, const LayerSignals&) override {
    if (l == layer) hidden = state.hidden.clone();
    return false;
  }
};

// Answer grounding that pretends `answer` is read from glyphs: character c of the answer at grid patch 30 +
// c.
inline ConversationOptions glyph_grounded(const std::string& answer) {
  AnswerGrounding g;
  for (size_t c = 0; c < answer.size(); ++c) g.glyphs.push_back({static_cast<int64_t>(30 + c)});
  ConversationOptions opts;
  opts.answer_grounding = 1.0;
  opts.turn_answers = {{g}};
  return opts;
}

}  // namespace vispco::train::testing_grounding
