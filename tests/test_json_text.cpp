// The strict JSON parser for configs and safetensors headers (src/core/json_text.h).
#include "core/json_text.h"

#include "test_errors.h"

namespace sg::test {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

json parse(const std::string& text, JsonLimits limits = {}) { return parse_json_text<json>(text, "config 'c.json'", limits); }

TEST(JsonText, ParsesWhatNlohmannParses) {
  const std::string text = R"({"model": {"layers": [{"type": "dense", "units": 10}, 1.5, -3, 18446744073709551615,
                               true, null, "s\"q"]}, "e": {}, "a": []})";
  EXPECT_EQ(parse(text), json::parse(text));
  // ordered_json keeps the order of the keys (safetensors ties between empty tensors).
  const ordered_json o = parse_json_text<ordered_json>(R"({"b": 1, "a": 2, "c": {"z": 0, "y": 1}})", "h");
  EXPECT_EQ(o.dump(), R"({"b":1,"a":2,"c":{"z":0,"y":1}})");
}

TEST(JsonText, DuplicateKeysNameTheKeyItsPathAndBothPlaces) {
  EXPECT_ERROR(parse("{\"train\": {\"steps\": 5,\n  \"steps\": 7}}"),
               "config 'c.json': line 2, column 3 (train.steps): the key 'steps' appears more than once (first at line 1, "
               "column 12)");
  EXPECT_ERROR(parse(R"({"model": 1, "model": 2})"), "line 1, column 14 (model): the key 'model' appears more than once");
  // The same key in sibling objects is fine.
  EXPECT_NO_THROW(parse(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 1}, {"k": 2}]})"));
  // A key with an escaped quote is located at its opening quote.
  EXPECT_ERROR(parse(R"({"a\"b": 1, "a\"b": 2})"), "line 1, column 13 (a\"b)", "(first at line 1, column 2)");
}

TEST(JsonText, NestingIsBounded) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_ERROR(parse(deep), "config 'c.json': line 1, column 65 ([0][0]", "nested more than 64 levels deep");
  std::string objects = "{\"model\": ";
  for (int i = 0; i < 70; ++i) objects += "{\"a\": ";
  EXPECT_ERROR(parse(objects), "(model.a.a.a", "...", "nested more than 64 levels deep");
  EXPECT_NO_THROW(parse(std::string(64, '[') + std::string(64, ']')));
  JsonLimits shallow;
  shallow.max_depth = 2;
  EXPECT_ERROR(parse(R"({"a": {"b": {}}})", shallow), "line 1, column 13 (a.b): nested more than 2 levels deep");
}

TEST(JsonText, NumbersOutOfRangeSayWhere) {
  EXPECT_ERROR(parse("{\"optimizer\": {\"lr\": 1e400}}"),
               "config 'c.json': line 1, column 22 (optimizer.lr): the number 1e400 is out of range");
  EXPECT_ERROR(parse("[1, -1e999]"), "line 1, column 5 ([1]): the number -1e999 is out of range");
}

TEST(JsonText, SyntaxErrorsSayLineColumnAndPath) {
  EXPECT_ERROR(parse("{\"model\": {\"layers\": [1,]}}"),
               "config 'c.json' is not valid JSON: line 1, column 25 (model.layers[1]): syntax error");
  EXPECT_ERROR(parse("{} x"), "is not valid JSON: line 1, column 4: syntax error", "expected end of input");
  EXPECT_ERROR(parse(""), "is not valid JSON: line 1, column 1: syntax error");
  EXPECT_ERROR(parse(std::string("{}\0", 3)), "is not valid JSON: a NUL byte at offset 2 (line 1, column 3)");
}

TEST(JsonText, SizeIsBounded) {
  JsonLimits small;
  small.max_bytes = 16;
  EXPECT_ERROR(parse(R"({"a": "0123456789abcdef"})", small), "config 'c.json' is 25 bytes; at most 16 bytes of JSON");
}

}  // namespace
}  // namespace sg::test
