// Deriving SynthVQA questions from a scene (templates identical to eval/synthvqa/families.cpp).
#include "train/scene_questions.h"

#include <map>
#include <set>

#include "eval/synthvqa/families.h"

namespace vispco::train {

using namespace eval::synthvqa;

namespace {

std::string name(const SceneObject& o) { return std::string(info(o.colour).name) + " " + info(o.shape).name; }

}  // namespace

std::vector<QaPair> all_questions(const Scene& scene) {
  std::vector<QaPair> out;
  std::map<Shape, int> n_shape;
  std::map<Colour, int> n_colour;
  std::map<std::pair<Shape, Colour>, int> n_kind;
  for (const auto& o : scene.objects) {
    ++n_shape[o.shape];
    ++n_colour[o.colour];
    ++n_kind[{o.shape, o.colour}];
  }
  const auto objects_where = [&](auto&& pred) {
    std::vector<int> idx;
    for (size_t i = 0; i < scene.objects.size(); ++i)
      if (pred(scene.objects[i])) idx.push_back(static_cast<int>(i));
    return idx;
  };
  for (size_t i = 0; i < scene.objects.size(); ++i) {
    const auto& o = scene.objects[i];
    const std::vector<int> self = {static_cast<int>(i)};
    if (n_shape[o.shape] == 1)
      out.push_back(
          {"color", std::string("What color is the ") + info(o.shape).name + "?", info(o.colour).name, self});
    if (n_colour[o.colour] == 1)
      out.push_back({"shape", std::string("What shape is the ") + info(o.colour).name + " object?",
                     info(o.shape).name, self});
  }
  for (const auto& [s, n] : n_shape)
    out.push_back({"count_shape", std::string("How many ") + info(s).plural + " are there?",
                   std::to_string(n), objects_where([s = s](const SceneObject& o) { return o.shape == s; })});
  for (const auto& [c, n] : n_colour)
    out.push_back({"count_color", std::string("How many ") + info(c).name + " objects are there?",
                   std::to_string(n),
                   objects_where([c = c](const SceneObject& o) { return o.colour == c; })});
  for (const auto& [kind, n] : n_kind)
    out.push_back(
        {"exist",
         "Is there a " + std::string(info(kind.second).name) + " " + info(kind.first).name + " in the image?",
         "yes", objects_where([k = kind](const SceneObject& o) {
           return o.shape == k.first && o.colour == k.second;
         })});
  for (const auto& s : shape_table())
    for (const auto& c : colour_table()) {
      if (n_kind.count({s.shape, c.colour})) continue;
      // POPE-style: absent pairs whose colour and shape both occur are the plausible (hard) negatives.
      const bool adversarial = n_shape.count(s.shape) && n_colour.count(c.colour);
      out.push_back({adversarial ? "exist" : "exist_easy",
                     "Is there a " + std::string(c.name) + " " + s.name + " in the image?", "no"});
    }
  for (size_t i = 0; i < scene.objects.size(); ++i)
    for (size_t j = 0; j < scene.objects.size(); ++j) {
      const auto &a = scene.objects[i], &b = scene.objects[j];
      if (i == j || n_kind[{a.shape, a.colour}] != 1 || n_kind[{b.shape, b.colour}] != 1) continue;
      const auto rel = spatial_relation(a, b);
      const std::vector<int> pair = {static_cast<int>(i), static_cast<int>(j)};
      if (!rel.empty())
        out.push_back(
            {"spatial",
             "Where is the " + name(a) + " relative to the " + name(b) + ": left, right, above, or below?",
             rel, pair});
      if (a.size != b.size)
        out.push_back({"size", "Is the " + name(a) + " bigger or smaller than the " + name(b) + "?",
                       a.size == SizeClass::kLarge ? "bigger" : "smaller", pair});
    }
  for (const auto& t : scene.texts)
    out.push_back(
        {"text",
         scene.texts.size() == 1 ? "What does the text say?" : "What does the " + t.color + " text say?",
         t.text});
  return out;
}

std::vector<QaPair> sample_questions(const Scene& scene, Rng& rng, size_t n,
                                     const std::map<std::string, int64_t>& weights) {
  std::map<std::string, std::vector<QaPair>> by_family;
  for (auto& q : all_questions(scene)) {
    std::string fam = q.family == "exist_easy" ? "exist" : q.family;
    if (q.family == "exist" && q.answer == "no") fam = "exist_no";
    if (q.family == "exist_easy") fam = "exist_no_easy";
    q.family = q.family == "exist_easy" ? "exist" : q.family;
    by_family[fam].push_back(q);
  }
  // Plain negatives only when no adversarial one exists, so "no" questions stay hard.
  if (by_family.count("exist_no") && by_family.count("exist_no_easy")) by_family.erase("exist_no_easy");
  std::vector<std::string> fams;
  for (auto& [f, qs] : by_family) {
    rng.shuffle(qs);
    fams.push_back(f);
  }
  rng.shuffle(fams);
  std::vector<QaPair> out;
  std::map<std::string, size_t> used;
  while (out.size() < n) {
    bool any = false;
    for (const auto& f : fams) {
      auto& qs = by_family[f];
      const auto w = weights.find(qs.empty() ? f : qs.front().family);  // exist_no… count as exist
      for (int64_t k = 0, per_cycle = w == weights.end() ? 1 : w->second; k < per_cycle; ++k)
        if (used[f] < qs.size() && out.size() < n) {
          out.push_back(qs[used[f]++]);
          any = true;
        }
    }
    if (!any) break;
  }
  rng.shuffle(out);
  return out;
}

}  // namespace vispco::train
