// Result store: per-sample evaluation outputs in SQLite, keyed by (model hash, dataset hash, pruning plan,
// decoding settings), so interrupted or repeated evaluations and searches resume without recomputing.
// Each sample is committed in its own transaction as it finishes (WAL journal, synchronous=NORMAL): a
// process killed at any point (SIGINT, SIGKILL) loses at most the sample in flight and never leaves a
// partial or duplicate row. Generic: it knows nothing of models or datasets beyond the key strings.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

struct sqlite3;

namespace vispco::eval {

/// Identifies one evaluation configuration. Strings are opaque to the store; by convention the hashes are
/// "sha256:<hex>" and plan/decoding are canonical one-line strings (e.g. compact JSON with sorted keys),
/// since a different spelling of the same setting is a different run.
struct RunKey {
  std::string model_hash;
  std::string dataset_hash;
  std::string plan;      ///< pruning plan ("" or "none" for unpruned)
  std::string decoding;  ///< decoding settings (greedy, max new tokens, prompt template, …)

  bool operator==(const RunKey& o) const = default;
  /// "model=… dataset=… plan=… decoding=…" for messages.
  std::string to_string() const;
};

/// The output of one sample under one run.
struct SampleResult {
  std::string sample_id;   ///< the dataset's sample id
  std::string prediction;  ///< generated answer text
  double score = 0.0;      ///< headline score in [0, 1] (metrics.h SampleScore::score())
  bool correct = false;    ///< exact match after normalisation
  double prefill_ms = 0.0, decode_ms = 0.0, total_ms = 0.0;  ///< wall times, milliseconds
  /// Anything else (tokens kept, FLOPs, per-metric scores), stored as compact JSON; must be an object.
  nlohmann::json extra = nlohmann::json::object();

  bool operator==(const SampleResult& o) const = default;
};

/// A SQLite file of runs and their per-sample results (tables `runs`, `results`; schema version 1).
/// One object may be shared by threads (calls are serialised); several processes may open the same file
/// (busy timeout 10 s).
class ResultStore {
 public:
  /// Opens or creates the database at `path` (its folder must exist) and its schema.
  /// @throws IoError naming the path and SQLite's message.
  explicit ResultStore(const std::string& path);
  ~ResultStore();
  ResultStore(const ResultStore&) = delete;
  ResultStore& operator=(const ResultStore&) = delete;

  const std::string& path() const { return path_; }

  /// The run's row id, created on first use.
  int64_t run_id(const RunKey& key);
  /// Commits one result in its own transaction. @return true when inserted, false when (run, sample_id)
  /// already existed — the stored row is left unchanged. @throws IoError, InvalidArgument (empty id).
  bool put(const RunKey& key, const SampleResult& result);
  /// Commits several results in one transaction (all or none). @return how many were new.
  size_t put_many(const RunKey& key, const std::vector<SampleResult>& results);
  /// Sample ids already stored for the run (empty for an unknown run; does not create it).
  std::set<std::string> done_ids(const RunKey& key);
  /// The run's results in insertion order.
  std::vector<SampleResult> results(const RunKey& key);
  /// Number of stored results of the run.
  size_t count(const RunKey& key);
  /// Every run in the file, oldest first.
  std::vector<RunKey> runs();

 private:
  int64_t find_run(const RunKey& key);  // −1 when absent; caller holds mutex_
  bool insert(int64_t run, const SampleResult& r);
  void exec(const char* sql);

  std::string path_;
  sqlite3* db_ = nullptr;
  std::mutex mutex_;
  std::map<std::string, int64_t> run_ids_;  // cache: key string → id
};

}  // namespace vispco::eval
