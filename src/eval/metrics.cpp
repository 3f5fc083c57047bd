// Answer normalisation and VQA metrics (official VQA v2 evaluation, vqaEval.py, simplified punctuation).
#include "eval/metrics.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

namespace vispco::eval {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Word → replacement (articles → "", number words → digits, yes/no variants).
const std::map<std::string, std::string>& word_map() {
  static const std::map<std::string, std::string> m{
      {"a", ""},         {"an", ""},          {"the", ""},        {"none", "0"},      {"zero", "0"},
      {"one", "1"},      {"two", "2"},        {"three", "3"},     {"four", "4"},      {"five", "5"},
      {"six", "6"},      {"seven", "7"},      {"eight", "8"},     {"nine", "9"},      {"ten", "10"},
      {"eleven", "11"},  {"twelve", "12"},    {"thirteen", "13"}, {"fourteen", "14"}, {"fifteen", "15"},
      {"sixteen", "16"}, {"seventeen", "17"}, {"eighteen", "18"}, {"nineteen", "19"}, {"twenty", "20"},
      {"yeah", "yes"},   {"yep", "yes"},      {"yup", "yes"},     {"nope", "no"},     {"nah", "no"},
  };
  return m;
}

}  // namespace

std::string normalize_answer(std::string_view text) {
  std::string spaced;
  spaced.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool between_digits =
        i > 0 && i + 1 < text.size() && is_digit(text[i - 1]) && is_digit(text[i + 1]);
    if (std::isalnum(static_cast<unsigned char>(c)))
      spaced += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (c == '\'' || (c == ',' && between_digits))
      continue;
    else if (c == '.' && between_digits)
      spaced += '.';
    else if (static_cast<unsigned char>(c) >= 0x80)
      spaced += c;  // UTF-8 bytes pass unchanged
    else
      spaced += ' ';
  }
  std::istringstream words(spaced);
  std::string word, out;
  while (words >> word) {
    const auto it = word_map().find(word);
    if (it != word_map().end()) word = it->second;
    if (word.empty()) continue;
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

std::string yes_no_of(std::string_view text) {
  const std::string norm = normalize_answer(text);
  const std::string first = norm.substr(0, norm.find(' '));
  return first == "yes" || first == "no" ? first : "";
}

double vqa_soft_accuracy(std::string_view prediction, const std::vector<std::string>& answers) {
  if (answers.empty()) return 0.0;
  const std::string pred = normalize_answer(prediction);
  size_t n_match = 0;
  for (const std::string& a : answers) n_match += normalize_answer(a) == pred ? 1 : 0;
  if (answers.size() == 1) return static_cast<double>(n_match);
  // Leaving out a matching answer leaves n_match − 1 matches; leaving out another leaves n_match.
  double sum = 0.0;
  for (const std::string& a : answers) {
    const size_t others = normalize_answer(a) == pred ? n_match - 1 : n_match;
    sum += std::min(1.0, static_cast<double>(others) / 3.0);
  }
  return sum / static_cast<double>(answers.size());
}

double char_accuracy(std::string_view prediction, std::string_view answer) {
  const auto squeeze = [](std::string_view t) {
    std::string n = normalize_answer(t);
    n.erase(std::remove(n.begin(), n.end(), ' '), n.end());
    return n;
  };
  const std::string p = squeeze(prediction), r = squeeze(answer);
  if (r.empty()) return p.empty() ? 1.0 : 0.0;
  std::vector<size_t> row(p.size() + 1), next(p.size() + 1);  // Levenshtein, one row at a time
  for (size_t j = 0; j <= p.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= r.size(); ++i) {
    next[0] = i;
    for (size_t j = 1; j <= p.size(); ++j)
      next[j] = std::min({row[j] + 1, next[j - 1] + 1, row[j - 1] + (r[i - 1] == p[j - 1] ? 0 : 1)});
    std::swap(row, next);
  }
  return std::max(0.0, 1.0 - static_cast<double>(row[p.size()]) / static_cast<double>(r.size()));
}

SampleScore score_answer(std::string_view prediction, std::string_view answer,
                         const std::vector<std::string>& answers) {
  SampleScore s;
  const std::string ref = normalize_answer(answer);
  s.exact = normalize_answer(prediction) == ref ? 1.0 : 0.0;
  s.chars = char_accuracy(prediction, answer);
  if (!answers.empty()) s.vqa = vqa_soft_accuracy(prediction, answers);
  s.is_yes_no = ref == "yes" || ref == "no";
  s.yes_no_correct = s.is_yes_no && yes_no_of(prediction) == ref;
  return s;
}

void MetricTotals::add(const SampleScore& s) {
  ++n;
  score_sum += s.score();
  exact_sum += s.exact;
  chars_sum += s.chars;
  if (s.vqa >= 0.0) ++n_vqa, vqa_sum += s.vqa;
  if (s.is_yes_no) ++n_yes_no, yes_no_correct += s.yes_no_correct ? 1 : 0;
}

double MetricTotals::accuracy() const { return n ? score_sum / static_cast<double>(n) : 0.0; }
double MetricTotals::exact_match() const { return n ? exact_sum / static_cast<double>(n) : 0.0; }
double MetricTotals::char_accuracy() const { return n ? chars_sum / static_cast<double>(n) : 0.0; }
double MetricTotals::vqa_accuracy() const { return n_vqa ? vqa_sum / static_cast<double>(n_vqa) : 0.0; }
double MetricTotals::yes_no_accuracy() const {
  return n_yes_no ? static_cast<double>(yes_no_correct) / static_cast<double>(n_yes_no) : 0.0;
}

nlohmann::json MetricTotals::to_json() const {
  nlohmann::json j{
      {"n", n}, {"accuracy", accuracy()}, {"exact_match", exact_match()}, {"char_accuracy", char_accuracy()}};
  if (n_vqa) j["n_vqa"] = n_vqa, j["vqa_accuracy"] = vqa_accuracy();
  if (n_yes_no) j["n_yes_no"] = n_yes_no, j["yes_no_accuracy"] = yes_no_accuracy();
  return j;
}

void MetricSummary::add(const std::string& family, const SampleScore& s) {
  overall.add(s);
  per_family[family].add(s);
}

nlohmann::json MetricSummary::to_json() const {
  nlohmann::json fam = nlohmann::json::object();
  for (const auto& [name, t] : per_family) fam[name] = t.to_json();
  return {{"overall", overall.to_json()}, {"per_family", fam}};
}

std::string MetricSummary::to_markdown() const {
  std::string md =
      "| family | n | accuracy | exact match | char acc. | VQA acc. | yes/no acc. |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n";
  const auto row = [&](const std::string& name, const MetricTotals& t) {
    char buf[256];
    const auto pct = [](bool applies, double v) {
      char b[32] = "–";
      if (applies) std::snprintf(b, sizeof b, "%.1f", 100.0 * v);
      return std::string(b);
    };
    std::snprintf(buf, sizeof buf, "| %s | %zu | %.1f | %.1f | %.1f | %s | %s |\n", name.c_str(), t.n,
                  100.0 * t.accuracy(), 100.0 * t.exact_match(), 100.0 * t.char_accuracy(),
                  pct(t.n_vqa > 0, t.vqa_accuracy()).c_str(),
                  pct(t.n_yes_no > 0, t.yes_no_accuracy()).c_str());
    md += buf;
  };
  for (const auto& [name, t] : per_family) row(name, t);
  row("all", overall);
  return md;
}

}  // namespace vispco::eval
