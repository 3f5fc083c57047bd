// SynthVQA-HR question families: seven fixed templates over scenes of 4–6 large objects (visible in the
// 336-px base view), 5–8 tiny objects and 1–2 small strings (legible only at full resolution). Three families
// ask about large objects (the base view suffices), four need the tiles: the colour and the shape of a tiny
// object, counting tiny objects of a shape, and reading small text. Builders fill families.h's Draft.
#pragma once
#include <vector>

#include "eval/synthvqa/families.h"
#include "eval/synthvqa/hr_scene.h"
#include "eval/synthvqa/rng.h"

namespace vispco::eval::synthvqa {

/// The SynthVQA-HR family registry, in the order samples cycle through it (name: template, answers):
///   large_color  What color is the large <shape>?            8 colours   (base view suffices)
///   large_shape  What shape is the large <color> object?     6 shapes    (base view suffices)
///   large_count  How many large <color> objects are there?   1–4         (base view suffices)
///   tiny_color   What color is the tiny <shape>?             8 colours   (needs the tiles)
///   tiny_shape   What shape is the tiny <color> object?      6 shapes    (needs the tiles)
///   tiny_count   How many tiny <shapes> are there?           1–4         (needs the tiles)
///   text         What does the text say? |                   2–3 chars   (needs the tiles)
///                What does the <ink> text say?
/// The object a question names is unique among the objects of its size class; in tiny_color every tiny
/// object has its own colour (the base view sees 5–8 tiny dots of distinct colours and cannot tell which is
/// the asked shape); in tiny_count the number of tiny objects (5–8) does not depend on the answer.
const std::vector<FamilyInfo>& hr_family_table();

/// SynthVQA-HR's strings (families.h add_texts, add_distractor_texts): 2–3 characters, cap height 8–10 px.
inline constexpr TextStyle kHrText{kHrMinTextLength, kHrMaxTextLength, kHrMinTextPx, kHrMaxTextPx};

}  // namespace vispco::eval::synthvqa
