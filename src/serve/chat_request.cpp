// OpenAI chat-completion request parsing (see chat_request.h).
#include "serve/chat_request.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "model/chat_templates.h"
#include "serve/api_error.h"
#include "serve/data_url.h"

namespace vispco::serve {
namespace {

using nlohmann::json;

// The field's value as T, or a 400 naming the field and the expected type.
template <class T>
T get_field(const json& j, const char* name, const char* expected) {
  const auto& v = j.at(name);
  const bool ok = std::is_same_v<T, bool>          ? v.is_boolean()
                  : std::is_same_v<T, std::string> ? v.is_string()
                  : std::is_integral_v<T>          ? v.is_number_integer()
                                                   : v.is_number();
  if (!ok)
    throw bad_request(std::string("'") + name + "' must be " + expected + ", got a " + v.type_name(), name);
  return v.get<T>();
}

// One message's content: a string, or a list of text and image_url parts (the image decoded into
// r.image_bytes; a second image anywhere is refused before it is decoded).
ChatMessage parse_message(const json& m, size_t index, ChatRequest& r) {
  const std::string where = "message " + std::to_string(index);
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
    throw bad_request("each message must be an object with a string 'role' (" + where + " is not)",
                      "messages");
  ChatMessage out;
  out.role = m["role"].get<std::string>();
  if (!m.contains("content") || m["content"].is_null())
    throw bad_request(where + " (" + quoted_for_error(out.role) + ") has no 'content'", "messages");
  const auto& content = m["content"];
  if (content.is_string()) {
    out.parts = {{false, content.get<std::string>()}};
    out.plain = true;
    return out;
  }
  if (!content.is_array())
    throw bad_request(
        where + ": message content must be a string or a list of parts, got a " + content.type_name(),
        "messages");
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw bad_request(where + ": each content part must be an object with a string 'type'", "messages");
    const auto type = part["type"].get<std::string>();
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string())
        throw bad_request(where + ": a text part needs a string 'text'", "messages");
      out.parts.push_back({false, part["text"].get<std::string>()});
    } else if (type == "image_url") {
      if (out.role != "user")
        throw bad_request(
            where + " (" + quoted_for_error(out.role) + ") holds an image; the image goes in a user turn",
            "messages");
      if (!r.image_bytes.empty())
        throw bad_request(where + ": a conversation takes one image; this message holds another", "messages");
      const auto& iu = part.contains("image_url") ? part["image_url"] : json();
      const json url = iu.is_object() && iu.contains("url") ? iu["url"] : iu;
      if (!url.is_string())
        throw bad_request(where + ": an image_url part needs image_url.url, a string", "messages");
      try {
        r.image_bytes = decode_data_url(url.get<std::string>());
      } catch (const ApiError& e) {  // name the message
        throw ApiError(e.status(), where + ": " + e.what(), e.type(), e.param());
      }
      out.parts.push_back({true, ""});
    } else {
      throw bad_request(
          where + ": unsupported content part type " + quoted_for_error(type) + " (valid: text, image_url)",
          "messages");
    }
  }
  return out;
}

void parse_messages(const json& body, ChatRequest& r) {
  if (!body.contains("messages")) throw bad_request("missing required field 'messages'", "messages");
  const auto& msgs = body["messages"];
  if (!msgs.is_array() || msgs.empty()) throw bad_request("'messages' must be a non-empty list", "messages");
  constexpr size_t kMaxMessages = 256;
  if (msgs.size() > kMaxMessages)
    throw bad_request("'messages' holds " + std::to_string(msgs.size()) + " messages; at most " +
                          std::to_string(kMaxMessages) + " are taken",
                      "messages");
  for (size_t i = 0; i < msgs.size(); ++i) r.messages.push_back(parse_message(msgs[i], i, r));
  if (r.image_bytes.empty() && std::none_of(r.messages.begin(), r.messages.end(),
                                            [](const ChatMessage& m) { return message_images(m) > 0; }))
    throw bad_request(
        "the conversation needs one image part in a user turn ({\"type\": \"image_url\", \"image_url\": "
        "{\"url\": \"data:image/png;base64,...\"}})",
        "messages");
  try {
    check_conversation(r.messages);
  } catch (const Error& e) {
    throw bad_request(e.what(), "messages");
  }
  r.question = current_question(r.messages);
}

void parse_sampling(const json& body, const ChatLimits& limits, ChatRequest& r) {
  r.gen.max_new_tokens = limits.default_max_tokens;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(name) || body[name].is_null()) continue;
    const auto n = get_field<int64_t>(body, name, "an integer");
    if (n < 1 || n > limits.max_tokens_cap)
      throw bad_request(std::string("'") + name + "' must be in [1, " +
                            std::to_string(limits.max_tokens_cap) + "], got " + std::to_string(n),
                        name);
    r.gen.max_new_tokens = n;
  }
  if (body.contains("temperature") && !body["temperature"].is_null()) {
    r.gen.temperature = get_field<double>(body, "temperature", "a number");
    if (!(r.gen.temperature >= 0 && r.gen.temperature <= 2))
      throw bad_request("'temperature' must be in [0, 2], got " + std::to_string(r.gen.temperature),
                        "temperature");
  }
  if (body.contains("top_p") && !body["top_p"].is_null()) {
    r.gen.top_p = get_field<double>(body, "top_p", "a number");
    if (!(r.gen.top_p > 0 && r.gen.top_p <= 1))
      throw bad_request("'top_p' must be in (0, 1], got " + std::to_string(r.gen.top_p), "top_p");
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    r.gen.seed = static_cast<uint64_t>(get_field<int64_t>(body, "seed", "an integer"));
  } else {
    r.gen.seed = std::random_device{}();  // OpenAI: no seed, a fresh sample each time
  }
  if (body.contains("ignore_eos") && !body["ignore_eos"].is_null())  // vLLM's extension
    r.gen.stop_at_eos = !get_field<bool>(body, "ignore_eos", "a boolean");
  if (body.contains("n") && !body["n"].is_null() && get_field<int64_t>(body, "n", "an integer") != 1)
    throw bad_request("only n = 1 is supported", "n");
}

void parse_stop(const json& body, ChatRequest& r) {
  if (!body.contains("stop") || body["stop"].is_null()) return;
  const auto& s = body["stop"];
  if (s.is_string()) {
    r.stop = {s.get<std::string>()};
  } else if (s.is_array()) {
    for (const auto& x : s) {
      if (!x.is_string()) throw bad_request("'stop' must be a string or a list of strings", "stop");
      r.stop.push_back(x.get<std::string>());
    }
  } else {
    throw bad_request("'stop' must be a string or a list of strings", "stop");
  }
  if (r.stop.size() > 4) throw bad_request("'stop' takes at most 4 sequences", "stop");
  for (const auto& x : r.stop)
    if (x.empty()) throw bad_request("'stop' sequences must not be empty", "stop");
}

void parse_options(const json& body, ChatRequest& r) {
  if (body.contains("stream") && !body["stream"].is_null())
    r.stream = get_field<bool>(body, "stream", "a boolean");
  if (body.contains("stream_options") && body["stream_options"].is_object() &&
      body["stream_options"].contains("include_usage"))
    r.include_usage = get_field<bool>(body["stream_options"], "include_usage", "a boolean");
  const bool logprobs = body.contains("logprobs") && !body["logprobs"].is_null() &&
                        get_field<bool>(body, "logprobs", "a boolean");
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
    const auto n = get_field<int64_t>(body, "top_logprobs", "an integer");
    if (n < 0 || n > 20)
      throw bad_request("'top_logprobs' must be in [0, 20], got " + std::to_string(n), "top_logprobs");
    if (!logprobs) throw bad_request("'top_logprobs' needs \"logprobs\": true", "top_logprobs");
    r.top_logprobs = n;
  } else if (logprobs) {
    r.top_logprobs = 0;
  }
  if (body.contains("model") && !body["model"].is_null())
    r.model = get_field<std::string>(body, "model", "a string");
  if (body.contains("vispco") && !body["vispco"].is_null()) {
    const auto& v = body["vispco"];
    if (!v.is_object())
      throw bad_request("'vispco' must be an object such as {\"plan\": \"fastv:keep=64\"}", "vispco");
    if (v.contains("plan")) r.plan = get_field<std::string>(v, "plan", "a string");
    check_request_plan(r.plan);
    for (const char* key : {"max_accuracy_loss", "max_flops_ratio"}) {
      if (!v.contains(key) || v[key].is_null()) continue;
      if (!v[key].is_number())
        throw bad_request(std::string("'vispco.") + key + "' must be a number", "vispco");
      const double x = v[key].get<double>();
      (std::string(key) == "max_accuracy_loss" ? r.target.max_accuracy_loss : r.target.max_flops_ratio) = x;
    }
    try {
      r.target.validate();
    } catch (const Error& e) {
      throw bad_request(std::string("vispco.") + e.what(), "vispco");
    }
    if (!r.plan.empty() && !r.target.empty())
      throw bad_request(
          "'vispco' names a plan and a target: give one (the plan runs as named; a target picks "
          "the plan)",
          "vispco");
  }
}

}  // namespace

void check_request_plan(const std::string& plan) {
  constexpr size_t kMaxPlanChars = 1024;
  if (plan.size() > kMaxPlanChars)
    throw bad_request("'vispco.plan' is longer than " + std::to_string(kMaxPlanChars) + " characters",
                      "vispco");
  // One answer whatever the path: whether a file exists must not be visible to a client.
  const auto refuse = [] {
    throw bad_request(
        "'vispco.plan' may not name a file (a .json plan, file=…): a server's plans, gates and K "
        "predictors come from its own options and its model folder",
        "vispco");
  };
  if (plan.size() >= 5 && plan.compare(plan.size() - 5, 5, ".json") == 0) refuse();
  size_t start = 0;
  for (size_t i = 0; i <= plan.size(); ++i) {
    if (i < plan.size() && plan[i] != '+' && plan[i] != ',' && plan[i] != ':') continue;
    if (plan.compare(start, 5, "file=") == 0)
      refuse();  // gate:file=, keep=auto:file=, any scorer's file option
    start = i + 1;
  }
}

ChatRequest parse_chat_request(const std::string& body, const ChatLimits& limits) {
  json j;
  constexpr int kMaxDepth = 64;  // nlohmann's dump() recurses: a deeper body could exhaust a thread's stack
  const json::parser_callback_t depth_guard = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth)
      throw bad_request("JSON body nested deeper than " + std::to_string(kMaxDepth) + " levels");
    return true;
  };
  try {
    j = json::parse(body, depth_guard);
  } catch (const json::parse_error& e) {
    throw bad_request(std::string("malformed JSON body (") + std::to_string(e.byte) + " bytes in)");
  }
  if (!j.is_object()) throw bad_request("the request body must be a JSON object");
  ChatRequest r;
  parse_messages(j, r);
  parse_sampling(j, limits, r);
  parse_stop(j, r);
  parse_options(j, r);
  return r;
}

}  // namespace vispco::serve
