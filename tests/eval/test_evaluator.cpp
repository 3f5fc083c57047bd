// Evaluator tests on the tiny random model and a hand-made dataset whose scores are known in advance:
// metrics overall and per family, batch size does not change predictions, shards partition the dataset,
// re-runs read the store, output files, option validation, the model-folder hash.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/errors.h"
#include "eval/eval_fixture.h"
#include "eval/evaluator.h"
#include "eval/run_key.h"

namespace vispco::eval {
namespace {

namespace fs = std::filesystem;
using testing::known_dataset;
using testing::KnownDataset;
using testing::TempDir;

VisionLanguageModel& tiny() {
  static auto m = VisionLanguageModel::load(testing::tiny_model_dir(), RunContext{});
  return m;
}
const std::string& tiny_hash() {
  static const std::string h = model_folder_hash(testing::tiny_model_dir());
  return h;
}
const Dataset& known() {
  static const Dataset ds = load_dataset(known_dataset().dir.string());
  return ds;
}

std::vector<std::string> predictions_of(const EvalReport& r) {
  std::vector<std::string> p;
  for (const auto& row : r.rows) p.push_back(row.result.prediction);
  return p;
}

TEST(EvalEvaluator, ReportsTheKnownScoresOverallAndPerFamily) {
  const KnownDataset& kd = known_dataset();
  for (int i = 1; i < KnownDataset::kN; i += 2)
    ASSERT_NE(normalize_answer(kd.predictions[i]), normalize_answer(KnownDataset::kWrong));
  EvalOptions o;
  const EvalReport r = evaluate(tiny(), tiny_hash(), known(), o);
  ASSERT_EQ(r.rows.size(), 8u);
  EXPECT_EQ(r.n_evaluated, 8u);
  EXPECT_EQ(r.n_from_store, 0u);
  EXPECT_EQ(predictions_of(r), kd.predictions) << "evaluator vs direct generate()";
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r.rows[i].id, kd.ids[i]);
    EXPECT_EQ(r.rows[i].result.correct, i % 2 == 0) << i;
  }
  // By hand: exact matches 0, 2, 4, 6 → 4/8; sample 7's VQA soft accuracy is 0.6 (2 of 10 humans agree).
  const auto& all = r.metrics.overall;
  EXPECT_EQ(all.n, 8u);
  EXPECT_DOUBLE_EQ(all.exact_match(), 0.5);
  EXPECT_NEAR(all.accuracy(), (4 + 0.6) / 8, 1e-12);
  EXPECT_EQ(all.n_vqa, 1u);
  EXPECT_NEAR(all.vqa_accuracy(), 0.6, 1e-12);
  const auto& colour = r.metrics.per_family.at("colour");
  EXPECT_EQ(colour.n, 5u);
  EXPECT_DOUBLE_EQ(colour.accuracy(), 3.0 / 5);
  const auto& count = r.metrics.per_family.at("count");
  EXPECT_EQ(count.n, 3u);
  EXPECT_DOUBLE_EQ(count.exact_match(), 1.0 / 3);
  EXPECT_NEAR(count.accuracy(), (1 + 0.6) / 3, 1e-12);
  // Stats: the tiny model has N_v = 16 and nothing is pruned.
  EXPECT_DOUBLE_EQ(r.mean_n_visual, 16.0);
  EXPECT_DOUBLE_EQ(r.mean_n_visual_kept, 16.0);
  EXPECT_GT(r.mean_prefill_ms, 0.0);
  EXPECT_GE(r.mean_ttft_ms, r.mean_prefill_ms);
  EXPECT_GT(r.samples_per_s, 0.0);
  EXPECT_EQ(r.key.plan, "none");
  EXPECT_EQ(r.key.dataset_hash, known().hash);
}

TEST(EvalEvaluator, BatchSizeDoesNotChangePredictions) {
  EvalOptions o;
  o.batch_size = 3;  // batches of 3, 3, 2 with different prompt lengths (left padding)
  const EvalReport r3 = evaluate(tiny(), tiny_hash(), known(), o);
  EXPECT_EQ(predictions_of(r3), known_dataset().predictions);
  EXPECT_EQ(r3.metrics.to_json(), evaluate(tiny(), tiny_hash(), known(), EvalOptions{}).metrics.to_json());
  EXPECT_EQ(r3.rows[0].result.extra.at("batch"), 3);
  EXPECT_EQ(r3.rows[7].result.extra.at("batch"), 2);
}

TEST(EvalEvaluator, ShardsPartitionTheSelectionAndShareOneStore) {
  TempDir tmp;
  EvalOptions o;
  o.store_path = tmp.str("store/r.sqlite");  // folder created by evaluate
  o.shard_count = 2;
  std::vector<std::string> seen;
  for (size_t i : {0, 1}) {
    o.shard_index = i;
    const EvalReport r = evaluate(tiny(), tiny_hash(), known(), o);
    EXPECT_EQ(r.n_selected, 4u);
    for (const auto& row : r.rows) {
      EXPECT_EQ(std::stoi(row.id.substr(1)) % 2, static_cast<int>(i)) << row.id;
      seen.push_back(row.id);
    }
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, known_dataset().ids) << "union is everything, no overlap";
  // The full run finds every sample in the store.
  const EvalReport full = evaluate(tiny(), tiny_hash(), known(), EvalOptions{.store_path = o.store_path});
  EXPECT_EQ(full.n_evaluated, 0u);
  EXPECT_EQ(full.n_from_store, 8u);
  EXPECT_EQ(predictions_of(full), known_dataset().predictions);
  // limit applies before shard: the first 5 samples, shard 1/2 → q1, q3.
  const EvalReport lim =
      evaluate(tiny(), tiny_hash(), known(), EvalOptions{.limit = 5, .shard_index = 1, .shard_count = 2});
  ASSERT_EQ(lim.rows.size(), 2u);
  EXPECT_EQ(lim.rows[0].id, "q1");
  EXPECT_EQ(lim.rows[1].id, "q3");
}

TEST(EvalEvaluator, RerunReadsTheStoreAndGivesTheSameSummaryAndFiles) {
  TempDir tmp;
  EvalOptions o;
  o.store_path = tmp.str("r.sqlite");
  o.out_dir = tmp.str("out");
  o.batch_size = 2;
  const EvalReport first = evaluate(tiny(), tiny_hash(), known(), o);
  EXPECT_EQ(first.n_evaluated, 8u);
  EXPECT_EQ(ResultStore(o.store_path).count(first.key), 8u);
  const std::string first_md = testing::read_file(tmp.path() / "out/summary.md");
  const EvalReport again = evaluate(tiny(), tiny_hash(), known(), o);
  EXPECT_EQ(again.n_evaluated, 0u);
  EXPECT_EQ(again.n_from_store, 8u);
  EXPECT_EQ(again.key, first.key);
  EXPECT_EQ(again.metrics.to_json(), first.metrics.to_json());
  EXPECT_DOUBLE_EQ(again.mean_prefill_ms, first.mean_prefill_ms) << "timings come from the store";
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(again.rows[i].result, first.rows[i].result);
    EXPECT_TRUE(again.rows[i].from_store);
  }
  EXPECT_EQ(ResultStore(o.store_path).count(first.key), 8u) << "no duplicates";
  // Files: one jsonl line per sample with the documented fields, summary.json = report + options.
  std::ifstream in(tmp.path() / "out/predictions.jsonl");
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("id"), known_dataset().ids[n]);
    EXPECT_EQ(j.at("prediction"), known_dataset().predictions[n]);
    EXPECT_EQ(j.at("correct"), n % 2 == 0);
    for (const char* k : {"family", "question", "answer", "score", "prefill_ms", "ttft_ms", "n_visual_kept"})
      EXPECT_TRUE(j.contains(k)) << k;
    ++n;
  }
  EXPECT_EQ(n, 8u);
  const auto summary = nlohmann::json::parse(testing::read_file(tmp.path() / "out/summary.json"));
  EXPECT_EQ(summary.at("metrics"), first.metrics.to_json());
  EXPECT_EQ(summary.at("counts").at("n_from_store"), 8);
  EXPECT_EQ(eval_options_from_json(summary.at("options")), o);
  EXPECT_NE(first_md.find("| colour | 5 | 60.0 |"), std::string::npos) << first_md;
  EXPECT_NE(first_md.find("| all | 8 | 57.5 | 50.0 |"), std::string::npos) << first_md;
}

TEST(EvalEvaluator, OptionsValidateAndRoundTrip) {
  EvalOptions o;
  EXPECT_NO_THROW(o.validate());
  EXPECT_EQ(o.generation.max_new_tokens, 8);
  EXPECT_THROW((EvalOptions{.shard_index = 2, .shard_count = 2}.validate()), InvalidArgument);
  EXPECT_THROW((EvalOptions{.shard_count = 0}.validate()), InvalidArgument);
  EXPECT_THROW((EvalOptions{.batch_size = 0}.validate()), InvalidArgument);
  EvalOptions sampled;
  sampled.generation.temperature = 0.7;
  EXPECT_THROW(sampled.validate(), InvalidArgument);
  EvalOptions custom{.limit = 3, .shard_index = 1, .shard_count = 4, .batch_size = 5};
  custom.plan = "x";
  custom.on_missing_image = MissingImagePolicy::kSkip;
  custom.progress = ProgressMode::kLines;
  EXPECT_EQ(eval_options_from_json(to_json(custom)), custom);
  EXPECT_THROW(eval_options_from_json({{"batch", 2}}), InvalidArgument);
  // A plan other than "none" needs its hook (and a hook needs a plan name): no silent mixing in the store.
  EXPECT_THROW(evaluate(tiny(), tiny_hash(), known(), EvalOptions{.plan = "fastv"}), InvalidArgument);
}

TEST(EvalEvaluator, UnreadableImageStopsOrIsSkipped) {
  TempDir tmp;
  fs::copy(known_dataset().dir, tmp.path() / "ds", fs::copy_options::recursive);
  const Dataset ds = load_dataset(tmp.str("ds"));  // images exist at load time
  testing::write_file(tmp.path() / "ds/images/2.png", "not a png");
  EXPECT_THROW(evaluate(tiny(), tiny_hash(), ds, EvalOptions{.limit = 4}), FormatError);
  const EvalReport r = evaluate(tiny(), tiny_hash(), ds,
                                EvalOptions{.limit = 4, .on_missing_image = MissingImagePolicy::kSkip});
  EXPECT_EQ(r.n_skipped, 1u);
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[2].id, "q3");
  EXPECT_EQ(r.warnings.size(), 1u);
}

TEST(EvalRunKey, ModelHashIsStableAndSeesWeightsConfigAndTokenizer) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  fs::copy(testing::tiny_model_dir(), dir);
  const std::string h0 = model_folder_hash(dir.string());
  EXPECT_EQ(h0, tiny_hash());
  EXPECT_EQ(h0.rfind("sha256:", 0), 0u);
  // Flip the last byte of the file: the last tensor's data (its final 256 bytes are hashed).
  const fs::path st = dir / "model.safetensors";
  std::string bytes = testing::read_file(st);
  bytes.back() ^= 1;
  testing::write_file(st, bytes);
  const std::string h1 = model_folder_hash(dir.string());
  EXPECT_NE(h1, h0);
  testing::write_file(dir / "tokenizer.model", testing::read_file(dir / "tokenizer.model") + "x");
  EXPECT_NE(model_folder_hash(dir.string()), h1);
  EXPECT_THROW(model_folder_hash(tmp.str("absent")), IoError);

  EXPECT_EQ(canonical_plan(""), "none");
  EXPECT_EQ(canonical_plan(" None "), "none");
  EXPECT_EQ(canonical_plan(" fastv:k=2 "), "fastv:k=2");
  const GenerationConfig gc = default_eval_generation();
  EXPECT_EQ(decoding_key(gc, at::kFloat), decoding_key(gc, at::kFloat));
  EXPECT_NE(decoding_key(gc, at::kFloat), decoding_key(gc, at::kBFloat16));
  GenerationConfig longer = gc;
  longer.max_new_tokens = 9;
  EXPECT_NE(decoding_key(longer, at::kFloat), decoding_key(gc, at::kFloat));
  EXPECT_EQ(nlohmann::json::parse(decoding_key(gc, at::kFloat)).at("generation"), to_json(gc));
}

// Issue 45 item 8: results stored for a model folder are found again while nothing changes, and are not
// reused once a tokenizer or preprocessing file changes (they change prompt ids or pixels). The loaded model
// is the same throughout: what is under test is the store key evaluate() gets from model_folder_hash().
TEST(EvalRunKey, AStoreHitBecomesAMissAfterATokenizerOrPreprocessingFileChanges) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "m";
  fs::copy(testing::tiny_model_dir(), dir);
  ASSERT_TRUE(fs::exists(dir / "tokenizer_config.json"));
  const EvalOptions o{.limit = 2, .store_path = tmp.str("r.sqlite")};
  const auto from_store = [&] {
    return evaluate(tiny(), model_folder_hash(dir.string()), known(), o).n_from_store;
  };
  EXPECT_EQ(from_store(), 0u);
  EXPECT_EQ(from_store(), 2u);  // a hit: nothing changed
  // Edited or added: each file of the list is hashed when present.
  for (const char* name :
       {"tokenizer_config.json", "tokenizer.json", "special_tokens_map.json", "added_tokens.json",
        "preprocessor_config.json", "chat_template.jinja", "chat_template.json"}) {
    const fs::path p = dir / name;
    testing::write_file(p, (fs::exists(p) ? testing::read_file(p) : std::string("{}")) + "\n");
    EXPECT_EQ(from_store(), 0u) << name << ": a miss after the edit";
    EXPECT_EQ(from_store(), 2u) << name << ": a hit again under the new key";
  }
  // Files that do not change a prediction leave the key alone.
  testing::write_file(dir / "README.md", "notes");
  EXPECT_EQ(from_store(), 2u);
}

// Issue 45 item 8: the decoding key carries the results version, so bumping kResultsVersion (after a fix that
// changes predictions) makes every stored result a miss.
TEST(EvalRunKey, ABumpedResultsVersionMissesEveryStoredResult) {
  TempDir tmp;
  const EvalOptions o{.store_path = tmp.str("r.sqlite")};
  const EvalReport first = evaluate(tiny(), tiny_hash(), known(), o);
  EXPECT_EQ(first.key.decoding, decoding_key(o.generation, at::kFloat, kResultsVersion));
  EXPECT_EQ(nlohmann::json::parse(first.key.decoding).at("results_version"), kResultsVersion);
  ResultStore store(o.store_path);
  EXPECT_EQ(store.done_ids(first.key).size(), 8u);  // a hit under the current version
  RunKey bumped = first.key;
  bumped.decoding = decoding_key(o.generation, at::kFloat, kResultsVersion + 1);
  EXPECT_NE(bumped.decoding, first.key.decoding);
  EXPECT_TRUE(store.done_ids(bumped).empty());  // a miss under the next one
}

TEST(EvalProgress, LinesModePrintsEveryTenPercentWithRateAndEta) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(40, "eval", ProgressMode::kLines, f);
    for (int i = 0; i < 40; ++i) p.advance();
  }  // destructor finishes
  std::rewind(f);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) text += buf;
  std::fclose(f);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 10) << text;  // 10 %, …, 90 %, then the final line
  EXPECT_NE(text.find("eval 4/40  10%"), std::string::npos) << text;
  EXPECT_NE(text.find("eval 40/40 100%"), std::string::npos) << text;
  EXPECT_NE(text.find("it/s"), std::string::npos);
  EXPECT_NE(text.find("ETA"), std::string::npos);
  EXPECT_THROW(parse_progress_mode("fancy"), InvalidArgument);
}

}  // namespace
}  // namespace vispco::eval
