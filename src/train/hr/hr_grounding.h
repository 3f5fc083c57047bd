// Answer grounding for the bundled high-resolution model's decoder stage (issue 48): the visual tokens of a
// LLaVA-NeXT image that show a SynthVQA-HR object, and the attention target of a question's answer row. The
// LLaVA-1.5 recipe's answer-grounding loss (train/grounding.h AnswerGrounding,
// losses/answer_grounding_loss.h) taught the bundled decoder's layer 3 head 0 to look at the object a
// question names; on ~2,400 AnyRes tokens a tiny object is one or two tile tokens, and token loss alone left
// the decoder answering tiny-object questions with one constant (docs/hr-model-training.md, session 34). This
// states where to look, on the packed sequence.
#pragma once
#include <cstdint>
#include <vector>

#include "eval/synthvqa/scene.h"
#include "model/llava_next/anyres.h"
#include "train/scene_questions.h"

namespace vispco::train {

/// For each row of an image's flattened tower features [(1 + T)·n²] (base view first, then the tiles
/// row-major), the index of its visual token in the packed sequence (model/llava_next/pack.h), or −1 where
/// unpadding dropped it. @return (1 + T)·n² entries.
std::vector<int64_t> hr_feature_to_token(const AnyresGeometry& g);

/// The visual tokens (indices into the image's N_v-token span, ascending, no duplicates) that show object `o`
/// of a SynthVQA-HR scene. Unless `centre_only`: in every view (hr_views.h: base, then tiles) the patches
/// whose centre maps to a canvas point within 0.75 of o's circumradius (hr_patch_labels' rule, occlusion
/// ignored). Always: the patch of the tile whose canvas area holds o's centre — so a tiny object (radius 8
/// px, often no patch centre within 6 px) has at least one high-resolution token, and with `centre_only` an
/// object is exactly one token (count questions, as train/grounding.h AnswerGroundingOptions::count_centres).
/// @param side tile side, pixels (the tower's image_size); g.grid patches per tile side.
/// @throws InvalidArgument when the canvas is not a whole number of tiles or g has another tile count.
std::vector<int64_t> hr_object_tokens(const eval::synthvqa::Scene& scene,
                                      const eval::synthvqa::SceneObject& o, const AnyresGeometry& g,
                                      int64_t side, bool centre_only = false);

/// The tile tokens (ascending, no duplicates) that show character `c` of scene text `t`: the patches of every
/// tile whose centre lies in the character's slice of the text box (the box split evenly among the
/// characters, hr_patch_labels' rule), plus the patch holding the slice's centre — so a narrow glyph (8–10 px
/// wide, patches every 14 px) has one. The base view shows the text 2–3× smaller, illegible by design: none
/// of its tokens.
/// @throws InvalidArgument when c is outside the text (and as hr_object_tokens).
std::vector<int64_t> hr_glyph_tokens(const eval::synthvqa::Scene& scene, const eval::synthvqa::SceneText& t,
                                     size_t c, const AnyresGeometry& g, int64_t side);

/// Where a turn's answer row should look: objects (each a list of token indices within the image span) that
/// share the row's mass evenly, each spread evenly over its tokens, plus one share on BOS when `sink`.
struct HrTurnGrounding {
  std::vector<std::vector<int64_t>> objects;
  bool sink = false;
  /// Text answers: [character of the answer] → its glyph tokens (hr_glyph_tokens); the row predicting each
  /// answer token then looks at the glyphs that token spells (the LLaVA-1.5 recipe's text_glyphs).
  std::vector<std::vector<int64_t>> glyphs;
  bool empty() const { return objects.empty() && !sink && glyphs.empty(); }
};

/// The answer grounding of an HR question (the trainer puts it on head 0 of decoder layer 3, the LLaVA-1.5
/// recipe's grounded layer, or of layer L − 2 in decoders of fewer than 5 layers) (train/hr/hr_questions.h
/// QaPair): large/tiny colour and shape → the named object's tokens; large/tiny count → each counted object's
/// centre token plus the BOS sink (mass 1/(n + 1) on BOS makes n readable, as in the LLaVA-1.5 recipe); text
/// and unknown families → none.
/// @throws InvalidArgument for an object index outside the scene (and as hr_object_tokens).
HrTurnGrounding hr_turn_grounding(const QaPair& q, const eval::synthvqa::Scene& scene,
                                  const AnyresGeometry& g, int64_t side);

}  // namespace vispco::train
