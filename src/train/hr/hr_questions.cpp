// SynthVQA-HR questions derived from a scene (templates identical to eval/synthvqa/hr_families.cpp).
#include "train/hr/hr_questions.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <string>

namespace vispco::train {

using namespace eval::synthvqa;

namespace {

constexpr int kMaxCountAnswer = 4;  // hr_family_table(): large_count and tiny_count answer 1–4

// Indices of the objects of size class `size`.
std::vector<int> of_size(const Scene& scene, SizeClass size) {
  std::vector<int> idx;
  for (size_t i = 0; i < scene.objects.size(); ++i)
    if (scene.objects[i].size == size) idx.push_back(static_cast<int>(i));
  return idx;
}

// large_color/tiny_color and large_shape/tiny_shape of one size class.
void attribute_questions(const Scene& scene, SizeClass size, std::vector<QaPair>& colour_qs,
                         std::vector<QaPair>& shape_qs) {
  const auto idx = of_size(scene, size);
  std::map<Shape, int> n_shape;
  std::map<Colour, int> n_colour;
  for (int i : idx) {
    ++n_shape[scene.objects[i].shape];
    ++n_colour[scene.objects[i].colour];
  }
  const std::string prefix = size == SizeClass::kTiny ? "tiny" : "large";
  for (int i : idx) {
    const auto& o = scene.objects[i];
    if (n_shape[o.shape] == 1)
      colour_qs.push_back({prefix + "_color",
                           "What color is the " + prefix + " " + info(o.shape).name + "?",
                           info(o.colour).name,
                           {i}});
    if (n_colour[o.colour] == 1)
      shape_qs.push_back({prefix + "_shape",
                          "What shape is the " + prefix + " " + info(o.colour).name + " object?",
                          info(o.shape).name,
                          {i}});
  }
}

}  // namespace

std::vector<QaPair> hr_all_questions(const Scene& scene) {
  std::vector<QaPair> large_color, large_shape, tiny_color, tiny_shape, large_count, tiny_count, text;
  attribute_questions(scene, SizeClass::kLarge, large_color, large_shape);
  attribute_questions(scene, SizeClass::kTiny, tiny_color, tiny_shape);
  std::map<Colour, std::vector<int>> large_by_colour;
  for (int i : of_size(scene, SizeClass::kLarge)) large_by_colour[scene.objects[i].colour].push_back(i);
  for (const auto& [c, objs] : large_by_colour)
    if (static_cast<int>(objs.size()) <= kMaxCountAnswer)
      large_count.push_back({"large_count",
                             std::string("How many large ") + info(c).name + " objects are there?",
                             std::to_string(objs.size()), objs});
  std::map<Shape, std::vector<int>> tiny_by_shape;
  for (int i : of_size(scene, SizeClass::kTiny)) tiny_by_shape[scene.objects[i].shape].push_back(i);
  for (const auto& [s, objs] : tiny_by_shape)
    if (static_cast<int>(objs.size()) <= kMaxCountAnswer)
      tiny_count.push_back({"tiny_count", std::string("How many tiny ") + info(s).plural + " are there?",
                            std::to_string(objs.size()), objs});
  for (const auto& t : scene.texts)
    text.push_back({"text",
                    scene.texts.size() == 1 ? std::string("What does the text say?")
                                            : "What does the " + t.color + " text say?",
                    t.text,
                    {}});
  std::vector<QaPair> out;
  for (auto* group : {&large_color, &large_shape, &large_count, &tiny_color, &tiny_shape, &tiny_count, &text})
    out.insert(out.end(), group->begin(), group->end());
  return out;
}

std::vector<QaPair> sample_hr_questions(const Scene& scene, Rng& rng, size_t n) {
  std::map<std::string, std::vector<QaPair>> by_family;
  std::vector<std::string> families;  // in hr_all_questions() order
  for (auto& q : hr_all_questions(scene)) {
    if (by_family[q.family].empty()) families.push_back(q.family);
    by_family[q.family].push_back(std::move(q));
  }
  rng.shuffle(families);
  std::vector<QaPair> out;
  while (out.size() < n) {
    bool any = false;
    for (const auto& f : families) {
      auto& qs = by_family[f];
      if (qs.empty() || out.size() >= n) continue;
      const size_t k = rng.index(qs.size());
      out.push_back(std::move(qs[k]));
      qs.erase(qs.begin() + static_cast<long>(k));
      any = true;
    }
    if (!any) break;
  }
  return out;
}

bool names_answer(const std::string& text, const std::string& answer) {
  const auto lower = [](std::string x) {
    for (auto& c : x) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return x;
  };
  const auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  const std::string t = lower(text), a = lower(answer);
  if (a.empty()) return false;
  for (size_t at = t.find(a); at != std::string::npos; at = t.find(a, at + 1)) {
    const bool starts = at == 0 || !is_word(t[at - 1]);
    const bool ends = at + a.size() == t.size() || !is_word(t[at + a.size()]);
    if (starts && ends) return true;
  }
  return false;
}

std::vector<QaPair> hr_conversation(const QaPair& first, const Scene& scene, Rng& rng, size_t turns) {
  std::vector<QaPair> out{first};
  for (auto& q : sample_hr_questions(scene, rng, std::numeric_limits<size_t>::max())) {
    if (out.size() >= turns) break;
    if (q.question == first.question) continue;
    const bool copied = std::any_of(out.begin(), out.end(),
                                    [&](const QaPair& e) { return names_answer(e.question, q.answer); });
    if (!copied) out.push_back(std::move(q));
  }
  return out;
}

}  // namespace vispco::train
