// OpenAI chat-completion request parsing: accepted shapes and every refusal's status and field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/chat_request.h"
#include "serve/data_url.h"

namespace vispco::serve {
namespace {

using nlohmann::json;

// "hello" in base64 (RFC 4648 test vector style, computed by hand: aGVs bG8=).
const std::string kHelloUrl = "data:image/png;base64,aGVsbG8=";

json request_with(const json& content) {
  return {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", content}}}}};
}

json parts(const std::string& text, const std::string& url = kHelloUrl) {
  return json::array(
      {{{"type", "text"}, {"text", text}}, {{"type", "image_url"}, {"image_url", {{"url", url}}}}});
}

int status_of(const json& body, std::string* param = nullptr) {
  try {
    parse_chat_request(body.dump());
  } catch (const ApiError& e) {
    if (param) *param = e.param();
    return e.status();
  }
  return 200;
}

TEST(DataUrl, DecodesBase64AndDropsPadding) {
  EXPECT_EQ(decode_data_url(kHelloUrl), "hello");
  EXPECT_EQ(decode_data_url("data:image/png;base64,aGk="), "hi");
  EXPECT_EQ(decode_data_url("data:image/png;base64,YWJj"), "abc");
}

TEST(DataUrl, EncodesRfc4648TestVectors) {
  // RFC 4648 §10.
  EXPECT_EQ(encode_base64(""), "");
  EXPECT_EQ(encode_base64("f"), "Zg==");
  EXPECT_EQ(encode_base64("fo"), "Zm8=");
  EXPECT_EQ(encode_base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(decode_data_url("data:image/png;base64," + encode_base64("fooba")), "fooba");
}

TEST(DataUrl, RefusesRemoteUrlsAndMalformedBase64) {
  for (const char* url : {"https://example.com/cat.png", "http://x/y.png", "file:///etc/passwd",
                          "data:image/png,raw", "data:image/png;base64,abc", "data:image/png;base64,a$c="}) {
    try {
      decode_data_url(url);
      ADD_FAILURE() << url << " accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << url;
    }
  }
}

TEST(ChatRequest, ParsesPartsAndSamplingFields) {
  json body = request_with(parts("How many cubes?"));
  body["max_tokens"] = 7;
  body["temperature"] = 0.5;
  body["top_p"] = 0.9;
  body["seed"] = 11;
  body["stop"] = "\n";
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  body["vispco"] = {{"plan", "fastv:keep=8"}};
  const auto r = parse_chat_request(body.dump());
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.question, "How many cubes?");
  EXPECT_EQ(r.image_bytes, "hello");
  EXPECT_EQ(r.gen.max_new_tokens, 7);
  EXPECT_DOUBLE_EQ(r.gen.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.gen.top_p, 0.9);
  EXPECT_EQ(r.gen.seed, 11u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.plan, "fastv:keep=8");
}

TEST(ChatRequest, DefaultsAndMaxCompletionTokens) {
  ChatLimits lim;
  lim.default_max_tokens = 9;
  auto r = parse_chat_request(request_with(parts("q")).dump(), lim);
  EXPECT_EQ(r.gen.max_new_tokens, 9);
  EXPECT_EQ(r.gen.temperature, 0.0);
  EXPECT_EQ(r.top_logprobs, -1);
  EXPECT_FALSE(r.stream);
  json b = request_with(parts("q"));
  b["max_completion_tokens"] = 4;
  b["logprobs"] = true;
  r = parse_chat_request(b.dump(), lim);
  EXPECT_EQ(r.gen.max_new_tokens, 4);
  EXPECT_EQ(r.top_logprobs, 0);
  // Two text parts join with a newline; the image may come first.
  json two = json::array({{{"type", "image_url"}, {"image_url", {{"url", kHelloUrl}}}},
                          {{"type", "text"}, {"text", "a"}},
                          {{"type", "text"}, {"text", "b"}}});
  EXPECT_EQ(parse_chat_request(request_with(two).dump()).question, "a\nb");
}

TEST(ChatRequest, RefusesBadRequestsWith400NamingTheField) {
  std::string param;
  EXPECT_EQ(status_of(json("not an object")), 400);
  try {
    parse_chat_request("{\"messages\": [");
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("malformed JSON"), std::string::npos);
  }
  EXPECT_EQ(status_of(json::object(), &param), 400);
  EXPECT_EQ(param, "messages");
  EXPECT_EQ(status_of(request_with("text only, no image")), 400);
  auto two_images = parts("q");
  two_images.push_back({{"type", "image_url"}, {"image_url", {{"url", kHelloUrl}}}});
  EXPECT_EQ(status_of(request_with(two_images)), 400);
  json sys = request_with(parts("q"));
  sys["messages"][0]["role"] = "system";  // a system message with the image and no user turn
  EXPECT_EQ(status_of(sys), 400);
  json two_users = request_with(parts("q"));  // user, user: turns must alternate
  two_users["messages"].push_back({{"role", "user"}, {"content", "again"}});
  EXPECT_EQ(status_of(two_users), 400);
  EXPECT_EQ(status_of(request_with(parts("q", "https://example.com/a.png"))), 400);
  const std::vector<std::pair<std::string, json>> bad = {{"max_tokens", 0},
                                                         {"max_tokens", 100000},
                                                         {"max_tokens", "5"},
                                                         {"temperature", -1},
                                                         {"temperature", 3},
                                                         {"top_p", 0},
                                                         {"top_p", 1.5},
                                                         {"n", 2},
                                                         {"top_logprobs", 21},
                                                         {"stop", json::array({1})},
                                                         {"stop", json::array({"a", "b", "c", "d", "e"})},
                                                         {"stop", ""},
                                                         {"stream", "yes"},
                                                         {"vispco", "fastv"}};
  for (const auto& [field, value] : bad) {
    json b = request_with(parts("q"));
    b[field] = value;
    if (field == "top_logprobs") b["logprobs"] = true;
    EXPECT_EQ(status_of(b, &param), 400) << field << " = " << value.dump();
    EXPECT_EQ(param, field) << field;
  }
  json no_lp = request_with(parts("q"));
  no_lp["top_logprobs"] = 2;  // without "logprobs": true
  EXPECT_EQ(status_of(no_lp, &param), 400);
  EXPECT_EQ(param, "top_logprobs");
}

TEST(ChatRequest, RefusesDeepNestingAndReportsTypesNotValues) {
  std::string deep = "{\"model\": " + std::string(100, '[') + std::string(100, ']') + "}";
  try {
    parse_chat_request(deep);
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("nested deeper"), std::string::npos) << e.what();
  }
  json b = request_with(parts("q"));
  b["temperature"] = "\xff";  // a string holding invalid UTF-8 is named by its type, never echoed
  try {
    parse_chat_request(b.dump(-1, ' ', false, json::error_handler_t::replace));
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(std::string(e.what()), "'temperature' must be a number, got a string");
  }
}

TEST(ChatRequest, SeedAndIgnoreEos) {
  json b = request_with(parts("q"));
  EXPECT_TRUE(parse_chat_request(b.dump()).gen.stop_at_eos);
  b["ignore_eos"] = true;
  b["seed"] = 5;
  const auto r = parse_chat_request(b.dump());
  EXPECT_FALSE(r.gen.stop_at_eos);
  EXPECT_EQ(r.gen.seed, 5u);
}

TEST(ApiError, OpenAiErrorObject) {
  const auto j = ApiError(503, "queue full", "server_error").to_json();
  EXPECT_EQ(j["error"]["message"], "queue full");
  EXPECT_EQ(j["error"]["type"], "server_error");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_EQ(bad_request("x", "top_p").to_json()["error"]["param"], "top_p");
}

TEST(RequestPlan, FileNamingPlansAreRefusedAndOthersPass) {
  const auto refused = [](const std::string& plan) {
    try {
      check_request_plan(plan);
    } catch (const ApiError& e) {
      return e.status() == 400 && std::string(e.what()).find("may not name a file") != std::string::npos;
    }
    return false;
  };
  for (const std::string p :
       {"/etc/plan.json", "x.json", "gate:keep=4,file=/etc/hostname", "gate:file=g.safetensors,keep=4",
        "fastv:keep=auto:file=/dev/zero", "fastv:layer=2,keep=64+gate:keep=8,file=x"})
    EXPECT_TRUE(refused(p)) << p;
  for (const std::string p : {"", "none", "fastv:keep=64", "gate:keep=64", "divprune:keep=auto",
                              "fastv:layer=2,keep=64,select=mmr,lambda=0.7", "profile=x"})
    EXPECT_NO_THROW(check_request_plan(p)) << p;
  EXPECT_THROW(check_request_plan("fastv:keep=" + std::string(2000, '0') + "4"),
               ApiError);  // over 1,024 chars
}

}  // namespace
}  // namespace vispco::serve

namespace vispco::serve {
namespace {

json msg(const std::string& role, const json& content) { return {{"role", role}, {"content", content}}; }

std::string message_of(const json& body) {
  try {
    parse_chat_request(body.dump());
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "messages");
    return e.what();
  }
  return "";
}

TEST(ChatRequest, TakesAConversationWithTheImageInAUserTurn) {
  const json body = {
      {"messages",
       {msg("system", "Be brief."), msg("user", parts("first question")), msg("assistant", "a red cube"),
        msg("user",
            json::array({{{"type", "text"}, {"text", "and"}}, {{"type", "text"}, {"text", "its size?"}}}))}}};
  const auto r = parse_chat_request(body.dump());
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_TRUE(r.messages[0].plain);
  EXPECT_EQ(r.messages[0].parts.at(0).text, "Be brief.");
  ASSERT_EQ(r.messages[1].parts.size(), 2u);  // client order kept: text, image
  EXPECT_FALSE(r.messages[1].parts[0].image);
  EXPECT_TRUE(r.messages[1].parts[1].image);
  EXPECT_EQ(r.messages[2].parts.at(0).text, "a red cube");
  EXPECT_EQ(r.question, "and\nits size?");  // the last user turn, its text parts joined by "\n"
  EXPECT_EQ(r.image_bytes, "hello");
}

TEST(ChatRequest, RefusesConversationsNoTemplateTakesWithOneLine) {
  const json image = parts("q");
  const std::vector<std::pair<json, std::string>> bad = {
      {json::array({msg("user", "hi"), msg("assistant", parts("a")), msg("user", "q")}), "user turn"},
      {json::array({msg("user", image), msg("assistant", "a"), msg("user", image)}), "one image"},
      {json::array({msg("assistant", "a"), msg("user", image)}), "alternate"},
      {json::array({msg("user", image), msg("system", "late"), msg("user", "q")}), "only come first"},
      {json::array({msg("user", image), msg("assistant", "a")}), "last message"},
      {json::array({msg("user", image), msg("tool", "x"), msg("user", "q")}), "unknown role"},
      {json::array({msg("system", "s"), msg("user", "no image")}), "one image"},
      {json::array({msg("user", image), msg("assistant", nullptr), msg("user", "q")}), "no 'content'"}};
  for (const auto& [messages, words] : bad) {
    const auto what = message_of({{"messages", messages}});
    EXPECT_NE(what.find(words), std::string::npos) << messages.dump() << " → " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;  // one line
  }
}

}  // namespace
}  // namespace vispco::serve
