// SynthVQA question families: each builds the attributes of a scene for one chosen answer ("slot") and the
// question about it; layout() then places objects and strings. Answers are single words or numbers,
// balanced within a family by cycling its slots. Objects a question names are unique in their scene.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "eval/synthvqa/rng.h"
#include "eval/synthvqa/scene.h"

namespace vispco::eval::synthvqa {

/// Smallest offset, pixels, along the main axis of a spatial relation; the cross-axis offset is at most half
/// the main one, so exactly one of left/right/above/below holds.
inline constexpr int kMinRelationOffset = 40;
/// Bounds on the number of objects per scene.
inline constexpr int kMinObjects = 2, kMaxObjects = 10;

/// A question with its answer and the unplaced scene it is about.
struct Draft {
  /// Objects with shape, colour, size, radius and rgb set; x, y filled by layout().
  std::vector<SceneObject> objects;
  /// Strings with text, ink and font_px set; box filled by layout().
  std::vector<SceneText> texts;
  /// Spatial constraint for layout(): objects[rel_a] must be `relation` of objects[rel_b] (−1: none).
  int rel_a = -1, rel_b = -1;
  std::string relation;
  std::string question;
  std::string answer;
};

/// Builds a draft whose answer is the family's slot-th answer (slot < n_slots).
using FamilyBuilder = Draft (*)(Rng& rng, size_t slot);

/// One question family: name (the jsonl "family"), the number of answer slots it cycles through, and its
/// builder. Templates: see families.cpp (they are fixed; the tests parse them).
struct FamilyInfo {
  const char* name;
  size_t n_slots;
  FamilyBuilder build;
};

/// The family registry, in the order samples cycle through it: color, shape, count_shape, count_color,
/// exist, spatial, size, text.
const std::vector<FamilyInfo>& family_table();

/// An object of the given attributes: circumradius uniform in size_table()'s range for `size` (pixels), fill
/// = the nominal colour plus a jitter in [−12, 12] per channel; x, y left 0. Shared with SynthVQA-HR.
SceneObject make_object(Rng& rng, Shape shape, Colour colour, SizeClass size);

/// `length` characters drawn uniformly from kTextAlphabet. Shared with SynthVQA-HR.
std::string random_string(Rng& rng, int length);

/// A shape, a colour drawn uniformly from its table (one rng draw). Shared with SynthVQA-HR.
Shape random_shape(Rng& rng);
Colour random_colour(Rng& rng);

/// The strings of a dataset: length in characters and cap height in pixels (font_px), each drawn uniformly
/// in [min, max].
struct TextStyle {
  int min_length, max_length;
  int min_px, max_px;
};
/// SynthVQA's strings: 2–4 characters, 12–20 px.
inline constexpr TextStyle kSynthVqaText{2, 4, 12, 20};

/// Appends n strings in `style` of distinct inks (n ≤ 5); the first has `first_length` characters (0: a
/// random length). Shared with SynthVQA-HR.
void add_texts(Draft& draft, Rng& rng, int n, int first_length, const TextStyle& style);

/// The text family's draft: 1 or 2 strings in `style`, the first `first_length` characters long, then the
/// objects `add_objects` appends; the question asks what the first string says (by its ink when there are
/// two). Shared with SynthVQA-HR.
Draft text_draft(Rng& rng, int first_length, const TextStyle& style,
                 const std::function<void(Draft&)>& add_objects);

/// The relation of a to b ("left", "right", "above", "below") when one holds with kMinRelationOffset, else
/// "".
std::string spatial_relation(const SceneObject& a, const SceneObject& b);

/// Appends 0–2 random strings in `style` (distinct inks) that no question asks about; the generators add
/// them to every draft without strings of its own.
void add_distractor_texts(Draft& draft, Rng& rng, const TextStyle& style = kSynthVqaText);

/// Appends random strings (2–4 characters, inks unused by the draft's strings) until the draft holds `total`
/// strings or every ink is used (at most 5). Tower pre-training uses it for text-rich scenes
/// (generator.h SampleOptions::min_texts); no benchmark split does.
void add_texts_up_to(Draft& draft, Rng& rng, int total);

/// Distance², pixels², from (x, y) to the rectangle [rx, rx + w] × [ry, ry + h]. Shared with SynthVQA-HR.
int rect_distance2(int x, int y, int rx, int ry, int w, int h);

/// Places the draft's strings one by one (w, h from render.h measure_text, then x, y set by `propose`), each
/// at least `gap` pixels clear of the strings placed before it; 400 proposals a string. Shared with
/// SynthVQA-HR. @return false at a dead end (the caller restarts the layout).
bool place_texts(Draft& draft, int gap, const std::function<void(SceneText&)>& propose);

/// Places the draft's strings then objects uniformly at random, all inside the image, strings apart from
/// each other and from objects, objects overlapping at most slightly (centre distance ≥ 0.9·(r_i + r_j)),
/// the spatial constraint satisfied. Retries whole layouts on a dead end.
/// @throws Error if no layout is found after many restarts (a bug in a family's object counts).
void layout(Draft& draft, Rng& rng);

}  // namespace vispco::eval::synthvqa
