// Byte-level BPE pre-tokenizer (see pre_tokenizer.h). Reference: Hugging Face tokenizers 0.21,
// pre_tokenizers/split.rs (SplitDelimiterBehavior), byte_level.rs (GPT-2's regex, add_prefix_space).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/pre_tokenizer.h"

#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace vispco::io {

namespace {

// PCRE2's message for `code`.
std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Unicode's White_Space code points as PCRE2 class items: what \s means in Oniguruma, which Hugging Face
// tokenizers runs its regexes through. PCRE2's \s under PCRE2_UCP also takes U+180E (its \p{Z} / \h / \v
// sets).
constexpr const char* kWhiteSpaceItems =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

}  // namespace

std::string oniguruma_whitespace(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceItems) : "[" + std::string(kWhiteSpaceItems) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceItems) + "]";
      } else if (e == 'S') {
        throw FormatError("pattern '" + pattern + "': \\S inside a character class is not supported");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a literal ']' first
      continue;
    }
    if (c == '[' && in_class && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
      const size_t end = pattern.find(":]", i + 2);
      if (end != std::string::npos) {
        out.append(pattern, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct PreTokenizer::Step {
  enum class Kind { kIsolated, kRemoved, kPrefixSpace };
  Kind kind = Kind::kIsolated;
  std::shared_ptr<pcre2_code> code;  // kIsolated / kRemoved

  // Cuts `piece` at the pattern's matches (non-empty, leftmost, scanning on after each).
  void apply(const std::string& piece, std::vector<std::string>& out) const {
    if (kind == Kind::kPrefixSpace) {
      out.push_back(piece.empty() || piece[0] == ' ' ? piece : ' ' + piece);
      return;
    }
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(code.get(), nullptr), &pcre2_match_data_free);
    if (!md) throw Error("PCRE2 could not allocate match data (out of memory?)");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t at = 0, gap = 0;  // scan position; start of the text not yet emitted
    uint32_t options = PCRE2_NOTEMPTY;
    while (at <= piece.size()) {
      const int rc = pcre2_match(code.get(), subject, piece.size(), at, options, md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21)
          throw InvalidArgument("text is not valid UTF-8; the tokenizer reads UTF-8 only");
        throw Error("pre-tokenizer regex failed: " + pcre2_message(rc));
      }
      options |= PCRE2_NO_UTF_CHECK;  // checked by the first call
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      if (ov[0] > gap) out.push_back(piece.substr(gap, ov[0] - gap));
      if (kind == Kind::kIsolated) out.push_back(piece.substr(ov[0], ov[1] - ov[0]));
      gap = at = ov[1];
    }
    if (gap < piece.size()) out.push_back(piece.substr(gap));
  }
};

namespace {

std::unique_ptr<PreTokenizer::Step> regex_step(const std::string& pattern, bool literal,
                                               PreTokenizer::Step::Kind kind, const std::string& where) {
  const std::string source = literal ? pattern : oniguruma_whitespace(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);  // UCP is refused with LITERAL
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options, &err,
                                   &offset, nullptr);
  if (code == nullptr)
    throw FormatError(where + ": PCRE2 cannot compile the pattern '" + pattern + "' at offset " +
                      std::to_string(offset) + ": " + pcre2_message(err));
  auto step = std::make_unique<PreTokenizer::Step>();
  step->kind = kind;
  step->code = std::shared_ptr<pcre2_code>(code, &pcre2_code_free);
  return step;
}

void add_steps(const nlohmann::json& spec, const std::string& where,
               std::vector<std::unique_ptr<PreTokenizer::Step>>& steps) {
  using Kind = PreTokenizer::Step::Kind;
  if (spec.is_null()) return;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string())
    throw FormatError(where + " must be null or an object with a \"type\"");
  const std::string type = spec["type"];
  if (type == "Sequence") {
    if (!spec.contains("pretokenizers") || !spec["pretokenizers"].is_array())
      throw FormatError(where + ": a Sequence needs a \"pretokenizers\" array");
    for (size_t i = 0; i < spec["pretokenizers"].size(); ++i)
      add_steps(spec["pretokenizers"][i], where + ".pretokenizers[" + std::to_string(i) + "]", steps);
  } else if (type == "Split") {
    const auto& p = spec.value("pattern", nlohmann::json());
    const bool literal = p.is_object() && p.contains("String") && p["String"].is_string();
    if (!literal && !(p.is_object() && p.contains("Regex") && p["Regex"].is_string()))
      throw FormatError(where + ".pattern must be {\"Regex\": …} or {\"String\": …}");
    if (spec.value("invert", false)) throw FormatError(where + ": an inverted Split is not supported");
    const std::string behavior = spec.value("behavior", std::string("?"));
    if (behavior != "Isolated" && behavior != "Removed")
      throw FormatError(where + ": Split behavior '" + behavior +
                        "' is not supported (supported: Isolated, Removed)");
    steps.push_back(regex_step(literal ? p["String"] : p["Regex"], literal,
                               behavior == "Isolated" ? Kind::kIsolated : Kind::kRemoved, where));
  } else if (type == "ByteLevel") {
    // Bytes become BPE symbols in the model (bpe_model.h); here only the optional prefix space and regex.
    if (spec.value("add_prefix_space", false))
      steps.push_back(std::make_unique<PreTokenizer::Step>(PreTokenizer::Step{Kind::kPrefixSpace, nullptr}));
    if (spec.value("use_regex", true))
      steps.push_back(regex_step(PreTokenizer::gpt2_pattern(), false, Kind::kIsolated, where));
  } else {
    throw FormatError(where + ": pre-tokenizer type '" + type +
                      "' is not supported (supported: Sequence, Split, ByteLevel)");
  }
}

}  // namespace

const char* PreTokenizer::gpt2_pattern() {
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
}

PreTokenizer::PreTokenizer(const nlohmann::json& spec, const std::string& where) {
  add_steps(spec, where, steps_);
}
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string> PreTokenizer::split(const std::string& text) const {
  std::vector<std::string> pieces{text}, next;
  for (const auto& step : steps_) {
    next.clear();
    for (const auto& p : pieces) step->apply(p, next);
    pieces.swap(next);
  }
  std::erase_if(pieces, [](const std::string& p) { return p.empty(); });
  return pieces;
}

}  // namespace vispco::io
