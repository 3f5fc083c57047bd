// SQLite result store: schema, WAL setup, one transaction per sample, idempotent inserts via the
// (run_id, sample_id) primary key.
#include "eval/result_store.h"

#include <sqlite3.h>

#include "core/errors.h"
#include "core/json_file.h"

namespace vispco::eval {
namespace {

constexpr int kSchemaVersion = 1;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  model_hash TEXT NOT NULL,
  dataset_hash TEXT NOT NULL,
  plan TEXT NOT NULL,
  decoding TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (model_hash, dataset_hash, plan, decoding)
);
CREATE TABLE IF NOT EXISTS results (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  sample_id TEXT NOT NULL,
  prediction TEXT NOT NULL,
  score REAL NOT NULL,
  correct INTEGER NOT NULL,
  prefill_ms REAL NOT NULL,
  decode_ms REAL NOT NULL,
  total_ms REAL NOT NULL,
  extra TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  PRIMARY KEY (run_id, sample_id)
);
)sql";

// A prepared statement, finalised on scope exit; errors name the store's path.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) fail("prepare");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind(int i, const std::string& s) {
    check(sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
  }
  void bind(int i, double v) { check(sqlite3_bind_double(stmt_, i, v)); }
  void bind(int i, int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  /// Steps once: true while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail("step");
    return false;
  }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail("bind");
  }
  [[noreturn]] void fail(const char* what) const {
    throw IoError("result store '" + path_ + "': SQLite " + what + " failed: " + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

std::string key_string(const RunKey& k) {
  return nlohmann::json::array({k.model_hash, k.dataset_hash, k.plan, k.decoding}).dump();
}

}  // namespace

std::string RunKey::to_string() const {
  return "model=" + model_hash + " dataset=" + dataset_hash + " plan=" + plan + " decoding=" + decoding;
}

ResultStore::ResultStore(const std::string& path) : path_(path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw IoError("cannot open result store '" + path + "': " + msg);
  }
  try {
    sqlite3_busy_timeout(db_, 10000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    exec("PRAGMA foreign_keys=ON");
    exec("BEGIN IMMEDIATE");
    exec(kSchema);
    exec(("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '" +
          std::to_string(kSchemaVersion) + "')")
             .c_str());
    exec("COMMIT");
    Statement v(db_, path_, "SELECT value FROM meta WHERE key = 'schema_version'");
    if (!v.step() || v.text(0) != std::to_string(kSchemaVersion))
      throw IoError("result store '" + path + "': schema version " + v.text(0) + ", expected " +
                    std::to_string(kSchemaVersion));
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

ResultStore::~ResultStore() { sqlite3_close(db_); }

void ResultStore::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw IoError("result store '" + path_ + "': " + msg + " (in: " + std::string(sql).substr(0, 60) + ")");
  }
}

int64_t ResultStore::find_run(const RunKey& key) {
  const std::string ks = key_string(key);
  if (const auto it = run_ids_.find(ks); it != run_ids_.end()) return it->second;
  Statement q(db_, path_,
              "SELECT id FROM runs WHERE model_hash=?1 AND dataset_hash=?2 AND plan=?3 AND decoding=?4");
  q.bind(1, key.model_hash);
  q.bind(2, key.dataset_hash);
  q.bind(3, key.plan);
  q.bind(4, key.decoding);
  if (!q.step()) return -1;
  return run_ids_[ks] = q.integer(0);
}

int64_t ResultStore::run_id(const RunKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (const int64_t id = find_run(key); id >= 0) return id;
  {
    Statement ins(db_, path_,
                  "INSERT INTO runs(model_hash, dataset_hash, plan, decoding) VALUES (?1, ?2, ?3, ?4) "
                  "ON CONFLICT DO NOTHING");
    ins.bind(1, key.model_hash);
    ins.bind(2, key.dataset_hash);
    ins.bind(3, key.plan);
    ins.bind(4, key.decoding);
    ins.step();
  }
  const int64_t id = find_run(key);
  if (id < 0) throw IoError("result store '" + path_ + "': could not create run " + key.to_string());
  return id;
}

bool ResultStore::insert(int64_t run, const SampleResult& r) {
  if (r.sample_id.empty()) throw InvalidArgument("result store: empty sample_id");
  if (!r.extra.is_object())
    throw InvalidArgument("result store: extra of sample '" + r.sample_id + "' is not an object");
  Statement ins(
      db_, path_,
      "INSERT INTO results(run_id, sample_id, prediction, score, correct, prefill_ms, decode_ms, total_ms, "
      "extra) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(run_id, sample_id) DO NOTHING");
  ins.bind(1, run);
  ins.bind(2, r.sample_id);
  ins.bind(3, r.prediction);
  ins.bind(4, r.score);
  ins.bind(5, static_cast<int64_t>(r.correct ? 1 : 0));
  ins.bind(6, r.prefill_ms);
  ins.bind(7, r.decode_ms);
  ins.bind(8, r.total_ms);
  ins.bind(9, r.extra.dump());
  ins.step();
  return sqlite3_changes(db_) == 1;
}

bool ResultStore::put(const RunKey& key, const SampleResult& result) { return put_many(key, {result}) == 1; }

size_t ResultStore::put_many(const RunKey& key, const std::vector<SampleResult>& results) {
  const int64_t run = run_id(key);
  std::lock_guard<std::mutex> lock(mutex_);
  exec("BEGIN IMMEDIATE");
  size_t n_new = 0;
  try {
    for (const SampleResult& r : results) n_new += insert(run, r) ? 1 : 0;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  exec("COMMIT");
  return n_new;
}

std::set<std::string> ResultStore::done_ids(const RunKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<std::string> ids;
  const int64_t run = find_run(key);
  if (run < 0) return ids;
  Statement q(db_, path_, "SELECT sample_id FROM results WHERE run_id = ?1");
  q.bind(1, run);
  while (q.step()) ids.insert(q.text(0));
  return ids;
}

std::vector<SampleResult> ResultStore::results(const RunKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SampleResult> out;
  const int64_t run = find_run(key);
  if (run < 0) return out;
  Statement q(
      db_, path_,
      "SELECT sample_id, prediction, score, correct, prefill_ms, decode_ms, total_ms, extra FROM results "
      "WHERE run_id = ?1 ORDER BY rowid");
  q.bind(1, run);
  while (q.step()) {
    SampleResult r;
    r.sample_id = q.text(0);
    r.prediction = q.text(1);
    r.score = q.real(2);
    r.correct = q.integer(3) != 0;
    r.prefill_ms = q.real(4);
    r.decode_ms = q.real(5);
    r.total_ms = q.real(6);
    r.extra = parse_json(q.text(7), "result store: the extra field of a stored result");
    out.push_back(std::move(r));
  }
  return out;
}

size_t ResultStore::count(const RunKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t run = find_run(key);
  if (run < 0) return 0;
  Statement q(db_, path_, "SELECT COUNT(*) FROM results WHERE run_id = ?1");
  q.bind(1, run);
  q.step();
  return static_cast<size_t>(q.integer(0));
}

std::vector<RunKey> ResultStore::runs() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RunKey> out;
  Statement q(db_, path_, "SELECT model_hash, dataset_hash, plan, decoding FROM runs ORDER BY id");
  while (q.step()) out.push_back({q.text(0), q.text(1), q.text(2), q.text(3)});
  return out;
}

}  // namespace vispco::eval
