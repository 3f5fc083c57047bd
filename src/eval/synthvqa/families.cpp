// SynthVQA question families (registry) and the scene layout. Templates, one per family:
//   color        What color is the <shape>?                               (the shape is unique)
//   shape        What shape is the <color> object?                        (the colour is unique)
//   count_shape  How many <shapes> are there?                             (1–6)
//   count_color  How many <color> objects are there?                      (1–6)
//   exist        Is there a <color> <shape> in the image?                 (half "no": random absent pairs
//   and,
//                                                                          POPE-style, pairs whose colour and
//                                                                          shape are both present, apart)
//   spatial      Where is the <color> <shape> relative to the <color> <shape>: left, right, above, or below?
//   size         Is the <color> <shape> bigger or smaller than the <color> <shape>?
//   text         What does the text say? | What does the <ink> text say?  (2–4 characters)
#include "eval/synthvqa/families.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>

#include "core/errors.h"
#include "eval/synthvqa/render.h"

namespace vispco::eval::synthvqa {
namespace {

constexpr int kS = kImageSize;
using ObjectFilter = std::function<bool(const SceneObject&)>;

SizeClass random_size(Rng& rng) { return static_cast<SizeClass>(rng.index(kSynthVqaSizeClasses)); }

}  // namespace

SceneObject make_object(Rng& rng, Shape shape, Colour colour, SizeClass size) {
  SceneObject o;
  o.shape = shape;
  o.colour = colour;
  o.size = size;
  o.radius = rng.uniform_int(info(size).min_radius, info(size).max_radius);
  for (int k = 0; k < 3; ++k)
    o.rgb[k] = static_cast<uint8_t>(std::clamp(info(colour).rgb[k] + rng.uniform_int(-12, 12), 0, 255));
  return o;
}

std::string random_string(Rng& rng, int length) {
  const std::string alphabet = kTextAlphabet;
  std::string s;
  for (int i = 0; i < length; ++i) s += alphabet[rng.index(alphabet.size())];
  return s;
}

Shape random_shape(Rng& rng) { return static_cast<Shape>(rng.index(shape_table().size())); }
Colour random_colour(Rng& rng) { return static_cast<Colour>(rng.index(colour_table().size())); }

namespace {

// A random object accepted by `keep` (rejection sampling over the attribute tables).
SceneObject random_object(Rng& rng, const ObjectFilter& keep) {
  for (;;) {
    SceneObject o = make_object(rng, random_shape(rng), random_colour(rng), random_size(rng));
    if (keep(o)) return o;
  }
}

// Appends random objects accepted by `keep` until the draft holds n.
void fill_objects(Draft& d, Rng& rng, int n, const ObjectFilter& keep) {
  while (static_cast<int>(d.objects.size()) < n) d.objects.push_back(random_object(rng, keep));
}

// The number of objects of a scene that must hold at least `at_least`.
int n_objects(Rng& rng, int at_least) {
  return rng.uniform_int(std::max(at_least, kMinObjects), kMaxObjects);
}

// A string of ink_table()[ink] in `style`, `length` characters long (0: a random length).
SceneText make_text(Rng& rng, int length, size_t ink, const TextStyle& style) {
  SceneText t;
  t.text = random_string(rng, length > 0 ? length : rng.uniform_int(style.min_length, style.max_length));
  t.color = ink_table()[ink].name;
  t.font_px = rng.uniform_int(style.min_px, style.max_px);
  return t;
}

std::string name(const SceneObject& o) { return std::string(info(o.colour).name) + " " + info(o.shape).name; }
bool same_kind(const SceneObject& a, const SceneObject& b) {
  return a.shape == b.shape && a.colour == b.colour;
}

Draft build_color(Rng& rng, size_t slot) {
  Draft d;
  const SceneObject target = make_object(rng, random_shape(rng), static_cast<Colour>(slot), random_size(rng));
  d.objects.push_back(target);
  fill_objects(d, rng, n_objects(rng, 1), [&](const SceneObject& o) { return o.shape != target.shape; });
  d.question = std::string("What color is the ") + info(target.shape).name + "?";
  d.answer = info(target.colour).name;
  return d;
}

Draft build_shape(Rng& rng, size_t slot) {
  Draft d;
  const SceneObject target = make_object(rng, static_cast<Shape>(slot), random_colour(rng), random_size(rng));
  d.objects.push_back(target);
  fill_objects(d, rng, n_objects(rng, 1), [&](const SceneObject& o) { return o.colour != target.colour; });
  d.question = std::string("What shape is the ") + info(target.colour).name + " object?";
  d.answer = info(target.shape).name;
  return d;
}

// A count question: slot + 1 objects that `counted` accepts, then objects it rejects; the answer is the
// count.
Draft count_draft(Rng& rng, size_t slot, const ObjectFilter& counted, std::string question) {
  Draft d;
  const int k = static_cast<int>(slot) + 1;
  fill_objects(d, rng, k, counted);
  fill_objects(d, rng, n_objects(rng, k), [&](const SceneObject& o) { return !counted(o); });
  d.question = std::move(question);
  d.answer = std::to_string(k);
  return d;
}

Draft build_count_shape(Rng& rng, size_t slot) {
  const Shape shape = random_shape(rng);
  return count_draft(
      rng, slot, [shape](const SceneObject& o) { return o.shape == shape; },
      std::string("How many ") + info(shape).plural + " are there?");
}

Draft build_count_color(Rng& rng, size_t slot) {
  const Colour colour = random_colour(rng);
  return count_draft(
      rng, slot, [colour](const SceneObject& o) { return o.colour == colour; },
      std::string("How many ") + info(colour).name + " objects are there?");
}

// Slots: 0 yes, 1 no (random absent pair), 2 yes, 3 no (adversarial: colour and shape present, apart).
Draft build_exist(Rng& rng, size_t slot) {
  Draft d;
  const SceneObject query = make_object(rng, random_shape(rng), random_colour(rng), random_size(rng));
  const int n = n_objects(rng, 2);
  const ObjectFilter absent = [&](const SceneObject& o) { return !same_kind(o, query); };
  if (slot % 2 == 0) {
    d.objects.push_back(query);
    fill_objects(d, rng, n, [](const SceneObject&) { return true; });
  } else {
    if (slot == 3) {
      d.objects.push_back(random_object(
          rng, [&](const SceneObject& o) { return o.colour == query.colour && o.shape != query.shape; }));
      d.objects.push_back(random_object(
          rng, [&](const SceneObject& o) { return o.shape == query.shape && o.colour != query.colour; }));
    }
    fill_objects(d, rng, n, absent);
  }
  d.question = "Is there a " + name(query) + " in the image?";
  d.answer = slot % 2 == 0 ? "yes" : "no";
  return d;
}

// Two objects A, B of distinct (colour, shape) pairs found nowhere else in the scene.
void add_named_pair(Draft& d, Rng& rng, SizeClass size_a, SizeClass size_b) {
  const SceneObject a = make_object(rng, random_shape(rng), random_colour(rng), size_a);
  const SceneObject b0 = random_object(rng, [&](const SceneObject& o) { return !same_kind(o, a); });
  const SceneObject b = make_object(rng, b0.shape, b0.colour, size_b);
  d.objects = {a, b};
  fill_objects(d, rng, n_objects(rng, 2),
               [&](const SceneObject& o) { return !same_kind(o, a) && !same_kind(o, b); });
}

Draft build_spatial(Rng& rng, size_t slot) {
  static const char* const kRelations[] = {"left", "right", "above", "below"};
  Draft d;
  add_named_pair(d, rng, random_size(rng), random_size(rng));
  d.rel_a = 0;
  d.rel_b = 1;
  d.relation = kRelations[slot];
  d.question = "Where is the " + name(d.objects[0]) + " relative to the " + name(d.objects[1]) +
               ": left, right, above, or below?";
  d.answer = d.relation;
  return d;
}

Draft build_size(Rng& rng, size_t slot) {
  Draft d;
  const bool bigger = slot == 0;
  add_named_pair(d, rng, bigger ? SizeClass::kLarge : SizeClass::kSmall,
                 bigger ? SizeClass::kSmall : SizeClass::kLarge);
  d.question = "Is the " + name(d.objects[0]) + " bigger or smaller than the " + name(d.objects[1]) + "?";
  d.answer = bigger ? "bigger" : "smaller";
  return d;
}

Draft build_text(Rng& rng, size_t slot) {
  return text_draft(rng, static_cast<int>(slot) + 2, kSynthVqaText, [&](Draft& d) {
    fill_objects(d, rng, n_objects(rng, 2), [](const SceneObject&) { return true; });
  });
}

constexpr int kTriesPerItem = 400;
constexpr int kRestarts = 200;

bool try_layout(Draft& d, Rng& rng) {
  const bool texts_placed = place_texts(d, 8, [&](SceneText& t) {
    t.x = rng.uniform_int(3, kS - 3 - t.w);
    t.y = rng.uniform_int(3, kS - 3 - t.h);
  });
  if (!texts_placed) return false;
  std::vector<size_t> order;
  if (d.rel_a >= 0) order = {static_cast<size_t>(d.rel_a), static_cast<size_t>(d.rel_b)};
  for (size_t i = 0; i < d.objects.size(); ++i)
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  for (size_t n_placed = 0; n_placed < order.size(); ++n_placed) {
    SceneObject& o = d.objects[order[n_placed]];
    bool placed = false;
    for (int k = 0; k < kTriesPerItem && !placed; ++k) {
      o.x = rng.uniform_int(o.radius + 2, kS - 3 - o.radius);
      o.y = rng.uniform_int(o.radius + 2, kS - 3 - o.radius);
      placed = std::all_of(d.texts.begin(), d.texts.end(), [&](const SceneText& t) {
        return rect_distance2(o.x, o.y, t.x, t.y, t.w, t.h) >= (o.radius + 3) * (o.radius + 3);
      });
      for (size_t j = 0; j < n_placed && placed; ++j) {
        const SceneObject& p = d.objects[order[j]];
        const int dx = o.x - p.x, dy = o.y - p.y, rr = o.radius + p.radius;
        placed = 100 * (dx * dx + dy * dy) >= 81 * rr * rr;
      }
      if (placed && n_placed == 1 && d.rel_a >= 0)
        placed = spatial_relation(d.objects[static_cast<size_t>(d.rel_a)], o) == d.relation;
    }
    if (!placed) return false;
  }
  return true;
}

}  // namespace

const std::vector<FamilyInfo>& family_table() {
  static const std::vector<FamilyInfo> t{
      {"color", colour_table().size(), build_color},
      {"shape", shape_table().size(), build_shape},
      {"count_shape", 6, build_count_shape},
      {"count_color", 6, build_count_color},
      {"exist", 4, build_exist},
      {"spatial", 4, build_spatial},
      {"size", 2, build_size},
      {"text", 3, build_text},
  };
  return t;
}

std::string spatial_relation(const SceneObject& a, const SceneObject& b) {
  const int dx = b.x - a.x, dy = b.y - a.y;  // > 0: a is left of / above b
  if (dx >= kMinRelationOffset && 2 * std::abs(dy) <= dx) return "left";
  if (-dx >= kMinRelationOffset && 2 * std::abs(dy) <= -dx) return "right";
  if (dy >= kMinRelationOffset && 2 * std::abs(dx) <= dy) return "above";
  if (-dy >= kMinRelationOffset && 2 * std::abs(dx) <= -dy) return "below";
  return "";
}

void add_texts(Draft& draft, Rng& rng, int n, int first_length, const TextStyle& style) {
  std::vector<size_t> inks(ink_table().size());
  for (size_t i = 0; i < inks.size(); ++i) inks[i] = i;
  rng.shuffle(inks);
  for (int i = 0; i < n; ++i)
    draft.texts.push_back(make_text(rng, i == 0 ? first_length : 0, inks[static_cast<size_t>(i)], style));
}

Draft text_draft(Rng& rng, int first_length, const TextStyle& style,
                 const std::function<void(Draft&)>& add_objects) {
  Draft d;
  const int n_texts = rng.uniform_int(1, 2);
  add_texts(d, rng, n_texts, first_length, style);
  add_objects(d);
  d.question = n_texts == 1 ? "What does the text say?" : "What does the " + d.texts[0].color + " text say?";
  d.answer = d.texts[0].text;
  return d;
}

void add_distractor_texts(Draft& draft, Rng& rng, const TextStyle& style) {
  add_texts(draft, rng, rng.uniform_int(0, 2), 0, style);
}

void add_texts_up_to(Draft& draft, Rng& rng, int total) {
  std::vector<size_t> free_inks;
  for (size_t i = 0; i < ink_table().size(); ++i)
    if (std::none_of(draft.texts.begin(), draft.texts.end(),
                     [&](const SceneText& t) { return t.color == ink_table()[i].name; }))
      free_inks.push_back(i);
  rng.shuffle(free_inks);
  for (size_t k = 0; k < free_inks.size() && static_cast<int>(draft.texts.size()) < total; ++k)
    draft.texts.push_back(make_text(rng, 0, free_inks[k], kSynthVqaText));
}

int rect_distance2(int x, int y, int rx, int ry, int w, int h) {
  const int dx = std::max({rx - x, 0, x - (rx + w)});
  const int dy = std::max({ry - y, 0, y - (ry + h)});
  return dx * dx + dy * dy;
}

bool place_texts(Draft& draft, int gap, const std::function<void(SceneText&)>& propose) {
  for (size_t i = 0; i < draft.texts.size(); ++i) {
    SceneText& t = draft.texts[i];
    const TextMetrics m = measure_text(t.text, t.font_px);
    t.w = m.w;
    t.h = m.h;
    bool placed = false;
    for (int k = 0; k < kTriesPerItem && !placed; ++k) {
      propose(t);
      const auto before = draft.texts.begin() + static_cast<long>(i);
      placed = std::all_of(draft.texts.begin(), before, [&](const SceneText& u) {
        return t.x + t.w + gap <= u.x || u.x + u.w + gap <= t.x || t.y + t.h + gap <= u.y ||
               u.y + u.h + gap <= t.y;
      });
    }
    if (!placed) return false;
  }
  return true;
}

void layout(Draft& draft, Rng& rng) {
  for (int attempt = 0; attempt < kRestarts; ++attempt)
    if (try_layout(draft, rng)) return;
  throw Error("SynthVQA layout: no placement found for " + std::to_string(draft.objects.size()) +
              " objects and " + std::to_string(draft.texts.size()) + " strings after " +
              std::to_string(kRestarts) + " restarts");
}

}  // namespace vispco::eval::synthvqa
