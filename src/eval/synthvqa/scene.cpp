// SynthVQA vocabulary tables and the scene's JSON round trip.
#include "eval/synthvqa/scene.h"

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace vispco::eval::synthvqa {

const std::vector<ShapeInfo>& shape_table() {
  static const std::vector<ShapeInfo> t{
      {Shape::kCircle, "circle", "circles"},
      {Shape::kSquare, "square", "squares"},
      {Shape::kTriangle, "triangle", "triangles"},
      {Shape::kDiamond, "diamond", "diamonds"},
      {Shape::kStar, "star", "stars"},
      {Shape::kCross, "cross", "crosses"},
  };
  return t;
}

const std::vector<ColourInfo>& colour_table() {
  static const std::vector<ColourInfo> t{
      {Colour::kRed, "red", {215, 35, 35}},        {Colour::kGreen, "green", {35, 165, 60}},
      {Colour::kBlue, "blue", {40, 85, 225}},      {Colour::kYellow, "yellow", {245, 215, 30}},
      {Colour::kPurple, "purple", {135, 55, 185}}, {Colour::kOrange, "orange", {250, 135, 20}},
      {Colour::kPink, "pink", {250, 130, 200}},    {Colour::kBrown, "brown", {125, 75, 35}},
  };
  return t;
}

const std::vector<SizeInfo>& size_table() {
  static const std::vector<SizeInfo> t{{SizeClass::kSmall, "small", 14, 18},
                                       {SizeClass::kLarge, "large", 25, 32},
                                       {SizeClass::kTiny, "tiny", 6, 8}};
  return t;
}

const std::vector<InkInfo>& ink_table() {
  static const std::vector<InkInfo> t{
      {"black", {15, 15, 15}, {245, 245, 245}}, {"white", {250, 250, 250}, {10, 10, 10}},
      {"red", {225, 25, 25}, {250, 250, 250}},  {"blue", {30, 60, 235}, {250, 250, 250}},
      {"yellow", {250, 225, 20}, {10, 10, 10}},
  };
  return t;
}

const ShapeInfo& info(Shape s) { return shape_table().at(static_cast<size_t>(s)); }
const ColourInfo& info(Colour c) { return colour_table().at(static_cast<size_t>(c)); }
const SizeInfo& info(SizeClass s) { return size_table().at(static_cast<size_t>(s)); }

namespace {
// Looks a name up in a table; the error lists the valid names.
template <typename Table, typename Value>
Value parse_name(const Table& table, const std::string& name, const char* what,
                 Value Table::value_type::*field) {
  std::string valid;
  for (const auto& row : table) {
    if (name == row.name) return row.*field;
    valid += (valid.empty() ? "" : ", ") + std::string(row.name);
  }
  throw FormatError(std::string("unknown SynthVQA ") + what + " '" + name + "' (valid: " + valid + ")");
}

template <typename T>
T get_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key))
    throw FormatError(std::string("SynthVQA scene: missing field '") + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(std::string("SynthVQA scene: field '") + key + "' has the wrong type: " + e.what());
  }
}
}  // namespace

Shape parse_shape(const std::string& name) {
  return parse_name(shape_table(), name, "shape", &ShapeInfo::shape);
}
Colour parse_colour(const std::string& name) {
  return parse_name(colour_table(), name, "color", &ColourInfo::colour);
}
SizeClass parse_size(const std::string& name) {
  return parse_name(size_table(), name, "size", &SizeInfo::size);
}

nlohmann::json scene_to_json(const Scene& scene) {
  nlohmann::json objects = nlohmann::json::array();
  for (const SceneObject& o : scene.objects) {
    objects.push_back({{"shape", info(o.shape).name},
                       {"color", info(o.colour).name},
                       {"size", info(o.size).name},
                       {"x", o.x},
                       {"y", o.y},
                       {"radius", o.radius},
                       {"rgb", {o.rgb[0], o.rgb[1], o.rgb[2]}}});
  }
  nlohmann::json texts = nlohmann::json::array();
  for (const SceneText& t : scene.texts)
    texts.push_back({{"text", t.text},
                     {"color", t.color},
                     {"font_px", t.font_px},
                     {"x", t.x},
                     {"y", t.y},
                     {"w", t.w},
                     {"h", t.h}});
  return {{"width", scene.width},         {"height", scene.height}, {"background", scene.background},
          {"n_strokes", scene.n_strokes}, {"objects", objects},     {"texts", texts}};
}

Scene scene_from_json(const nlohmann::json& j) {
  Scene s;
  s.width = get_field<int>(j, "width");
  s.height = get_field<int>(j, "height");
  s.background = get_field<std::string>(j, "background");
  s.n_strokes = get_field<int>(j, "n_strokes");
  for (const auto& o : get_field<nlohmann::json>(j, "objects")) {
    SceneObject obj;
    obj.shape = parse_shape(get_field<std::string>(o, "shape"));
    obj.colour = parse_colour(get_field<std::string>(o, "color"));
    obj.size = parse_size(get_field<std::string>(o, "size"));
    obj.x = get_field<int>(o, "x");
    obj.y = get_field<int>(o, "y");
    obj.radius = get_field<int>(o, "radius");
    obj.rgb = get_field<std::array<uint8_t, 3>>(o, "rgb");
    s.objects.push_back(obj);
  }
  for (const auto& t : get_field<nlohmann::json>(j, "texts")) {
    s.texts.push_back({get_field<std::string>(t, "text"), get_field<std::string>(t, "color"),
                       get_field<int>(t, "font_px"), get_field<int>(t, "x"), get_field<int>(t, "y"),
                       get_field<int>(t, "w"), get_field<int>(t, "h")});
  }
  return s;
}

}  // namespace vispco::eval::synthvqa
