// SynthVQA-HR question families (registry and builders). Every scene holds kHrMinLarge–kHrMaxLarge large
// and kHrMinTiny–kHrMaxTiny tiny objects; a builder places the objects its answer needs first, then fills
// each size class with random objects that keep the question unambiguous. Templates: hr_families.h.
#include "eval/synthvqa/hr_families.h"

#include <algorithm>
#include <functional>
#include <string>

#include "eval/synthvqa/hr_scene.h"

namespace vispco::eval::synthvqa {
namespace {

using ObjectFilter = std::function<bool(const SceneObject&)>;

Shape random_shape(Rng& rng) { return static_cast<Shape>(rng.index(shape_table().size())); }
Colour random_colour(Rng& rng) { return static_cast<Colour>(rng.index(colour_table().size())); }

// A random object of size class `size` accepted by `keep` (rejection sampling over shape and colour).
SceneObject random_object(Rng& rng, SizeClass size, const ObjectFilter& keep) {
  for (;;) {
    SceneObject o = make_object(rng, random_shape(rng), random_colour(rng), size);
    if (keep(o)) return o;
  }
}

int count_of_size(const Draft& d, SizeClass size) {
  return static_cast<int>(std::count_if(d.objects.begin(), d.objects.end(),
                                        [&](const SceneObject& o) { return o.size == size; }));
}

// Appends random objects of class `size` accepted by `keep` until the draft holds n of that class.
void fill(Draft& d, Rng& rng, SizeClass size, int n, const ObjectFilter& keep) {
  while (count_of_size(d, size) < n) d.objects.push_back(random_object(rng, size, keep));
}

const ObjectFilter kAny = [](const SceneObject&) { return true; };

int n_large(Rng& rng) { return rng.uniform_int(kHrMinLarge, kHrMaxLarge); }
int n_tiny(Rng& rng) { return rng.uniform_int(kHrMinTiny, kHrMaxTiny); }

// Appends n strings of distinct inks; the first has `first_length` characters (0: random length).
void add_texts(Draft& d, Rng& rng, int n, int first_length) {
  std::vector<size_t> inks(ink_table().size());
  for (size_t i = 0; i < inks.size(); ++i) inks[i] = i;
  rng.shuffle(inks);
  for (int i = 0; i < n; ++i) {
    SceneText t;
    const int length =
        i == 0 && first_length > 0 ? first_length : rng.uniform_int(kHrMinTextLength, kHrMaxTextLength);
    t.text = random_string(rng, length);
    t.color = ink_table()[inks[static_cast<size_t>(i)]].name;
    t.font_px = rng.uniform_int(kHrMinTextPx, kHrMaxTextPx);
    d.texts.push_back(t);
  }
}

Draft build_large_color(Rng& rng, size_t slot) {
  Draft d;
  const SceneObject target =
      make_object(rng, random_shape(rng), static_cast<Colour>(slot), SizeClass::kLarge);
  d.objects.push_back(target);
  fill(d, rng, SizeClass::kLarge, n_large(rng),
       [&](const SceneObject& o) { return o.shape != target.shape; });
  fill(d, rng, SizeClass::kTiny, n_tiny(rng), kAny);
  d.question = std::string("What color is the large ") + info(target.shape).name + "?";
  d.answer = info(target.colour).name;
  return d;
}

Draft build_large_shape(Rng& rng, size_t slot) {
  Draft d;
  const SceneObject target =
      make_object(rng, static_cast<Shape>(slot), random_colour(rng), SizeClass::kLarge);
  d.objects.push_back(target);
  fill(d, rng, SizeClass::kLarge, n_large(rng),
       [&](const SceneObject& o) { return o.colour != target.colour; });
  fill(d, rng, SizeClass::kTiny, n_tiny(rng), kAny);
  d.question = std::string("What shape is the large ") + info(target.colour).name + " object?";
  d.answer = info(target.shape).name;
  return d;
}

Draft build_large_count(Rng& rng, size_t slot) {
  Draft d;
  const int k = static_cast<int>(slot) + 1;
  const Colour colour = random_colour(rng);
  fill(d, rng, SizeClass::kLarge, k, [&](const SceneObject& o) { return o.colour == colour; });
  fill(d, rng, SizeClass::kLarge, n_large(rng), [&](const SceneObject& o) { return o.colour != colour; });
  fill(d, rng, SizeClass::kTiny, n_tiny(rng), kAny);
  d.question = std::string("How many large ") + info(colour).name + " objects are there?";
  d.answer = std::to_string(k);
  return d;
}

Draft build_tiny_color(Rng& rng, size_t slot) {
  Draft d;
  const SceneObject target = make_object(rng, random_shape(rng), static_cast<Colour>(slot), SizeClass::kTiny);
  d.objects.push_back(target);
  // Other tiny objects: other shapes, and every tiny object a colour of its own.
  fill(d, rng, SizeClass::kTiny, n_tiny(rng), [&](const SceneObject& o) {
    return o.shape != target.shape &&
           std::none_of(d.objects.begin(), d.objects.end(),
                        [&](const SceneObject& p) { return p.colour == o.colour; });
  });
  fill(d, rng, SizeClass::kLarge, n_large(rng), kAny);
  d.question = std::string("What color is the tiny ") + info(target.shape).name + "?";
  d.answer = info(target.colour).name;
  return d;
}

Draft build_tiny_shape(Rng& rng, size_t slot) {
  Draft d;
  const SceneObject target = make_object(rng, static_cast<Shape>(slot), random_colour(rng), SizeClass::kTiny);
  d.objects.push_back(target);
  fill(d, rng, SizeClass::kTiny, n_tiny(rng),
       [&](const SceneObject& o) { return o.colour != target.colour; });
  fill(d, rng, SizeClass::kLarge, n_large(rng), kAny);
  d.question = std::string("What shape is the tiny ") + info(target.colour).name + " object?";
  d.answer = info(target.shape).name;
  return d;
}

Draft build_tiny_count(Rng& rng, size_t slot) {
  Draft d;
  const int k = static_cast<int>(slot) + 1;
  const Shape shape = random_shape(rng);
  const int n = n_tiny(rng);  // drawn before and independently of k's objects: the tiny total carries no hint
  fill(d, rng, SizeClass::kTiny, k, [&](const SceneObject& o) { return o.shape == shape; });
  fill(d, rng, SizeClass::kTiny, n, [&](const SceneObject& o) { return o.shape != shape; });
  fill(d, rng, SizeClass::kLarge, n_large(rng), kAny);
  d.question = std::string("How many tiny ") + info(shape).plural + " are there?";
  d.answer = std::to_string(k);
  return d;
}

Draft build_text(Rng& rng, size_t slot) {
  Draft d;
  const int n_texts = rng.uniform_int(1, 2);
  add_texts(d, rng, n_texts, kHrMinTextLength + static_cast<int>(slot));
  fill(d, rng, SizeClass::kLarge, n_large(rng), kAny);
  fill(d, rng, SizeClass::kTiny, n_tiny(rng), kAny);
  d.question = n_texts == 1 ? "What does the text say?" : "What does the " + d.texts[0].color + " text say?";
  d.answer = d.texts[0].text;
  return d;
}

}  // namespace

const std::vector<FamilyInfo>& hr_family_table() {
  static const std::vector<FamilyInfo> t{
      {"large_color", colour_table().size(), build_large_color},
      {"large_shape", shape_table().size(), build_large_shape},
      {"large_count", 4, build_large_count},
      {"tiny_color", colour_table().size(), build_tiny_color},
      {"tiny_shape", shape_table().size(), build_tiny_shape},
      {"tiny_count", 4, build_tiny_count},
      {"text", static_cast<size_t>(kHrMaxTextLength - kHrMinTextLength + 1), build_text},
  };
  return t;
}

void add_hr_distractor_texts(Draft& draft, Rng& rng) { add_texts(draft, rng, rng.uniform_int(0, 2), 0); }

}  // namespace vispco::eval::synthvqa
