// The image KV cache (serve/image_cache.h): LRU eviction by bytes on hand-sized entries; keys that differ in
// any field; which plans may be cached; and over loopback HTTP, a second question (and a three-turn
// conversation) on a cached image answered as a cold request answers it — exactly as a cold request through
// the same split prefill, and within rounding of the one-shot prefill with the cache off — while two images,
// two plans or two system prompts never share an entry.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <regex>

#include "model/kv_cache.h"
#include "model/llava_next_model.h"
#include "prune/gate.h"
#include "serve/image_cache.h"
#include "server_fixture.h"

namespace vispco {
namespace {

using nlohmann::json;
using testing::ServerFixture;
using testing::test_png;

// A one-layer prefix holding `positions` keys and values of `width` fp32 values each: its bytes, counted
// by hand, are 2·positions·width·4 (keys and values) + positions (the bool mask) + 8 (next_pos, one int64).
std::shared_ptr<const ImagePrefix> prefix_of(int64_t positions, int64_t width) {
  auto p = std::make_shared<ImagePrefix>();
  p->cache = KvCache(1);
  p->cache.layers[0].append(at::zeros({1, 1, positions, width}), at::zeros({1, 1, positions, width}),
                            at::ones({1, positions}, at::kBool));
  p->next_pos = at::zeros({1, 1}, at::kLong);
  return p;
}

TEST(ImageCache, EvictsTheLeastRecentlyUsedByBytes) {
  const auto a = prefix_of(10, 10), b = prefix_of(10, 10), c = prefix_of(10, 10);
  const int64_t each = 2 * 10 * 10 * 4 + 10 + 8;  // 818
  ASSERT_EQ(a->bytes(), each);
  serve::Metrics metrics;
  serve::declare_image_cache_metrics(metrics);
  serve::ImageCache cache(2 * each + 100, &metrics);  // room for two
  EXPECT_TRUE(cache.insert("a", a));
  EXPECT_TRUE(cache.insert("b", b));
  EXPECT_EQ(cache.bytes(), 2 * each);
  EXPECT_EQ(cache.find("a"), a);  // a is now the most recent: b goes first
  EXPECT_TRUE(cache.insert("c", c));
  EXPECT_EQ(cache.evictions(), 1);
  EXPECT_EQ(cache.find("b"), nullptr);
  EXPECT_EQ(cache.find("a"), a);
  EXPECT_EQ(cache.find("c"), c);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.bytes(), 2 * each);
  EXPECT_EQ(cache.hits(), 3);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(metrics.value("vispco_image_cache_bytes"), 2.0 * each);
  EXPECT_EQ(metrics.value("vispco_image_cache_evictions_total"), 1.0);
  EXPECT_EQ(metrics.value("vispco_image_cache_hits_total"), 3.0);
  // Larger than the whole capacity: not stored, nothing evicted.
  EXPECT_FALSE(cache.insert("big", prefix_of(40, 10)));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.evictions(), 1);
  // One entry that needs the room of both evicts both.
  EXPECT_TRUE(cache.insert("two", prefix_of(20, 10)));  // 2·20·10·4 + 20 + 8 = 1628 ≤ 1736
  EXPECT_EQ(cache.evictions(), 3);
  EXPECT_EQ(cache.size(), 1u);
  // Disabled: nothing kept.
  serve::ImageCache off(0, nullptr);
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.insert("a", a));
  EXPECT_EQ(off.find("a"), nullptr);
}

TEST(ImageCache, KeysDifferInEveryField) {
  const serve::ImageCacheKey k{"sha256:m", "Float",         "cpu", "divprune:layer=0,keep=8",
                               "abc",      {1, 3148, 29901}};
  std::vector<serve::ImageCacheKey> others(7, k);
  others[0].model = "sha256:m+quant:int8";
  others[1].dtype = "BFloat16";
  others[2].device = "cuda:0";
  others[3].plan = "divprune:layer=0,keep=9";
  others[4].image_sha256 = "abd";
  others[5].ids_before = {1, 3148};
  others[6].ids_before = {1, 3148, 29901, 7};
  for (const auto& o : others) EXPECT_NE(o.str(), k.str());
  // Fields cannot run into each other ("ab" + "c" vs "a" + "bc").
  serve::ImageCacheKey x = k, y = k;
  x.dtype = "ab";
  x.device = "c";
  y.dtype = "a";
  y.device = "bc";
  EXPECT_NE(x.str(), y.str());
}

TEST(ImageCache, OnlyPlansWhoseTokensIgnoreTheQuestionAreCached) {
  auto m = testing::load_tiny();
  const ScorerEnv env{testing::tiny_model_dir()};
  for (const std::string p :
       {"none", "divprune:layer=0,keep=8", "pool:keep=4", "visionzip:keep=8", "uniform:layer=0,keep=8"})
    EXPECT_TRUE(serve::image_cacheable(BoundPlan::bind(p, m.shape(), env))) << p;
  for (const std::string p :
       {"random:keep=8", "random:layer=0,keep=8", "fastv:layer=1,keep=8", "divprune:layer=1,keep=8",
        "uniform:layer=1,keep=8", "divprune:layer=0,keep=12+fastv:layer=1,keep=8", "cdpruner:keep=8"})
    EXPECT_FALSE(serve::image_cacheable(BoundPlan::bind(p, m.shape(), env))) << p;
  // base_view (a LLaVA-NeXT model: its images have a base view) reads the layout alone.
  const auto next = testing::load_tiny_next();
  EXPECT_TRUE(serve::image_cacheable(BoundPlan::bind("base_view:keep=8", next.shape(), ScorerEnv{})));
}

TEST(ImageCache, AGateIsCacheableOnlyWithoutUseQuestionAsBound) {
  auto m = testing::load_tiny();
  testing::TempDir tmp;
  for (const bool use_question : {true, false}) {
    GateConfig cfg;
    cfg.d_model = m.shape().hidden_size;
    cfg.hidden = 8;
    cfg.use_question = use_question;
    TokenGate gate(cfg, 3);
    const auto path = tmp / (use_question ? "q.safetensors" : "noq.safetensors");
    save_gate(path, gate);
    const auto plan = BoundPlan::bind("gate:keep=8,file=" + path, m.shape(), ScorerEnv{});
    // Decided from the bound scorer: the file is not read again (even when it is gone by then).
    std::remove(path.c_str());
    EXPECT_EQ(serve::image_cacheable(plan), !use_question) << "use_question " << use_question;
    EXPECT_EQ(plan.question_independent(), !use_question);
  }
}

json post(httplib::Client& c, const json& body, int* status = nullptr) {
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  if (!res) return {{"transport_error", static_cast<int>(res.error())}};
  if (status) *status = res->status;
  return json::parse(res->body);
}

json image_part(const std::string& png) {
  return {{"type", "image_url"}, {"image_url", {{"url", testing::data_url(png)}}}};
}

// A greedy request with logprobs, EOS ignored so every answer has `n` tokens to compare.
json body_of(json messages, const std::string& plan, int n = 6) {
  return {{"model", "tiny"},           {"messages", std::move(messages)},
          {"max_tokens", n},           {"ignore_eos", true},
          {"logprobs", true},          {"top_logprobs", 2},
          {"vispco", {{"plan", plan}}}};
}

json question_on(const std::string& png, const std::string& q, const std::string& system = "") {
  json ms = json::array();
  if (!system.empty()) ms.push_back({{"role", "system"}, {"content", system}});
  ms.push_back(
      {{"role", "user"}, {"content", json::array({image_part(png), {{"type", "text"}, {"text", q}}})}});
  return ms;
}

std::vector<double> logprobs_of(const json& r) {
  std::vector<double> out;
  for (const auto& t : r["choices"][0]["logprobs"]["content"]) out.push_back(t["logprob"].get<double>());
  return out;
}

std::vector<int64_t> ids_of(const json& r) {
  std::vector<int64_t> out;
  for (const auto& t : r["choices"][0]["logprobs"]["content"]) out.push_back(t["id"].get<int64_t>());
  return out;
}

double metric(ServerFixture& f, const std::string& name) { return f.metrics().value(name); }

serve::SchedulerOptions cache_mb(double mb) {
  serve::SchedulerOptions so;
  so.image_cache_bytes = static_cast<int64_t>(mb * 1048576);
  return so;
}

TEST(ServeImageCache, ASecondQuestionOnACachedImageAnswersAsAColdRequest) {
  ServerFixture on(cache_mb(256)), fresh(cache_mb(256)), off(cache_mb(0));
  auto c_on = on.client(), c_fresh = fresh.client(), c_off = off.client();
  const auto png = test_png(64, 41);
  for (const std::string plan : {"none", "divprune:layer=0,keep=8", "visionzip:keep=6"}) {
    int status = 0;
    const json first = post(c_on, body_of(question_on(png, "What colour is the cube?"), plan), &status);
    ASSERT_EQ(status, 200) << first.dump();
    EXPECT_EQ(first["vispco"]["image_cache"], "miss") << plan;
    const json body = body_of(question_on(png, "How many spheres are there?"), plan);
    const json warm = post(c_on, body);
    EXPECT_EQ(warm["vispco"]["image_cache"], "hit") << plan;
    const json cold = post(c_fresh, body);  // the same split prefill, its prefix computed now
    EXPECT_EQ(cold["vispco"]["image_cache"], "miss");
    const json one_shot = post(c_off, body);  // the prefill in one piece, as before the cache
    EXPECT_EQ(one_shot["vispco"]["image_cache"], "off");
    // Exactly the cold request's answer, token ids and log-probabilities.
    EXPECT_EQ(warm["choices"][0]["message"]["content"], cold["choices"][0]["message"]["content"]) << plan;
    EXPECT_EQ(ids_of(warm), ids_of(cold)) << plan;
    EXPECT_EQ(logprobs_of(warm), logprobs_of(cold)) << plan;
    EXPECT_EQ(warm["vispco"]["kept_visual_tokens"], cold["vispco"]["kept_visual_tokens"]);
    EXPECT_EQ(warm["usage"], cold["usage"]);
    // The one-shot prefill: the same tokens, log-probabilities within fp32 rounding.
    EXPECT_EQ(warm["choices"][0]["message"]["content"], one_shot["choices"][0]["message"]["content"]) << plan;
    ASSERT_EQ(ids_of(warm), ids_of(one_shot)) << plan;
    const auto a = logprobs_of(warm), b = logprobs_of(one_shot);
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
    std::printf("%s: cached vs one-shot prefill, max |Δ logprob| %.3e over %zu tokens\n", plan.c_str(), diff,
                a.size());
    EXPECT_LT(diff, 1e-4) << plan;
    EXPECT_EQ(warm["vispco"]["kept_visual_tokens"], one_shot["vispco"]["kept_visual_tokens"]);
  }
  EXPECT_EQ(metric(on, "vispco_image_cache_hits_total"), 3);
  EXPECT_EQ(metric(on, "vispco_image_cache_misses_total"), 3);
  EXPECT_EQ(on.scheduler().image_cache().size(), 3u);
  EXPECT_GT(metric(on, "vispco_image_cache_bytes"), 0);
  EXPECT_EQ(metric(on, "vispco_image_cache_bytes"),
            static_cast<double>(on.scheduler().image_cache().bytes()));
  EXPECT_EQ(metric(off, "vispco_image_cache_hits_total") + metric(off, "vispco_image_cache_misses_total"), 0);
  const auto text = on.metrics().render();
  EXPECT_TRUE(std::regex_search(text, std::regex("\nvispco_image_cache_hits_total 3\n"))) << text;
}

TEST(ServeImageCache, AThreeTurnConversationOnACachedImageAnswersAsCold) {
  ServerFixture on(cache_mb(256)), off(cache_mb(0));
  auto c_on = on.client(), c_off = off.client();
  const auto png = test_png(64, 42);
  const std::string plan = "divprune:layer=0,keep=8";
  json conv = question_on(png, "What colour is the cube?");
  for (const std::string q : {"", "Is it large?", "And the sphere?"}) {
    if (!q.empty()) conv.push_back({{"role", "user"}, {"content", q}});
    const json warm = post(c_on, body_of(conv, plan)), cold = post(c_off, body_of(conv, plan));
    ASSERT_TRUE(warm.contains("choices")) << warm.dump();
    EXPECT_EQ(warm["vispco"]["image_cache"], q.empty() ? "miss" : "hit");
    EXPECT_EQ(warm["choices"][0]["message"]["content"], cold["choices"][0]["message"]["content"]) << q;
    EXPECT_EQ(ids_of(warm), ids_of(cold)) << q;
    EXPECT_GT(warm["usage"]["prompt_tokens"].get<int64_t>(), 16);
    conv.push_back({{"role", "assistant"}, {"content", warm["choices"][0]["message"]["content"]}});
  }
  EXPECT_EQ(metric(on, "vispco_image_cache_hits_total"), 2);
}

TEST(ServeImageCache, ImagesPlansAndSystemPromptsNeverShareAnEntry) {
  ServerFixture on(cache_mb(256)), off(cache_mb(0));
  auto c_on = on.client(), c_off = off.client();
  const auto png_a = test_png(64, 43), png_b = test_png(64, 44);
  const std::string plan = "divprune:layer=0,keep=8", q = "What colour is the cube?";
  const json a = post(c_on, body_of(question_on(png_a, q), plan));
  const json b = post(c_on, body_of(question_on(png_b, q), plan));
  EXPECT_EQ(a["vispco"]["image_cache"], "miss");
  EXPECT_EQ(b["vispco"]["image_cache"], "miss");  // a shared entry would answer b with a's image
  EXPECT_NE(logprobs_of(a), logprobs_of(b));      // the two images give different answers' scores
  const json b_cold = post(c_off, body_of(question_on(png_b, q), plan));
  EXPECT_EQ(ids_of(b), ids_of(b_cold));
  const json a_other_plan = post(c_on, body_of(question_on(png_a, q), "divprune:layer=0,keep=6"));
  EXPECT_EQ(a_other_plan["vispco"]["image_cache"], "miss");
  EXPECT_EQ(a_other_plan["vispco"]["kept_visual_tokens"], 6);
  const json a_system = post(c_on, body_of(question_on(png_a, q, "Answer in one word."), plan));
  EXPECT_EQ(a_system["vispco"]["image_cache"], "miss");  // other ids before the image
  const json a_system_cold = post(c_off, body_of(question_on(png_a, q, "Answer in one word."), plan));
  EXPECT_EQ(ids_of(a_system), ids_of(a_system_cold));
  EXPECT_EQ(post(c_on, body_of(question_on(png_a, "Is it large?"), plan))["vispco"]["image_cache"], "hit");
  EXPECT_EQ(on.scheduler().image_cache().size(), 4u);
  // Plans whose kept tokens depend on the question are never cached.
  for (const std::string p : {"fastv:layer=1,keep=8", "random:keep=8"})
    EXPECT_EQ(post(c_on, body_of(question_on(png_a, q), p))["vispco"]["image_cache"], "off") << p;
  EXPECT_EQ(metric(on, "vispco_image_cache_misses_total"), 4);
  EXPECT_EQ(metric(on, "vispco_image_cache_hits_total"), 1);
}

TEST(ServeImageCache, EvictsByBytesUnderTraffic) {
  // Room for about one image prefix of the tiny model: a second image evicts the first.
  ServerFixture probe(cache_mb(256));
  auto c = probe.client();
  post(c, body_of(question_on(test_png(64, 45), "q"), "none"));
  const int64_t one = probe.scheduler().image_cache().bytes();
  ASSERT_GT(one, 0);
  ServerFixture f(cache_mb(1.5 * static_cast<double>(one) / 1048576));
  auto cf = f.client();
  const auto png_a = test_png(64, 45), png_b = test_png(64, 46);
  EXPECT_EQ(post(cf, body_of(question_on(png_a, "q"), "none"))["vispco"]["image_cache"], "miss");
  EXPECT_EQ(post(cf, body_of(question_on(png_b, "q"), "none"))["vispco"]["image_cache"], "miss");
  EXPECT_EQ(metric(f, "vispco_image_cache_evictions_total"), 1);
  EXPECT_EQ(post(cf, body_of(question_on(png_b, "r"), "none"))["vispco"]["image_cache"], "hit");
  EXPECT_EQ(post(cf, body_of(question_on(png_a, "r"), "none"))["vispco"]["image_cache"], "miss");
  EXPECT_LE(f.scheduler().image_cache().bytes(), static_cast<int64_t>(1.5 * static_cast<double>(one)));
}

TEST(ServeImageCache, BadConversationsAre400AndTheServerGoesOn) {
  ServerFixture f;
  auto c = f.client();
  const auto png = test_png(64, 47);
  const json img = json::array({image_part(png), {{"type", "text"}, {"text", "q"}}});
  const std::vector<json> bad = {json::array({{{"role", "user"}, {"content", "hi"}},
                                              {{"role", "assistant"}, {"content", img}},
                                              {{"role", "user"}, {"content", "q"}}}),
                                 json::array({{{"role", "user"}, {"content", img}},
                                              {{"role", "assistant"}, {"content", "a"}},
                                              {{"role", "user"}, {"content", img}}})};
  for (const auto& ms : bad) {
    int status = 0;
    const json r = post(c, {{"messages", ms}, {"max_tokens", 2}}, &status);
    EXPECT_EQ(status, 400) << r.dump();
    EXPECT_EQ(r["error"]["param"], "messages");
  }
  int status = 0;
  post(c, body_of(question_on(png, "q"), "none"), &status);
  EXPECT_EQ(status, 200);
}

}  // namespace
}  // namespace vispco
