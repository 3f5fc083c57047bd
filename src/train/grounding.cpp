// Word-level grounding supervision (see grounding.h).
#include "train/grounding.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "core/errors.h"
#include "eval/synthvqa/scene.h"
#include "train/patch_labels.h"

namespace vispco::train {

namespace {

const std::vector<std::string>& object_words() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> w;
    for (const auto& c : eval::synthvqa::colour_table()) w.emplace_back(c.name);
    for (const auto& s : eval::synthvqa::shape_table()) {
      w.emplace_back(s.name);
      w.emplace_back(s.plural);
    }
    return w;
  }();
  return words;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

}  // namespace

std::vector<int64_t> object_word_ends(const io::Tokenizer& tok, const std::vector<int64_t>& ids, size_t begin,
                                      size_t end) {
  if (begin > end || end > ids.size())
    throw InvalidArgument("object_word_ends: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                          ") outside " + std::to_string(ids.size()) + " ids");
  std::vector<int64_t> text;  // text ids of [begin, end) and, for each, its index in ids
  std::vector<size_t> where;
  for (size_t i = begin; i < end; ++i)
    if (ids[i] >= 0 && ids[i] < tok.vocab_size()) {
      text.push_back(ids[i]);
      where.push_back(i);
    }
  // Characters of the decoded text covered by the first j + 1 tokens (a piece may hold a word and the
  // punctuation after it, e.g. "▁star?").
  const std::string full = tok.decode(text);
  std::vector<size_t> covered(text.size());
  for (size_t j = 0; j < text.size(); ++j)
    covered[j] = tok.decode(std::vector<int64_t>(text.begin(), text.begin() + j + 1)).size();
  std::vector<int64_t> out;
  for (size_t a = 0; a < full.size();) {
    if (!is_word_char(full[a])) {
      ++a;
      continue;
    }
    size_t b = a;
    while (b < full.size() && is_word_char(full[b])) ++b;
    const std::string word = full.substr(a, b - a);
    if (std::find(object_words().begin(), object_words().end(), word) != object_words().end()) {
      // The token in which the word's last character lies.
      const auto j =
          static_cast<size_t>(std::lower_bound(covered.begin(), covered.end(), b) - covered.begin());
      if (j < text.size() && (out.empty() || out.back() != static_cast<int64_t>(where[j])))
        out.push_back(static_cast<int64_t>(where[j]));
    }
    a = b;
  }
  return out;
}

AttentionRowRecorder::AttentionRowRecorder(std::set<int64_t> layers, at::Tensor rows)
    : layers_(std::move(layers)), rows_(std::move(rows)) {}

bool AttentionRowRecorder::acts_before(int64_t layer) const {
  return layers_.count(layer - 1) > 0 || (hidden_after_ >= 0 && layer == hidden_after_ + 1) ||
         (input_of_ >= 0 && layer == input_of_);
}

at::Tensor AttentionRowRecorder::attention_rows(int64_t layer, const TokenState&) {
  return layers_.count(layer) > 0 ? rows_ : at::Tensor();
}

bool AttentionRowRecorder::apply(int64_t layer, TokenState& state, const LayerSignals& signals) {
  if (signals.attn_rows.defined()) recorded_.push_back(signals.attn_rows);
  if (hidden_after_ >= 0 && layer == hidden_after_ + 1) {
    const auto idx = rows_.to(state.hidden.device()).unsqueeze(-1).expand({-1, -1, state.hidden.size(2)});
    hidden_ = state.hidden.gather(1, idx);  // [B, R, D]
  }
  if (input_of_ >= 0 && layer == input_of_) input_ = state.hidden;
  return false;
}

bool AnswerGrounding::empty() const {
  if (sink || !glyphs.empty()) return false;
  for (const auto& h : heads)
    for (const auto& o : h)
      if (!o.empty()) return false;
  return true;
}

AnswerGrounding answer_grounding_of(const QaPair& q, const eval::synthvqa::Scene& scene, int64_t grid,
                                    const AnswerGroundingOptions& options) {
  const bool count_centres = options.count_centres;
  AnswerGrounding g;
  const auto patches = [&](int o) { return object_patches(scene, static_cast<size_t>(o), grid); };
  const auto counted = [&](int o) {
    return count_centres ? std::vector<int64_t>{object_centre_patch(scene, static_cast<size_t>(o), grid)}
                         : patches(o);
  };
  const auto& f = q.family;
  if (f == "color" || f == "shape") {
    if (q.objects.size() == 1) g.heads = {{patches(q.objects[0])}};
  } else if (f == "count_shape" || f == "count_color" || f.rfind("exist", 0) == 0) {
    const bool count = f.rfind("count", 0) == 0;
    g.heads.emplace_back();
    for (int o : q.objects) g.heads[0].push_back(count && options.count_footprints ? patches(o) : counted(o));
    g.sink = !(count && options.count_footprints);
    if (f.rfind("count", 0) == 0) g.readout[2] = float(q.objects.size()) / 6.0f;
  } else if (f == "spatial" || f == "size") {
    if (q.objects.size() == 2) g.heads = {{patches(q.objects[0])}, {patches(q.objects[1])}};
    if (f == "spatial" && q.objects.size() == 2) {
      const auto &a = scene.objects.at(static_cast<size_t>(q.objects[0])),
                 &b = scene.objects.at(static_cast<size_t>(q.objects[1]));
      g.readout[0] = float((a.x - b.x) / double(eval::synthvqa::kImageSize));
      g.readout[1] = float((a.y - b.y) / double(eval::synthvqa::kImageSize));
    }
  } else if (f == "text" && options.text_glyphs) {
    for (size_t i = 0; i < scene.texts.size(); ++i)
      if (scene.texts[i].text == q.answer) {
        g.glyphs = glyph_patches(scene, i, grid);
        break;
      }
  }
  return g;
}

}  // namespace vispco::train
