// SynthVQA-HR question families (registry and builders). Every scene holds kHrMinLarge–kHrMaxLarge large
// and kHrMinTiny–kHrMaxTiny tiny objects; a builder places the objects its answer needs first, then fills
// each size class with random objects that keep the question unambiguous. Templates: hr_families.h.
#include "eval/synthvqa/hr_families.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "eval/synthvqa/hr_scene.h"

namespace vispco::eval::synthvqa {
namespace {

using ObjectFilter = std::function<bool(const SceneObject&)>;

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

// The other size class of a scene (large ↔ tiny) and the number of objects of a class a scene holds.
SizeClass other_size(SizeClass size) {
  return size == SizeClass::kTiny ? SizeClass::kLarge : SizeClass::kTiny;
}
int n_of_size(Rng& rng, SizeClass size) { return size == SizeClass::kTiny ? n_tiny(rng) : n_large(rng); }

// A question about `target` (class large or tiny) with its answer: the target, then objects of its class
// accepted by `same_class` (given the draft so far), then the other class at random.
Draft target_draft(Rng& rng, const SceneObject& target,
                   const std::function<bool(const Draft&, const SceneObject&)>& same_class,
                   std::string question, std::string answer) {
  Draft d;
  d.objects.push_back(target);
  fill(d, rng, target.size, n_of_size(rng, target.size),
       [&](const SceneObject& o) { return same_class(d, o); });
  fill(d, rng, other_size(target.size), n_of_size(rng, other_size(target.size)), kAny);
  d.question = std::move(question);
  d.answer = std::move(answer);
  return d;
}

// "What color is the <size> <shape>?": the target's shape is unique in its class; among tiny objects every
// colour is, too (the base view sees tiny dots of distinct colours only).
Draft color_question(Rng& rng, size_t slot, SizeClass size) {
  const SceneObject target = make_object(rng, random_shape(rng), static_cast<Colour>(slot), size);
  const auto unique = [&](const Draft& d, const SceneObject& o) {
    return o.shape != target.shape &&
           (size != SizeClass::kTiny ||
            std::none_of(d.objects.begin(), d.objects.end(),
                         [&](const SceneObject& p) { return p.colour == o.colour; }));
  };
  return target_draft(
      rng, target, unique,
      std::string("What color is the ") + info(size).name + " " + info(target.shape).name + "?",
      info(target.colour).name);
}

// "What shape is the <size> <color> object?": the target's colour is unique in its class.
Draft shape_question(Rng& rng, size_t slot, SizeClass size) {
  const SceneObject target = make_object(rng, static_cast<Shape>(slot), random_colour(rng), size);
  const auto unique = [&](const Draft&, const SceneObject& o) { return o.colour != target.colour; };
  return target_draft(
      rng, target, unique,
      std::string("What shape is the ") + info(size).name + " " + info(target.colour).name + " object?",
      info(target.shape).name);
}

Draft build_large_color(Rng& rng, size_t slot) { return color_question(rng, slot, SizeClass::kLarge); }
Draft build_large_shape(Rng& rng, size_t slot) { return shape_question(rng, slot, SizeClass::kLarge); }

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

Draft build_tiny_color(Rng& rng, size_t slot) { return color_question(rng, slot, SizeClass::kTiny); }
Draft build_tiny_shape(Rng& rng, size_t slot) { return shape_question(rng, slot, SizeClass::kTiny); }

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
  return text_draft(rng, kHrMinTextLength + static_cast<int>(slot), kHrText, [&](Draft& d) {
    fill(d, rng, SizeClass::kLarge, n_large(rng), kAny);
    fill(d, rng, SizeClass::kTiny, n_tiny(rng), kAny);
  });
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

}  // namespace vispco::eval::synthvqa
