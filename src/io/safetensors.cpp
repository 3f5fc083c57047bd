// Safetensors reader (mmap, zero-copy views, strict header validation) and writer, following the format of
// https://github.com/huggingface/safetensors (README "Format"; Rust `SafeTensors::validate`, `serialize`).
// The checkpoint-folder loader is in safetensors_checkpoint.cpp.
#include "io/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "core/json_file.h"
#include "io/mapped_file.h"

namespace vispco::io {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // 100 MB, as the reference implementation

/// The one table of supported dtypes: safetensors name, LibTorch dtype, bytes per element.
struct DtypeRow {
  const char* name;
  c10::ScalarType type;
  uint64_t size;
};
constexpr DtypeRow kDtypes[] = {
    {"F64", c10::kDouble, 8}, {"F32", c10::kFloat, 4}, {"F16", c10::kHalf, 2},  {"BF16", c10::kBFloat16, 2},
    {"I64", c10::kLong, 8},   {"I32", c10::kInt, 4},   {"I16", c10::kShort, 2}, {"I8", c10::kChar, 1},
    {"U8", c10::kByte, 1},    {"BOOL", c10::kBool, 1},
};

std::string dtype_names() {
  std::string out;
  for (const auto& row : kDtypes) out += (out.empty() ? "" : ", ") + std::string(row.name);
  return out;
}

const DtypeRow* find_dtype(const std::string& name) {
  for (const auto& row : kDtypes)
    if (name == row.name) return &row;
  return nullptr;
}

/// A JSON value (or a name) rendered on one line, cut to `max_chars`.
std::string one_line(const json& v, size_t max_chars = 80) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}
std::string json_quoted(const std::string& name) { return one_line(json(name)); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw FormatError("safetensors file '" + path + "': " + what);
}
[[noreturn]] void fail_field(const std::string& path, const std::string& tensor, const std::string& field,
                             const std::string& what) {
  fail(path, "tensor " + json_quoted(tensor) + " field '" + field + "': " + what);
}

/// Parses the header JSON; duplicate top-level names are an error (nlohmann would keep the last silently).
json parse_header(const std::string& path, const char* begin, const char* end) {
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  // Depth-limited (core/json_file.h): one_line() below dumps the header, and dump() recurses.
  const json header = parse_json(std::string_view(begin, static_cast<size_t>(end - begin)),
                                 "safetensors file '" + path + "': header", on_event);
  if (!header.is_object()) fail(path, "header: expected a JSON object, got " + one_line(header));
  if (!duplicate.empty()) fail(path, "header lists tensor " + json_quoted(duplicate) + " twice");
  return header;
}

/// Validates one header entry against the data section size; returns it parsed.
TensorInfo parse_entry(const std::string& path, const std::string& name, const json& v, uint64_t data_size) {
  if (!v.is_object())
    fail(path, "tensor " + json_quoted(name) + ": expected an object {dtype, shape, data_offsets}, got " +
                   one_line(v));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!v.contains(field)) fail_field(path, name, field, "missing");
  TensorInfo info;

  const json& dtype = v["dtype"];
  const DtypeRow* row = dtype.is_string() ? find_dtype(dtype.get<std::string>()) : nullptr;
  if (row == nullptr)
    fail_field(path, name, "dtype", "expected one of " + dtype_names() + ", got " + one_line(dtype));
  info.dtype = row->name;

  const json& shape = v["shape"];
  if (!shape.is_array()) fail_field(path, name, "shape", "expected an array of ints, got " + one_line(shape));
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      fail_field(path, name, "shape", "expected non-negative ints, got " + one_line(shape));
    overflow = overflow || __builtin_mul_overflow(numel, d.get<uint64_t>(), &numel);
    info.shape.push_back(d.get<int64_t>());
  }

  const json& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail_field(path, name, "data_offsets", "expected two non-negative ints, got " + one_line(offsets));
  info.begin = offsets[0].get<uint64_t>();
  info.end = offsets[1].get<uint64_t>();
  if (info.begin > info.end || info.end > data_size)
    fail_field(
        path, name, "data_offsets",
        "expected begin <= end <= data size " + std::to_string(data_size) + ", got " + one_line(offsets));

  uint64_t n_bytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, row->size, &n_bytes);
  if (overflow || n_bytes != info.end - info.begin)
    fail_field(path, name, "data_offsets",
               "expected " + (overflow ? std::string("a representable size") : std::to_string(n_bytes)) +
                   " bytes for shape " + one_line(shape) + " of " + row->name + ", got " +
                   std::to_string(info.end - info.begin) + " bytes " + one_line(offsets));
  return info;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& v) {
  if (!v.is_object()) fail(path, "field '__metadata__': expected an object of strings, got " + one_line(v));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string())
      fail(path,
           "field '__metadata__' key " + json_quoted(key) + ": expected a string, got " + one_line(value));
    out[key] = value.get<std::string>();
  }
  return out;
}

/// Non-empty byte ranges must not overlap (empty ranges hold no bytes and may sit anywhere).
void check_no_overlap(const std::string& path, const std::map<std::string, TensorInfo>& entries) {
  std::vector<std::pair<const std::string*, const TensorInfo*>> ranges;
  for (const auto& [name, info] : entries)
    if (info.end > info.begin) ranges.emplace_back(&name, &info);
  std::sort(ranges.begin(), ranges.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  const std::pair<const std::string*, const TensorInfo*>* furthest =
      nullptr;  // range reaching furthest so far
  for (const auto& r : ranges) {
    if (furthest != nullptr && r.second->begin < furthest->second->end)
      fail(path, "tensors " + json_quoted(*furthest->first) + " [" + std::to_string(furthest->second->begin) +
                     ", " + std::to_string(furthest->second->end) + ") and " + json_quoted(*r.first) + " [" +
                     std::to_string(r.second->begin) + ", " + std::to_string(r.second->end) +
                     ") overlap; expected disjoint data_offsets");
    if (furthest == nullptr || r.second->end > furthest->second->end) furthest = &r;
  }
}

}  // namespace

/// A private (copy-on-write) read-write mapping of a whole file; unmapped when the last holder goes.
struct SafetensorsFile::Mapping {
  std::shared_ptr<const MappedFile> file;
  uint64_t data_start = 0;  // 8 + header length
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto map = std::make_shared<Mapping>();
  map->file = MappedFile::open(path, "safetensors");
  const uint64_t file_size = map->file->size();
  if (file_size < 8)
    fail(path, "file is " + std::to_string(file_size) + " bytes, expected at least 8 (the header length)");

  uint64_t n_header = 0;
  std::memcpy(&n_header, map->file->data(), 8);  // little-endian host (static_assert above)
  if (n_header > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(n_header) + " exceeds the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes (100 MB); not a safetensors file?");
  if (n_header > file_size - 8)
    fail(path, "header length " + std::to_string(n_header) + " runs past the end of the file (" +
                   std::to_string(file_size) + " bytes, expected header length <= " +
                   std::to_string(file_size - 8) + "); truncated file?");
  map->data_start = 8 + n_header;
  const uint64_t data_size = file_size - map->data_start;

  const char* text = reinterpret_cast<const char*>(map->file->data() + 8);
  json header = parse_header(path, text, text + n_header);
  SafetensorsFile out;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__")
      out.metadata_ = parse_metadata(path, value);
    else
      out.entries_[name] = parse_entry(path, name, value, data_size);
  }
  check_no_overlap(path, out.entries_);
  out.map_ = std::move(map);
  return out;
}

const std::string& SafetensorsFile::path() const {
  static const std::string kNone;
  return map_ ? map_->file->path() : kNone;
}
const std::map<std::string, TensorInfo>& SafetensorsFile::entries() const { return entries_; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return metadata_; }
bool SafetensorsFile::contains(const std::string& name) const { return entries_.count(name) != 0; }

const TensorInfo& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw ConfigError("safetensors file '" + path() + "' has no tensor " + json_quoted(name) + " (it holds " +
                      std::to_string(entries_.size()) + " tensors)");
  return it->second;
}

void SafetensorsFile::release(const std::string& name) const {
  const TensorInfo& info = entry(name);
  map_->file->release_pages(map_->data_start + info.begin, info.end - info.begin);
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorInfo& info = entry(name);
  const DtypeRow* row = find_dtype(info.dtype);
  // Misaligned for its dtype (a header length not a multiple of 8, or an odd layout): view() copies.
  return MappedFile::view(map_->file, map_->data_start + info.begin, info.shape, row->type);
}

std::string safetensors_dtype(c10::ScalarType dtype) {
  for (const auto& row : kDtypes)
    if (row.type == dtype) return row.name;
  throw InvalidArgument(std::string("dtype ") + c10::toString(dtype) +
                        " has no safetensors equivalent; expected one of " + dtype_names());
}

c10::ScalarType torch_dtype(const std::string& safetensors_dtype) {
  const DtypeRow* row = find_dtype(safetensors_dtype);
  if (row == nullptr)
    throw FormatError("unknown safetensors dtype " + json_quoted(safetensors_dtype) + "; expected one of " +
                      dtype_names());
  return row->type;
}

void save_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  struct Item {
    const std::string* name;
    std::string dtype;
    at::Tensor data;  // CPU, contiguous
    uint64_t elem_size;
  };
  std::vector<Item> items;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__")
      throw InvalidArgument("cannot save '" + path + "': '__metadata__' is reserved, not a tensor name");
    if (!t.defined())
      throw InvalidArgument("cannot save '" + path + "': tensor " + json_quoted(name) + " is undefined");
    std::string dtype;
    try {
      dtype = safetensors_dtype(t.scalar_type());
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("cannot save tensor " + json_quoted(name) + " to '" + path + "': " + e.what());
    }
    items.push_back({&name, dtype, t.detach().to(at::kCPU).contiguous(), uint64_t(t.element_size())});
  }
  // Data layout: widest element first, then by name (as the reference `serialize`), so every tensor starts
  // at a multiple of its element size; the JSON header itself lists entries in name order.
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.elem_size > b.elem_size; });

  json header = json::object();
  uint64_t offset = 0;
  for (const Item& item : items) {
    const uint64_t n_bytes = uint64_t(item.data.numel()) * item.elem_size;
    header[*item.name] = {{"dtype", item.dtype},
                          {"shape", item.data.sizes().vec()},
                          {"data_offsets", {offset, offset + n_bytes}}};
    offset += n_bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::strict);
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n_header = text.size();

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError("cannot write '" + tmp + "': " + std::strerror(errno));
    out.write(reinterpret_cast<const char*>(&n_header), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const Item& item : items)
      out.write(static_cast<const char*>(item.data.data_ptr()),
                std::streamsize(item.data.numel() * item.elem_size));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw IoError("cannot write '" + tmp + "' (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw IoError("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
}

}  // namespace vispco::io
