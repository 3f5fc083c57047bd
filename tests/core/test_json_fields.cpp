// Tests of core/json_fields.h: one field list reads (rejecting unknown keys and wrong types) and writes a
// config struct; expected JSON written out by hand.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/json_fields.h"

namespace vispco {
namespace {

struct Opts {
  int steps = 10;
  double lr = 0.5;
  bool verbose = false;
  std::vector<int> keeps;
  std::map<std::string, int> weights;
  std::string mode = "fast";  // written upper-case, read lower-case (a converted field)
};

const JsonFields<Opts>& fields() {
  static const JsonFields<Opts> f("test options",
                                  {{"steps", &Opts::steps},
                                   {"lr", &Opts::lr},
                                   omitted_at_default("verbose", &Opts::verbose),
                                   omitted_at_default("keeps", &Opts::keeps),
                                   omitted_at_default("weights", &Opts::weights),
                                   converted(
                                       "mode", &Opts::mode,
                                       [](const nlohmann::json& v) {
                                         auto s = v.get<std::string>();
                                         if (s != "FAST" && s != "SLOW")
                                           throw InvalidArgument("mode must be FAST or SLOW");
                                         return s == "FAST" ? std::string("fast") : std::string("slow");
                                       },
                                       [](const std::string& m) { return m == "fast" ? "FAST" : "SLOW"; }),
                                   ignored<Opts>("comment")});
  return f;
}

std::string message_of(const nlohmann::json& j) {
  try {
    fields().read(j);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JsonFields, WritesAlwaysFieldsAndOnlyTheChangedOptionalOnes) {
  Opts o;
  EXPECT_EQ(fields().write(o), nlohmann::json::parse(R"({"steps": 10, "lr": 0.5, "mode": "FAST"})"));
  o.verbose = true;
  o.keeps = {64, 128};
  o.weights = {{"count", 3}};
  o.mode = "slow";
  EXPECT_EQ(fields().write(o), nlohmann::json::parse(R"({"steps": 10, "lr": 0.5, "verbose": true,
                                 "keeps": [64, 128], "weights": {"count": 3}, "mode": "SLOW"})"));
}

TEST(JsonFields, ReadsGivenKeysAndKeepsDefaultsForTheRest) {
  const Opts o = fields().read(nlohmann::json::parse(R"({"lr": 0.25, "keeps": [1, 2, 3], "mode": "SLOW",
                                                          "comment": "ignored"})"));
  EXPECT_EQ(o.steps, 10);
  EXPECT_DOUBLE_EQ(o.lr, 0.25);
  EXPECT_FALSE(o.verbose);
  EXPECT_EQ(o.keeps, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(o.mode, "slow");
  Opts back = fields().read(fields().write(o));
  EXPECT_EQ(back.keeps, o.keeps);
  EXPECT_EQ(back.mode, o.mode);
  EXPECT_FALSE(fields().write(o).contains("comment"));  // an ignored key is never written
}

TEST(JsonFields, UnknownKeysListTheValidOnesAndWrongTypesNameTheKey) {
  EXPECT_EQ(message_of({{"stpes", 3}}),
            "test options: unknown key 'stpes' (valid: steps, lr, verbose, keeps, weights, mode, comment)");
  EXPECT_EQ(message_of({{"steps", "many"}}), "test options: 'steps' has the wrong type (got \"many\")");
  EXPECT_EQ(message_of({{"mode", "MEDIUM"}}), "mode must be FAST or SLOW");  // a converter's own error
  EXPECT_EQ(message_of(nlohmann::json::array()), "test options: settings must be a JSON object (got [])");
  Opts o;
  try {
    fields().read({{"verbose", 1.5}}, o, "stage[2].");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), "test options: 'stage[2].verbose' has the wrong type (got 1.5)");
  }
  const std::string long_list(200, 'x');
  const auto msg = message_of({{"lr", long_list}});
  EXPECT_LT(msg.size(), 140u) << msg;  // a long value is cut in the message
}

TEST(JsonFields, AKeyListedTwiceIsAProgrammingError) {
  using Field = JsonField<Opts>;
  EXPECT_THROW(JsonFields<Opts>("x", {Field{"steps", &Opts::steps}, Field{"steps", &Opts::steps}}),
               std::logic_error);
}

}  // namespace
}  // namespace vispco
