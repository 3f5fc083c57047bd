// SynthVQA generation: per-sample pipeline (family → draft → layout → render) and the parallel writer of
// images, data.jsonl and manifest.json with the content hash.
#include "eval/synthvqa/generator.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>
#include <vector>

#include "core/cpu_quota.h"
#include "core/errors.h"
#include "core/hash.h"
#include "eval/synthvqa/families.h"
#include "eval/synthvqa/hr_generator.h"
#include "eval/synthvqa/render.h"
#include "eval/synthvqa/rng.h"

namespace vispco::eval::synthvqa {
namespace fs = std::filesystem;

nlohmann::json SynthSample::record() const {
  return {{"id", id},         {"image", image},   {"question", question},
          {"answer", answer}, {"family", family}, {"scene", scene_to_json(scene)}};
}

SynthSample make_sample(uint64_t seed, uint64_t index) { return make_sample(seed, index, SampleOptions{}); }

const std::vector<SynthKindInfo>& synth_kind_table() {
  static const std::vector<SynthKindInfo> t{
      {SynthKind::kSynthVqa, "synthvqa", kGeneratorVersion,
       [](uint64_t seed, uint64_t index) { return make_sample(seed, index); }},
      {SynthKind::kHr, "synthvqa-hr", kHrGeneratorVersion, make_hr_sample},
  };
  return t;
}

const SynthKindInfo& info(SynthKind kind) { return synth_kind_table().at(static_cast<size_t>(kind)); }

SynthSample sample_from_draft(uint64_t index, const char* family, Draft&& draft, Rng& rng) {
  SynthSample s;
  char id[32];
  std::snprintf(id, sizeof id, "%06llu", static_cast<unsigned long long>(index));
  s.id = id;
  s.image = "images/" + s.id + ".png";
  s.family = family;
  s.question = draft.question;
  s.answer = draft.answer;
  s.scene.objects = std::move(draft.objects);
  rng.shuffle(s.scene.objects);  // draw order, so the asked-about object is not always first
  s.scene.texts = std::move(draft.texts);
  return s;
}

SynthSample make_sample(uint64_t seed, uint64_t index, const SampleOptions& options) {
  const auto& families = family_table();
  const FamilyInfo& family = families[index % families.size()];
  const size_t slot = (index / families.size()) % family.n_slots;
  Rng rng(sample_seed(seed, index));

  Draft draft = family.build(rng, slot);
  if (draft.texts.empty()) add_distractor_texts(draft, rng);
  if (options.min_texts > 0) add_texts_up_to(draft, rng, options.min_texts);
  layout(draft, rng);

  SynthSample s = sample_from_draft(index, family.name, std::move(draft), rng);
  s.scene.background = background_table()[rng.index(background_table().size())].name;
  s.scene.n_strokes = rng.uniform_int(4, 14);
  s.rgb = render_scene(s.scene, rng);
  return s;
}

namespace {

// What one sample contributes to the output.
struct Row {
  std::string line;          // data.jsonl line with its '\n'
  std::string pixel_digest;  // SHA-256 hex of the RGB pixels
  std::string family;
  std::string canvas;  // "<width>x<height>"
};

// Runs the kind's sample function for every index on n_threads workers; `sink` (called concurrently) may
// write the image.
template <typename Sink>
std::vector<Row> run_samples(SynthKind kind, uint64_t seed, size_t count, int n_threads, Sink sink) {
  const auto make = info(kind).make;
  std::vector<Row> rows(count);
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto worker = [&] {
    try {
      for (size_t i = next++; i < count; i = next++) {
        SynthSample s = make(seed, i);
        CV_Assert(s.rgb.isContinuous());
        rows[i].line = s.record().dump() + "\n";
        rows[i].pixel_digest =
            sha256_hex({reinterpret_cast<const char*>(s.rgb.data), s.rgb.total() * s.rgb.elemSize()});
        rows[i].family = s.family;
        rows[i].canvas = std::to_string(s.rgb.cols) + "x" + std::to_string(s.rgb.rows);
        sink(s);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next = count;
    }
  };
  const int n = n_threads > 0 ? n_threads : default_thread_count();
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return rows;
}

std::string hash_rows(const std::vector<Row>& rows) {
  Sha256 h;
  for (const Row& r : rows) h.update(r.line);
  for (const Row& r : rows) h.update(r.pixel_digest);
  return "sha256:" + h.hex_digest();
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw IoError("cannot write '" + path.string() + "'");
}

}  // namespace

SynthResult generate_synthvqa(const SynthOptions& opts, const std::string& out_dir) {
  if (opts.count == 0) throw InvalidArgument("SynthVQA: count must be ≥ 1, got 0");
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path root(out_dir);
  std::error_code ec;
  fs::create_directories(root / "images", ec);
  if (ec) throw IoError("cannot create '" + (root / "images").string() + "': " + ec.message());

  const SynthKindInfo& kind = info(opts.kind);
  const std::vector<Row> rows =
      run_samples(opts.kind, opts.seed, opts.count, opts.n_threads, [&](const SynthSample& s) {
        cv::Mat bgr;
        cv::cvtColor(s.rgb, bgr, cv::COLOR_RGB2BGR);
        std::vector<uchar> png;
        if (!cv::imencode(".png", bgr, png)) throw IoError("PNG encoding failed for sample " + s.id);
        write_file(root / s.image, std::string(png.begin(), png.end()));
      });

  SynthResult result;
  result.count = rows.size();
  std::string jsonl;
  std::map<std::string, size_t> per_canvas;
  for (const Row& r : rows) {
    jsonl += r.line;
    ++result.per_family[r.family];
    ++per_canvas[r.canvas];
  }
  write_file(root / "data.jsonl", jsonl);
  result.content_hash = hash_rows(rows);

  nlohmann::ordered_json manifest;
  manifest["name"] = kind.name;
  manifest["generator_version"] = kind.generator_version;
  manifest["split"] =
      opts.split.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(opts.split);
  manifest["seed"] = opts.seed;
  manifest["count"] = result.count;
  if (opts.kind == SynthKind::kSynthVqa)
    manifest["image_size"] = kImageSize;
  else
    manifest["image_sizes"] = per_canvas;  // "<width>x<height>" → samples
  manifest["data"] = "data.jsonl";
  manifest["families"] = result.per_family;
  manifest["content_hash"] = result.content_hash;
  manifest["hash_scheme"] =
      std::string(
          "sha256(data.jsonl bytes, then for each sample in order the 64-hex sha256 of its raw RGB "
          "pixels, row-major, ") +
      (opts.kind == SynthKind::kSynthVqa ? "336*336*3 bytes)" : "width*height*3 bytes)");
  manifest["opencv_version"] = CV_VERSION;
  write_file(root / "manifest.json", manifest.dump(2) + "\n");
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

std::string synthvqa_content_hash(uint64_t seed, size_t count, int n_threads, SynthKind kind) {
  if (count == 0) throw InvalidArgument("SynthVQA: count must be ≥ 1, got 0");
  return hash_rows(run_samples(kind, seed, count, n_threads, [](const SynthSample&) {}));
}

}  // namespace vispco::eval::synthvqa
