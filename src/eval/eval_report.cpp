// Output of an evaluation: summary JSON and Markdown of an EvalReport, and the files of `vispco eval --out`
// (predictions.jsonl, summary.json, summary.md).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "core/text_file.h"
#include "eval/evaluator.h"

namespace vispco::eval {
namespace {

namespace fs = std::filesystem;

// Model output may hold invalid UTF-8 (a byte-fallback token cut in half): write U+FFFD instead of throwing.
constexpr auto kReplace = nlohmann::json::error_handler_t::replace;

nlohmann::json row_json(const EvalRow& r) {
  nlohmann::json j = {{"id", r.id},
                      {"family", r.family},
                      {"question", r.question},
                      {"answer", r.answer},
                      {"prediction", r.result.prediction},
                      {"correct", r.result.correct},
                      {"score", r.result.score},
                      {"exact", r.score.exact},
                      {"chars", r.score.chars},
                      {"prefill_ms", r.result.prefill_ms},
                      {"decode_ms", r.result.decode_ms},
                      {"total_ms", r.result.total_ms},
                      {"from_store", r.from_store}};
  if (r.score.vqa >= 0) j["vqa"] = r.score.vqa;
  if (!r.image_of.empty()) j["image_of"] = r.image_of;
  for (const char* k : {"ttft_ms", "n_visual", "n_visual_kept", "n_text", "n_generated"})
    if (r.result.extra.contains(k)) j[k] = r.result.extra[k];
  return j;
}

}  // namespace

nlohmann::json EvalReport::to_json() const {
  return {{"run",
           {{"model_hash", key.model_hash},
            {"dataset_hash", key.dataset_hash},
            {"plan", key.plan},
            {"decoding", key.decoding},
            {"store", store_path}}},
          {"counts",
           {{"n_dataset", n_dataset},
            {"n_selected", n_selected},
            {"n_evaluated", n_evaluated},
            {"n_from_store", n_from_store},
            {"n_skipped", n_skipped},
            {"n_scored", rows.size()}}},
          {"metrics", metrics.to_json()},
          {"answer_prior", answer_prior},
          {"timing",
           {{"mean_prefill_ms", mean_prefill_ms},
            {"mean_decode_ms", mean_decode_ms},
            {"mean_ttft_ms", mean_ttft_ms},
            {"mean_n_visual", mean_n_visual},
            {"mean_n_visual_kept", mean_n_visual_kept},
            {"wall_s", wall_s},
            {"samples_per_s", samples_per_s}}},
          {"warnings", warnings}};
}

std::string EvalReport::to_markdown() const {
  std::string md = "# vispco eval\n\n";
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "- model: `%s`\n- dataset: `%s`\n- plan: `%s`\n- decoding: `%s`\n- samples: %zu scored of %zu "
      "selected (%zu evaluated now, %zu from the store, %zu skipped) out of %zu\n",
      key.model_hash.c_str(), key.dataset_hash.c_str(), key.plan.c_str(), key.decoding.c_str(), rows.size(),
      n_selected, n_evaluated, n_from_store, n_skipped, n_dataset);
  md += buf;
  std::snprintf(buf, sizeof buf,
                "- per sample: prefill %.2f ms, decode %.2f ms (shares of their batch), TTFT %.2f ms (batch "
                "latency), N_v "
                "%.1f, kept %.1f\n"
                "- this run: %.2f s, %.2f samples/s\n\n",
                mean_prefill_ms, mean_decode_ms, mean_ttft_ms, mean_n_visual, mean_n_visual_kept, wall_s,
                samples_per_s);
  md += buf;
  md += metrics.to_markdown();
  if (!answer_prior.empty()) {
    md += "\nAnswer prior (always the family's most frequent answer): ";
    for (const auto& [family, p] : answer_prior)
      if (family != "all") {
        std::snprintf(buf, sizeof buf, "%s %.1f, ", family.c_str(), 100.0 * p);
        md += buf;
      }
    std::snprintf(buf, sizeof buf, "all %.1f %%\n", 100.0 * answer_prior.at("all"));
    md += buf;
  }
  for (const std::string& w : warnings) md += "\n> warning: " + w;
  if (!warnings.empty()) md += "\n";
  return md;
}

void write_eval_outputs(const EvalReport& report, const EvalOptions& options, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("eval: cannot create output folder '" + dir + "': " + ec.message());
  std::string lines;
  for (const EvalRow& r : report.rows) lines += row_json(r).dump(-1, ' ', false, kReplace) + "\n";
  write_text_atomically((fs::path(dir) / "predictions.jsonl").string(), lines);
  nlohmann::json summary = report.to_json();
  summary["options"] = to_json(options);
  write_text_atomically((fs::path(dir) / "summary.json").string(),
                        summary.dump(2, ' ', false, kReplace) + "\n");
  write_text_atomically((fs::path(dir) / "summary.md").string(), report.to_markdown());
}

}  // namespace vispco::eval
