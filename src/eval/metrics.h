// VQA answer normalisation and metrics: exact match, VQA soft accuracy (min(1, #humans agreeing / 3)
// averaged over the leave-one-out subsets of the human answers, as the official VQA v2 evaluation does),
// yes/no accuracy; totals overall and per family. Reference: VQA v2 `vqaEval.py` (Antol et al. 2015).
#pragma once
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace vispco::eval {

/// Normalises an answer for comparison: ASCII lower case; apostrophes dropped ("isn't" → "isnt"); "," and
/// "." dropped between digits ("1,000" → "1000", "2.5" kept), other punctuation → space; articles
/// (a, an, the) removed; number words zero–twenty and "none" → digits; "yeah"/"yep"/"yup" → "yes",
/// "nope"/"nah" → "no"; whitespace collapsed to single spaces, trimmed.
/// Differs from vqaEval.py in treating every punctuation mark the same way and mapping yes/no variants.
std::string normalize_answer(std::string_view text);

/// "yes" or "no" when the first word of the normalised text is (a variant of) yes or no, else "".
/// "Yes, there is a red circle." → "yes".
std::string yes_no_of(std::string_view text);

/// VQA soft accuracy of a prediction against human answers: for each answer i, min(1, #{j ≠ i : answer j
/// matches} / 3), averaged over i (so with 10 answers: 3 matches → 0.9, 2 → 0.6, 1 → 0.3, ≥ 4 → 1).
/// Matching is after normalize_answer. With a single answer it is exact match. Returns 0 for no answers.
double vqa_soft_accuracy(std::string_view prediction, const std::vector<std::string>& answers);

/// Character accuracy of a prediction: 1 − CER = max(0, 1 − Levenshtein(pred, ref) / |ref|) over the
/// normalize_answer() forms with spaces removed (so "M 8 5" reads as "m85"); 1 when both are empty, 0 when
/// only the reference is. The per-glyph score of text reading (OCR's character error rate, e.g. the ICDAR
/// robust-reading protocol), reported beside whole-string exact match.
double char_accuracy(std::string_view prediction, std::string_view answer);

/// The scores of one prediction.
struct SampleScore {
  /// 1 when the normalised prediction equals the normalised reference answer, else 0.
  double exact = 0.0;
  /// char_accuracy() of the prediction against the reference answer, in [0, 1].
  double chars = 0.0;
  /// VQA soft accuracy in [0, 1] when human answers are given, else −1 (not applicable).
  double vqa = -1.0;
  /// Whether the reference answer is yes/no; then yes_no_correct compares yes_no_of(prediction) to it.
  bool is_yes_no = false;
  bool yes_no_correct = false;
  /// The headline score: vqa when applicable, else exact.
  double score() const { return vqa >= 0.0 ? vqa : exact; }
};

/// Scores a prediction against a sample's reference answer and (possibly empty) human answers.
SampleScore score_answer(std::string_view prediction, std::string_view answer,
                         const std::vector<std::string>& answers);

/// Running sums of SampleScores; means are over the samples each metric applies to.
struct MetricTotals {
  size_t n = 0;          ///< samples
  double score_sum = 0;  ///< Σ score()
  double exact_sum = 0;  ///< Σ exact
  double chars_sum = 0;  ///< Σ chars
  size_t n_vqa = 0;      ///< samples with human answers
  double vqa_sum = 0;    ///< Σ vqa over them
  size_t n_yes_no = 0;   ///< samples with a yes/no reference
  size_t yes_no_correct = 0;

  void add(const SampleScore& s);
  /// Means in [0, 1]; 0 when no sample applies (check the matching count).
  double accuracy() const;
  double exact_match() const;
  double char_accuracy() const;
  double vqa_accuracy() const;
  double yes_no_accuracy() const;
  /// {"n","accuracy","exact_match","char_accuracy"} plus {"n_vqa","vqa_accuracy"} and
  /// {"n_yes_no","yes_no_accuracy"} when they apply.
  nlohmann::json to_json() const;
};

/// Totals overall and per family.
struct MetricSummary {
  MetricTotals overall;
  std::map<std::string, MetricTotals> per_family;

  void add(const std::string& family, const SampleScore& s);
  /// {"overall": MetricTotals, "per_family": {family: MetricTotals}}.
  nlohmann::json to_json() const;
  /// A Markdown table: one row per family, then "all" (columns: n, accuracy, exact match, character
  /// accuracy, VQA accuracy, yes/no accuracy).
  std::string to_markdown() const;
};

}  // namespace vispco::eval
