// Tests of the pruning sweep (eval/prefill_sweep.h) on the tiny preset, each figure against a hand
// computation: tokens per layer from the plan's arithmetic, KV-cache bytes from the layer lengths, FLOPs
// speedups from the per-layer formula written out with the tiny dimensions; plus the spec parser, --model
// loading and errors.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "eval/prefill_sweep.h"
#include "model/llava/presets.h"
#include "model/tiny_model.h"

namespace vispco::eval {
namespace {

// The sweep applies its thread count to LibTorch (process-wide); restore it for the tests that follow.
struct ThreadCountGuard {
  int saved = at::get_num_threads();
  ~ThreadCountGuard() { at::set_num_threads(saved); }
};

// Tiny preset: N_v = 16, L = 4, D = 64, m = 128, H = 4, H_kv = 2, D_h = 16, V = 448; vision D_v = 32,
// m_v = 64, 56 px / patch 14 (grid 4), one vision layer used (feature layer −2 of 2).
constexpr int64_t kNText = 9, kNv = 16;

// Decoder layer FLOPs at n tokens, written out: q,o 2·(2·n·64·64) + k,v 2·(2·n·64·32) = 24576·n;
// attention 2·2·n·n·(4·16) = 256·n²; MLP 2·3·n·64·128 = 49152·n.
int64_t hand_layer_flops(int64_t n) { return 73728 * n + 256 * n * n; }
constexpr int64_t kHandLmHead = 2 * 64 * 448;  // last position only
// Patch conv 2·16·32·(3·14·14) = 602112; one CLIP layer at 17 tokens: 4·2·17·32·32 + 2·2·17·17·32 +
// 2·2·17·32·64 = 315520; projector 2·16·32·64 + 2·16·64·64 = 196608.
constexpr int64_t kHandVisionAndProjector = 602112 + 315520 + 196608;
// KV bytes of one layer holding T tokens: keys and values 2 × B(1) × H_kv(2) × T × D_h(16) × 4 bytes, plus T
// one-byte validity flags.
int64_t hand_kv_bytes(int64_t t) { return 2 * 1 * 2 * t * 16 * 4 + t; }

PrefillBenchConfig tiny_config() {
  PrefillBenchConfig c;
  c.preset = "tiny";
  c.n_text = kNText;
  c.repeats = 1;
  c.n_threads = 1;
  return c;
}

const PrefillSweepRow& row_of(const PrefillSweepResult& r, const std::string& tmpl, int64_t k) {
  for (const auto& row : r.rows)
    if (row.plan_template == tmpl && row.keep == k) return row;
  throw std::runtime_error("no row " + tmpl + " K=" + std::to_string(k));
}

TEST(PrefillSweep, FastVRowsMatchThePlanArithmetic) {
  ThreadCountGuard threads;
  const auto r = run_prefill_sweep(tiny_config(), {{16, 8, 4}, {"fastv:layer=2"}});
  ASSERT_EQ(r.rows.size(), 4u);  // the reference + 3 K
  const auto& ref = r.rows[0];
  EXPECT_EQ(ref.plan, "none");
  EXPECT_EQ(ref.keep, kNv);
  // FastV at ℓ = 2 acts before decoder layer 2: layers 0, 1 see N_t + N_v = 25, layers 2, 3 see N_t + K.
  EXPECT_EQ(ref.tokens_per_layer, (std::vector<int64_t>{25, 25, 25, 25}));
  EXPECT_EQ(row_of(r, "fastv:layer=2", 16).tokens_per_layer, (std::vector<int64_t>{25, 25, 25, 25}));
  EXPECT_EQ(row_of(r, "fastv:layer=2", 8).tokens_per_layer, (std::vector<int64_t>{25, 25, 17, 17}));
  const auto& k4 = row_of(r, "fastv:layer=2", 4);
  EXPECT_EQ(k4.plan, "fastv:layer=2,keep=4");
  EXPECT_EQ(k4.tokens_per_layer, (std::vector<int64_t>{25, 25, 13, 13}));
  EXPECT_EQ(k4.n_visual_kept, 4);
  EXPECT_EQ(row_of(r, "fastv:layer=2", 16).n_visual_kept, 16);

  EXPECT_EQ(ref.kv_cache_bytes, 4 * hand_kv_bytes(25));  // 25700
  EXPECT_EQ(row_of(r, "fastv:layer=2", 8).kv_cache_bytes, 2 * hand_kv_bytes(25) + 2 * hand_kv_bytes(17));
  EXPECT_EQ(k4.kv_cache_bytes, 2 * hand_kv_bytes(25) + 2 * hand_kv_bytes(13));  // 19532
  EXPECT_EQ(k4.kv_cache_bytes, 19532);

  const int64_t ref_llm = 4 * hand_layer_flops(25) + kHandLmHead;                            // 8 070 144
  const int64_t k4_llm = 2 * hand_layer_flops(25) + 2 * hand_layer_flops(13) + kHandLmHead;  // 6 067 200
  EXPECT_EQ(ref_llm, 8070144);
  EXPECT_EQ(k4_llm, 6067200);
  EXPECT_EQ(ref.flops_llm, ref_llm);
  EXPECT_EQ(k4.flops_llm, k4_llm);
  EXPECT_EQ(k4.flops.total, k4_llm + kHandVisionAndProjector);
  EXPECT_DOUBLE_EQ(k4.flops_speedup, 8070144.0 / 6067200.0);
  EXPECT_DOUBLE_EQ(k4.flops_speedup_with_vision, (8070144.0 + 1114240.0) / (6067200.0 + 1114240.0));
  EXPECT_DOUBLE_EQ(ref.flops_speedup, 1.0);
  EXPECT_DOUBLE_EQ(ref.measured_speedup, 1.0);

  for (const auto& row : r.rows) {
    ASSERT_EQ(row.prefill_ms_runs.size(), 1u);
    EXPECT_GT(row.prefill_ms, 0);
    EXPECT_DOUBLE_EQ(row.measured_speedup, ref.prefill_ms / row.prefill_ms);
    EXPECT_DOUBLE_EQ(row.efficiency, row.measured_speedup / row.flops_speedup);
    EXPECT_DOUBLE_EQ(row.vision_ms, r.vision_ms);  // FastV needs no [CLS] attention
    EXPECT_DOUBLE_EQ(row.measured_speedup_with_vision,
                     (ref.vision_ms + ref.prefill_ms) / (row.vision_ms + row.prefill_ms));
  }
  EXPECT_EQ(r.vision_cls_ms, 0);
  EXPECT_TRUE(r.vision_cls_ms_runs.empty());
}

TEST(PrefillSweep, VisionZipAtLayerZeroPrunesEveryLayer) {
  ThreadCountGuard threads;
  const auto r = run_prefill_sweep(tiny_config(), {{8}, {"visionzip:layer=0"}});
  ASSERT_EQ(r.rows.size(), 2u);
  const auto& k8 = r.rows[1];
  EXPECT_EQ(k8.plan, "visionzip:layer=0,keep=8");
  // ℓ = 0: every layer sees N_t + K = 9 + 8 (7 dominant + round(8·10/64) = 1 contextual token).
  EXPECT_EQ(k8.tokens_per_layer, (std::vector<int64_t>{17, 17, 17, 17}));
  EXPECT_EQ(k8.n_visual_kept, 8);
  EXPECT_EQ(k8.kv_cache_bytes, 4 * hand_kv_bytes(17));  // 17476
  EXPECT_EQ(k8.kv_cache_bytes, 17476);
  EXPECT_EQ(k8.flops_llm, 4 * hand_layer_flops(17) + kHandLmHead);
  EXPECT_DOUBLE_EQ(k8.flops_speedup, 8070144.0 / static_cast<double>(4 * hand_layer_flops(17) + kHandLmHead));
  // VisionZip needs the tower's [CLS] attention: its rows count the vision pass that computes it.
  EXPECT_GT(r.vision_cls_ms, 0);
  EXPECT_DOUBLE_EQ(k8.vision_ms, r.vision_cls_ms);
  EXPECT_DOUBLE_EQ(r.rows[0].vision_ms, r.vision_ms);
  const auto j = r.to_json();
  EXPECT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][1]["kv_cache_bytes"].get<int64_t>(), 17476);
  EXPECT_EQ(j["rows"][1]["tokens_per_layer"], nlohmann::json({17, 17, 17, 17}));
  EXPECT_EQ(j["rows"][0]["flops_llm"].get<int64_t>(), 8070144);
  EXPECT_EQ(j["rows"][0]["flops_with_vision"].get<int64_t>(), 8070144 + kHandVisionAndProjector);
  const auto table = r.table();
  EXPECT_NE(table.find("visionzip:layer=0"), std::string::npos) << table;
  EXPECT_NE(table.find("[CLS] attention"), std::string::npos) << table;
}

TEST(PrefillSweep, TemplateWithKPlaceholderAndSeveralStages) {
  ThreadCountGuard threads;
  const auto r = run_prefill_sweep(tiny_config(), {{8}, {"fastv:layer=1,keep={K}+random:layer=3,keep=2"}});
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].tokens_per_layer, (std::vector<int64_t>{25, 17, 17, 11}));
  EXPECT_EQ(r.rows[1].n_visual_kept, 2);
}

TEST(PrefillSweep, ModelFolderLoadsItsWeights) {
  ThreadCountGuard threads;
  // The tiny folder holds random_llava_net(tiny, seed 7): the preset built with seed 7 is the same network,
  // and the seed also draws the same image, so both setups give the same logits.
  auto from_dir = tiny_config();
  from_dir.model_dir = testing::tiny_model_dir();
  from_dir.seed = 7;
  auto from_preset = tiny_config();
  from_preset.seed = 7;
  PrefillBenchSetup a(from_dir), b(from_preset);
  const auto la = a.run_prefill(a.run_vision()), lb = b.run_prefill(b.run_vision());
  EXPECT_LT(testing::max_diff(la, lb), 1e-5) << "max diff " << testing::max_diff(la, lb);
  const auto r = run_prefill_sweep(from_dir, {{4}, {"fastv:layer=2"}});
  EXPECT_EQ(r.model, "model " + testing::tiny_model_dir());
  EXPECT_EQ(r.rows[1].tokens_per_layer, (std::vector<int64_t>{25, 25, 13, 13}));
  from_dir.n_layers = 2;  // truncation is for random presets only
  EXPECT_THROW(from_dir.validate(), InvalidArgument);
}

TEST(PrefillSweep, KeepListParsing) {
  EXPECT_EQ(parse_keep_list("576,288,192,128,64"), (std::vector<int64_t>{576, 288, 192, 128, 64}));
  EXPECT_EQ(parse_keep_list("64"), (std::vector<int64_t>{64}));
  EXPECT_EQ(parse_keep_list("8, 4"), (std::vector<int64_t>{8, 4}));
  EXPECT_THROW(parse_keep_list(""), InvalidArgument);
  EXPECT_THROW(parse_keep_list("16,"), InvalidArgument);
  EXPECT_THROW(parse_keep_list("16,,4"), InvalidArgument);
  EXPECT_THROW(parse_keep_list("16,abc"), InvalidArgument);
  EXPECT_THROW(parse_keep_list("16,4x"), InvalidArgument);
  EXPECT_THROW(parse_keep_list("0"), InvalidArgument);
  EXPECT_THROW(parse_keep_list("8,8"), InvalidArgument);
}

TEST(PrefillSweep, PlanTemplates) {
  EXPECT_EQ(sweep_plan("fastv:layer=2", 64, 576).to_string(), "fastv:layer=2,keep=64");
  EXPECT_EQ(sweep_plan("visionzip:layer=0,contextual=4", 32, 576).to_string(),
            "visionzip:layer=0,keep=32,contextual=4");
  EXPECT_EQ(sweep_plan("fastv:layer=2,keep={K}+fastv:layer=8,keep={K}", 9, 576).to_string(),
            "fastv:layer=2,keep=9+fastv:layer=8,keep=9");
  EXPECT_THROW(sweep_plan("fastv:layer=2,keep=64", 32, 576), InvalidArgument);
  EXPECT_THROW(sweep_plan("fastv:layer=2+fastv:layer=4", 32, 576), InvalidArgument);
  // Without layer= the method's paper layer (FastV: ℓ = 2, issue 22).
  EXPECT_EQ(sweep_plan("fastv", 32, 576).to_string(), "fastv:layer=2,keep=32");
}

TEST(PrefillSweep, SpecValidationNamesTemplateAndK) {
  const auto cfg = preset_shape("tiny", 0);
  const auto message = [&](const PrefillSweepSpec& s) {
    try {
      s.validate(cfg);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no throw");
  };
  EXPECT_EQ(message({{16, 8}, {"fastv:layer=2", "visionzip:layer=0"}}), "no throw");
  EXPECT_EQ(message({{17}, {"fastv:layer=2"}}), "sweep K 17 is outside [1, N_v = 16]");
  EXPECT_NE(message({{8}, {"fastv:layer=0"}}).find("sweep plan 'fastv:layer=0' at K=8: "), std::string::npos);
  EXPECT_NE(message({{8}, {"fastv:layer=4"}}).find("outside [0, 4)"), std::string::npos);
  EXPECT_NE(message({{8}, {"nope:layer=1"}}).find("unknown scorer 'nope'"), std::string::npos);
  EXPECT_NE(message({{}, {"fastv:layer=2"}}).find("at least one K"), std::string::npos);
  EXPECT_NE(message({{8}, {}}).find("at least one plan template"), std::string::npos);
  // A bad spec fails before the model is built.
  auto c = tiny_config();
  c.preset = "llava-1.5-7b";  // would take minutes and ~28 GB to build
  EXPECT_THROW(run_prefill_sweep(c, {{577}, {"fastv:layer=2"}}), InvalidArgument);
}

}  // namespace
}  // namespace vispco::eval
