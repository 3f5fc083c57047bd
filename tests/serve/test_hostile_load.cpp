// The pure parts of the hostile-load benchmark (serve/hostile_load.h) and the load test's percentiles: the
// bytes the attacks write, the gzip bomb and the thin PNG they carry, the attack list, the verdict
// arithmetic. Nothing here starts a server or measures time.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>

#include "core/errors.h"
#include "serve/data_url.h"
#include "serve/hostile_load.h"

namespace vispco::serve {
namespace {

using nlohmann::json;

// Width and height from a PNG's IHDR chunk (bytes 16..23, big-endian).
std::pair<uint32_t, uint32_t> png_size(const std::string& png) {
  const auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(png[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

TEST(LoadTestPercentiles, NearestRankOnAnUnsortedSample) {
  const auto p = percentiles({5, 1, 4, 2, 3});
  EXPECT_EQ(p.p50, 3);  // ⌈0.5·5⌉ = 3rd smallest
  EXPECT_EQ(p.p90, 5);  // ⌈4.5⌉ = 5th
  EXPECT_EQ(p.p99, 5);
  EXPECT_EQ(p.max, 5);
  EXPECT_DOUBLE_EQ(p.mean, 3);
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const auto q = percentiles(v);
  EXPECT_EQ(q.p50, 50);
  EXPECT_EQ(q.p90, 90);
  EXPECT_EQ(q.p99, 99);
  EXPECT_DOUBLE_EQ(q.mean, 50.5);
  const auto e = percentiles({});
  EXPECT_EQ(e.p99, 0);
  EXPECT_EQ(e.mean, 0);
}

TEST(HostileLoad, RegistryCoversIssueItemsInEnumOrder) {
  std::set<std::string> names;
  std::set<int> items;
  for (size_t i = 0; i < attack_kinds().size(); ++i) {
    const auto& k = attack_kinds()[i];
    EXPECT_EQ(static_cast<size_t>(k.kind), i) << k.name;
    EXPECT_EQ(attack_info(k.kind).name, std::string(k.name));
    names.insert(k.name);
    items.insert(k.issue_item);
  }
  EXPECT_EQ(names.size(), attack_kinds().size());
  EXPECT_EQ(items, (std::set<int>{1, 2, 3, 4, 5, 6, 9}));
  EXPECT_TRUE(attack_info(AttackKind::kSlowHeader).held);
  EXPECT_TRUE(attack_info(AttackKind::kIdleConnection).held);
  EXPECT_FALSE(attack_info(AttackKind::kLongHeaderLine).held);
}

TEST(HostileLoad, ParsesAttackListsByNameAndItem) {
  EXPECT_EQ(parse_attack_list("all").size(), attack_kinds().size());
  EXPECT_TRUE(parse_attack_list("none").empty());
  EXPECT_EQ(parse_attack_list("1"),
            (std::vector<AttackKind>{AttackKind::kPutChunked, AttackKind::kPatchChunked,
                                     AttackKind::kPostLengthAndChunked, AttackKind::kPutGzip}));
  // Order of the words does not matter, duplicates collapse, the result is in enum order.
  EXPECT_EQ(
      parse_attack_list("disconnect,put-gzip,9,5"),
      (std::vector<AttackKind>{AttackKind::kPutGzip, AttackKind::kTinyTemperature, AttackKind::kDisconnect}));
  EXPECT_EQ(parse_attack_list("6").size(), 4u);
  try {
    parse_attack_list("put-gzip,slowloris");
    FAIL() << "an unknown attack was accepted";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'slowloris'"), std::string::npos) << what;
    EXPECT_NE(what.find("slow-header"), std::string::npos) << what;  // the valid names are listed
  }
}

TEST(HostileLoad, RequestHeadAndChunkFraming) {
  EXPECT_EQ(request_head("PUT", "/v1/chat/completions", "127.0.0.1:8080",
                         {{"Transfer-Encoding", "chunked"}, {"Content-Type", "application/json"}}),
            "PUT /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nTransfer-Encoding: chunked\r\n"
            "Content-Type: application/json\r\n\r\n");
  EXPECT_EQ(chunk_frame("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(chunk_frame(""), "0\r\n\r\n");  // the last chunk (a body's end is this plus "\r\n")
  const std::string big = chunk_frame(std::string(65536, 'x'));
  EXPECT_EQ(big.substr(0, 7), "10000\r\n");
  EXPECT_EQ(big.size(), 7 + 65536 + 2u);
}

TEST(HostileLoad, ParsesStatusLines) {
  EXPECT_EQ(parse_status_line("HTTP/1.1 405 Method Not Allowed\r\nAllow: POST\r\n"), 405);
  EXPECT_EQ(parse_status_line("HTTP/1.0 200\r\n"), 200);
  EXPECT_EQ(parse_status_line("HTTP/1.1 503 Service Unavailable\r\n"), 503);
  EXPECT_EQ(parse_status_line("HTTP/1.1 413 Payload Too Large"), -1);  // no end of line yet
  EXPECT_EQ(parse_status_line("HTTP/1.1 4O5 x\r\n"), -1);
  EXPECT_EQ(parse_status_line("HTTP/1.1 4051 x\r\n"), -1);
  EXPECT_EQ(parse_status_line("HTTP/2 200\r\n"), -1);
  EXPECT_EQ(parse_status_line(""), -1);
}

TEST(HostileLoad, GzipBombInflatesToExactlyTheZerosAsked) {
  const int64_t n = 16 << 20;
  const std::string gz = gzip_zeros(n);
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size(), static_cast<size_t>(n / 500)) << "compressed to " << gz.size() << " bytes";
  httplib::detail::gzip_decompressor inflate;
  ASSERT_TRUE(inflate.is_valid());
  int64_t total = 0;
  bool all_zero = true;
  ASSERT_TRUE(inflate.decompress(gz.data(), gz.size(), [&](const char* d, size_t len) {
    for (size_t i = 0; i < len; ++i) all_zero = all_zero && d[i] == 0;
    total += static_cast<int64_t>(len);
    return true;
  }));
  EXPECT_EQ(total, n);
  EXPECT_TRUE(all_zero);
  // The size's trailer (ISIZE, little-endian, mod 2^32) says the same.
  uint32_t isize = 0;
  for (int i = 3; i >= 0; --i)
    isize = (isize << 8) | static_cast<unsigned char>(gz[gz.size() - 4 + static_cast<size_t>(i)]);
  EXPECT_EQ(isize, static_cast<uint32_t>(n));
}

TEST(HostileLoad, ThinPngIsSmallWithTheAskedSides) {
  const std::string thin = solid_png(65536, 256);  // the default: W·H = 4096², the server's default pixel cap
  EXPECT_EQ(png_size(thin), (std::pair<uint32_t, uint32_t>{65536, 256}));
  EXPECT_LT(thin.size(), 200u * 1024) << thin.size() << " bytes";
  const std::string small = solid_png(37, 5);
  const cv::Mat m = cv::imdecode(std::vector<uchar>(small.begin(), small.end()), cv::IMREAD_COLOR);
  ASSERT_EQ(m.cols, 37);
  ASSERT_EQ(m.rows, 5);
  const auto px = m.at<cv::Vec3b>(4, 36);
  EXPECT_EQ(px, cv::Vec3b(40, 90, 200));  // one colour everywhere
}

TEST(HostileLoad, PlanSpellingsAreDistinctSpellingsOfKeep64) {
  std::set<std::string> seen;
  for (int i = 0; i < 300; ++i) {
    const std::string p = plan_spelling(i);
    EXPECT_TRUE(seen.insert(p).second) << "repeated: " << p;
    ASSERT_EQ(p.rfind("divprune:", 0), 0u) << p;
    const auto k = p.find("keep=");
    ASSERT_NE(k, std::string::npos) << p;
    const auto end = p.find(',', k);
    const std::string digits = p.substr(k + 5, end == std::string::npos ? std::string::npos : end - k - 5);
    EXPECT_EQ(digits.size(), static_cast<size_t>(64 * (i / 3 + 1) + 2)) << p;  // the zero run grows with i
    EXPECT_EQ(std::stoi(digits), 64) << p;
    EXPECT_EQ(p.find("layer=0") != std::string::npos, i % 3 != 0) << p;
  }
}

TEST(HostileLoad, AttackChatBodyCarriesTheFieldsAsked) {
  const std::string image = std::string("\x89PNG\r\n\x1a\n", 8) + "not really";
  const auto j = json::parse(
      attack_chat_body(image, "What color?", "gate:keep=64,file=/etc/hostname", 7, 1e-300, 42, true));
  EXPECT_EQ(j["max_tokens"], 7);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["seed"], 42);
  EXPECT_FALSE(j.contains("stream"));                 // non-streamed: the disconnect attack relies on it
  EXPECT_EQ(j["temperature"].get<double>(), 1e-300);  // written and read back exactly, not rounded to 0
  EXPECT_EQ(j["vispco"]["plan"], "gate:keep=64,file=/etc/hostname");
  const auto& content = j["messages"][0]["content"];
  EXPECT_EQ(decode_data_url(content[0]["image_url"]["url"].get<std::string>()), image);
  EXPECT_EQ(content[1]["text"], "What color?");
  const auto plain = json::parse(attack_chat_body(image, "q", "", 3, -1, 1));
  EXPECT_FALSE(plain.contains("vispco"));
  EXPECT_FALSE(plain.contains("temperature"));
  EXPECT_FALSE(plain.contains("ignore_eos"));  // only the disconnect attack asks for every token
}

TEST(HostileLoad, AttackScheduleAndLoopbackCheck) {
  EXPECT_DOUBLE_EQ(attack_start_s(0, 8), 0);
  EXPECT_DOUBLE_EQ(attack_start_s(8, 8), 1);
  EXPECT_DOUBLE_EQ(attack_start_s(3, 0.5), 6);
  int started = 0;  // what a 20 s run at 8/s starts (attacks with start < 20 s)
  for (int i = 0; attack_start_s(i, 8) < 20; ++i) ++started;
  EXPECT_EQ(started, 160);
  for (const char* h : {"127.0.0.1", "127.1.2.3", "localhost", "::1"}) EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h : {"10.0.0.1", "128.0.0.1", "0.0.0.0", "127.0.0.256", "127.0.0.1x", "example.com", ""})
    EXPECT_FALSE(is_loopback_host(h)) << h;
}

TEST(HostileLoad, OptionsRefuseANonLoopbackHostAndBadSizes) {
  HostileLoadOptions o;
  o.normal.image_bytes = "x";
  EXPECT_NO_THROW(o.validate());
  o.normal.host = "192.168.1.10";
  EXPECT_THROW(o.validate(), InvalidArgument);
  o.normal.host = "127.0.0.1";
  o.huge_side = 4096 * 4096 + 1;  // no short side ≥ 1 keeps W·H at the cap
  EXPECT_THROW(o.validate(), InvalidArgument);
  o.huge_side = 65536;
  o.attack_seconds = 601;
  EXPECT_THROW(o.validate(), InvalidArgument);
}

HostileLoadResult result_with(int ok, int failed, double p99_ms, double rss_mb) {
  HostileLoadResult r;
  r.normal.ok = ok;
  r.normal.failed = failed;
  r.normal.latency_ms.p99 = p99_ms;
  r.server_peak_rss_mb = rss_mb;
  return r;
}

TEST(HostileLoad, VerdictArithmetic) {
  auto v = judge_hostile_load(200, result_with(100, 0, 300, 600), 1000);
  EXPECT_DOUBLE_EQ(v.p99_ratio, 1.5);
  EXPECT_TRUE(v.all_answered && v.p99_ok && v.rss_checked && v.rss_ok && v.pass);
  EXPECT_EQ(v.summary.rfind("PASS: 100 of 100", 0), 0u) << v.summary;

  v = judge_hostile_load(200, result_with(99, 1, 300, 600), 1000);  // one normal request failed
  EXPECT_FALSE(v.all_answered);
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.summary.rfind("FAIL: 99 of 100", 0), 0u) << v.summary;

  v = judge_hostile_load(200, result_with(100, 0, 401, 600), 0);  // P99 just over 2x; RSS not checked
  EXPECT_NEAR(v.p99_ratio, 2.005, 1e-12);
  EXPECT_FALSE(v.p99_ok);
  EXPECT_FALSE(v.rss_checked);
  EXPECT_FALSE(v.pass);
  EXPECT_TRUE(judge_hostile_load(200, result_with(100, 0, 400, 600), 0).pass);  // exactly 2x passes

  v = judge_hostile_load(200, result_with(100, 0, 300, 1001), 1000);  // RSS over the bound
  EXPECT_FALSE(v.rss_ok);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.summary.find("bound 1000 MB"), std::string::npos) << v.summary;

  EXPECT_FALSE(judge_hostile_load(0, result_with(100, 0, 300, 600), 0).pass);  // no baseline P99: no ratio
  EXPECT_FALSE(judge_hostile_load(200, result_with(0, 0, 0, 600), 0).all_answered);  // nothing sent
}

TEST(HostileLoad, TokensForGoneClientsAndJson) {
  HostileLoadResult r;
  r.server_generated_tokens = 500;
  r.normal.generated_tokens = 200;
  r.attacks["plan-spelling"].completion_tokens = 64;
  r.attacks["tiny-temperature"].completion_tokens = 36;
  EXPECT_DOUBLE_EQ(r.tokens_for_gone_clients(), 200);
  r.attacks["disconnect"].sent = 3;
  r.attacks["disconnect"].add("left");
  r.attacks["disconnect"].add("left");
  r.attacks["disconnect"].add("closed");
  const auto j = r.to_json();
  EXPECT_EQ(j["attacks"]["disconnect"]["issue_item"], 9);
  EXPECT_EQ(j["attacks"]["disconnect"]["answers"]["left"], 2);
  EXPECT_EQ(j["attacks"]["disconnect"]["answers"]["closed"], 1);
  EXPECT_EQ(j["attacks"]["plan-spelling"]["issue_item"], 4);
  EXPECT_DOUBLE_EQ(j["tokens_for_gone_clients"].get<double>(), 200);
  r.server_generated_tokens = 50;  // fewer than answered (a counter read mid-request): never negative
  EXPECT_DOUBLE_EQ(r.tokens_for_gone_clients(), 0);
  r.server_generated_tokens = -1;  // /metrics unreadable
  EXPECT_DOUBLE_EQ(r.tokens_for_gone_clients(), -1);
}

}  // namespace
}  // namespace vispco::serve
