// GGUF reader: bounds-checked parse of the header from the memory-mapped file, then zero-copy tensor views.
// Format: ggml docs/gguf.md (versions 2 and 3); block sizes from ggml.c's type_traits; Q8_0 = {f16 d;
// int8 qs[32]} (ggml-common.h block_q8_0).
#include "io/gguf.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/errors.h"
#include "io/mapped_file.h"

namespace vispco::io {

static_assert(std::endian::native == std::endian::little, "GGUF data is little-endian");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;

/// Block size (elements) and bytes per block of a ggml type; {0, 0} when unknown.
struct TypeRow {
  uint32_t type;
  const char* name;
  uint64_t block, bytes;
};
constexpr TypeRow kTypes[] = {
    {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},    {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},  {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},       {25, "I16", 1, 2},
    {26, "I32", 1, 4},      {27, "I64", 1, 8},      {28, "F64", 1, 8},      {30, "BF16", 1, 2},
};
const TypeRow* find_type(uint32_t t) {
  for (const auto& r : kTypes)
    if (r.type == t) return &r;
  return nullptr;
}

/// Bounds-checked little-endian reads from the mapped header.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size, const std::string& path)
      : base_(base), size_(size), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError("GGUF file '" + path_ + "': " + what + " (at byte " + std::to_string(pos_) + ")");
  }
  template <typename T>
  T read(const char* what) {
    if (left() < sizeof(T)) fail(std::string("file ends inside ") + what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const auto n = read<uint64_t>(what);
    if (n > left()) fail(std::string(what) + ": string of " + std::to_string(n) + " bytes runs past the end");
    std::string s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }
  void skip(uint64_t n, const char* what) {
    if (n > left()) fail(std::string("file ends inside ") + what);
    pos_ += n;
  }

 private:
  const uint8_t* base_;
  uint64_t size_, pos_ = 0;
  const std::string& path_;
};

uint64_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;
  }
}

GgufType checked_type(Cursor& c, uint32_t raw, const std::string& key) {
  if (raw > static_cast<uint32_t>(GgufType::kF64))
    c.fail("key '" + key + "': unknown value type " + std::to_string(raw));
  return static_cast<GgufType>(raw);
}

/// Reads one scalar of type `t` into v (its `i`/`u`/`f` fields).
void read_scalar(Cursor& c, GgufType t, GgufValue& v) {
  switch (t) {
    case GgufType::kU8:
      v.u = c.read<uint8_t>("a value");
      break;
    case GgufType::kI8:
      v.i = c.read<int8_t>("a value");
      break;
    case GgufType::kU16:
      v.u = c.read<uint16_t>("a value");
      break;
    case GgufType::kI16:
      v.i = c.read<int16_t>("a value");
      break;
    case GgufType::kU32:
      v.u = c.read<uint32_t>("a value");
      break;
    case GgufType::kI32:
      v.i = c.read<int32_t>("a value");
      break;
    case GgufType::kU64:
      v.u = c.read<uint64_t>("a value");
      break;
    case GgufType::kI64:
      v.i = c.read<int64_t>("a value");
      break;
    case GgufType::kF32:
      v.f = c.read<float>("a value");
      break;
    case GgufType::kF64:
      v.f = c.read<double>("a value");
      break;
    case GgufType::kBool: {
      const auto b = c.read<uint8_t>("a value");
      if (b > 1) c.fail("a bool of value " + std::to_string(b));
      v.i = b;
      break;
    }
    default:
      c.fail("not a scalar type");
  }
  if (t == GgufType::kU8 || t == GgufType::kU16 || t == GgufType::kU32 || t == GgufType::kU64) {
    if (v.u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) v.i = static_cast<int64_t>(v.u);
  } else if (v.i >= 0) {
    v.u = static_cast<uint64_t>(v.i);
  }
}

GgufValue read_value(Cursor& c, GgufType t, const std::string& key, int depth) {
  GgufValue v;
  v.type = t;
  if (t == GgufType::kString) {
    v.s = c.string("a string value");
  } else if (t == GgufType::kArray) {
    if (depth >= kMaxArrayDepth)
      c.fail("key '" + key + "': arrays nested deeper than " + std::to_string(kMaxArrayDepth));
    v.array_type = checked_type(c, c.read<uint32_t>("an array type"), key);
    v.n = c.read<uint64_t>("an array length");
    const uint64_t min_elem = v.array_type == GgufType::kString  ? 8
                              : v.array_type == GgufType::kArray ? 12
                                                                 : scalar_size(v.array_type);
    if (v.n > c.left() / min_elem)
      c.fail("key '" + key + "': array of " + std::to_string(v.n) + " elements runs past the end");
    for (uint64_t k = 0; k < v.n; ++k) {
      if (v.array_type == GgufType::kString) {
        v.strings.push_back(c.string("an array string"));
      } else if (v.array_type == GgufType::kArray) {
        read_value(c, GgufType::kArray, key, depth + 1);  // parsed for its length, dropped
      } else {
        GgufValue e;
        e.type = v.array_type;
        read_scalar(c, v.array_type, e);
        if (e.is_float())
          v.floats.push_back(e.f);
        else
          v.ints.push_back(e.i);
      }
    }
  } else {
    read_scalar(c, t, v);
  }
  return v;
}

[[noreturn]] void config_fail(const std::string& path, const std::string& what) {
  throw ConfigError("GGUF file '" + path + "': " + what);
}

}  // namespace

bool GgufValue::is_integer() const {
  return type != GgufType::kF32 && type != GgufType::kF64 && type != GgufType::kString &&
         type != GgufType::kArray;
}
bool GgufValue::is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }

std::string gguf_type_name(GgufType t) {
  static const char* names[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(names) ? names[i] : "type " + std::to_string(i);
}

std::string ggml_type_name(uint32_t type) {
  const TypeRow* r = find_type(type);
  return r ? r->name : "type " + std::to_string(type);
}

struct GgufFile::Mapping {
  std::shared_ptr<const MappedFile> file;
};

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.map_ = std::make_shared<Mapping>();
  f.map_->file = MappedFile::open(path, "GGUF");
  const uint64_t size = f.map_->file->size();
  if (size < 24)
    throw FormatError("GGUF file '" + path + "' is " + std::to_string(size) +
                      " bytes, shorter than a GGUF header (24)");
  Cursor c(f.map_->file->data(), size, f.map_->file->path());
  if (c.read<uint32_t>("the magic") != kMagic) c.fail("not a GGUF file (magic is not \"GGUF\")");
  f.version_ = c.read<uint32_t>("the version");
  if (f.version_ == 1)
    c.fail("GGUF version 1 (32-bit counts) is not supported; re-convert with a current llama.cpp");
  if (f.version_ != 2 && f.version_ != 3)
    c.fail("unsupported GGUF version " + std::to_string(f.version_) + " (valid: 2, 3)");
  const auto n_tensors = c.read<uint64_t>("the tensor count");
  const auto n_kv = c.read<uint64_t>("the metadata count");
  if (n_kv > c.left() / 13)
    c.fail("metadata count " + std::to_string(n_kv) + " is larger than the file can hold");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.string("a metadata key");
    if (key.empty()) c.fail("an empty metadata key");
    const GgufType t = checked_type(c, c.read<uint32_t>("a value type"), key);
    GgufValue v = read_value(c, t, key, 0);
    if (!f.kv_.emplace(key, std::move(v)).second) c.fail("metadata key '" + key + "' appears twice");
  }
  if (n_tensors > c.left() / 24)
    c.fail("tensor count " + std::to_string(n_tensors) + " is larger than the file can hold");
  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->type != GgufType::kU32 || a->u == 0 || (a->u & (a->u - 1)) != 0)
      c.fail("general.alignment must be a UINT32 power of two, got " + gguf_type_name(a->type) + " " +
             std::to_string(a->u));
    f.alignment_ = a->u;
  }
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo ti;
    ti.name = c.string("a tensor name");
    if (ti.name.empty()) c.fail("an empty tensor name");
    const auto n_dims = c.read<uint32_t>("a tensor's dimension count");
    if (n_dims < 1 || n_dims > kMaxDims)
      c.fail("tensor '" + ti.name + "': " + std::to_string(n_dims) + " dimensions (valid: 1 to 4)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = c.read<uint64_t>("a tensor dimension");
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / numel ||
          numel * ne > (uint64_t{1} << 50))
        c.fail("tensor '" + ti.name + "': dimension " + std::to_string(d) + " of " + std::to_string(ne) +
               " (must be ≥ 1, element count < 2^50)");
      numel *= ne;
      ti.ne.push_back(static_cast<int64_t>(ne));
    }
    ti.shape.assign(ti.ne.rbegin(), ti.ne.rend());
    ti.type = c.read<uint32_t>("a tensor type");
    ti.offset = c.read<uint64_t>("a tensor offset");
    if (const TypeRow* r = find_type(ti.type)) {
      if (ti.ne[0] % static_cast<int64_t>(r->block) != 0)
        c.fail("tensor '" + ti.name + "': ne[0] = " + std::to_string(ti.ne[0]) + " is not a multiple of " +
               r->name + "'s block of " + std::to_string(r->block));
      ti.nbytes = numel / r->block * r->bytes;
    }
    if (ti.offset % f.alignment_ != 0)
      c.fail("tensor '" + ti.name + "': offset " + std::to_string(ti.offset) +
             " is not a multiple of the alignment " + std::to_string(f.alignment_));
    if (!f.by_name_.emplace(ti.name, f.tensors_.size()).second)
      c.fail("tensor '" + ti.name + "' appears twice");
    f.tensors_.push_back(std::move(ti));
  }
  f.data_start_ = (c.pos() + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  if (f.data_start_ > size && !f.tensors_.empty())
    c.fail("the data section starts after the end of the file");
  const uint64_t data_size = size > f.data_start_ ? size - f.data_start_ : 0;
  std::vector<const GgufTensorInfo*> order;
  for (const auto& t : f.tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      c.fail("tensor '" + t.name + "': bytes [" + std::to_string(t.offset) + ", " +
             std::to_string(t.offset + t.nbytes) + ") run past the data section of " +
             std::to_string(data_size) + " bytes");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < order.size(); ++k)
    if (order[k - 1]->offset + order[k - 1]->nbytes > order[k]->offset)
      c.fail("tensors '" + order[k - 1]->name + "' and '" + order[k]->name + "' overlap");
  return f;
}

const std::string& GgufFile::path() const { return map_->file->path(); }

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) config_fail(path(), "missing metadata key '" + key + "'");
  if (!v->is_integer() || v->type == GgufType::kBool)
    config_fail(path(), "key '" + key + "': expected an integer, got " + gguf_type_name(v->type));
  if (v->type == GgufType::kU64 && v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    config_fail(path(), "key '" + key + "': " + std::to_string(v->u) + " is out of range");
  return v->i;
}
int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  return find(key) ? get_int(key) : fallback;
}
double GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) config_fail(path(), "missing metadata key '" + key + "'");
  if (v->is_float()) return v->f;
  if (v->is_integer() && v->type != GgufType::kBool) return static_cast<double>(v->i);
  config_fail(path(), "key '" + key + "': expected a number, got " + gguf_type_name(v->type));
}
double GgufFile::get_float(const std::string& key, double fallback) const {
  return find(key) ? get_float(key) : fallback;
}
bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  if (v->type != GgufType::kBool)
    config_fail(path(), "key '" + key + "': expected a BOOL, got " + gguf_type_name(v->type));
  return v->i != 0;
}
std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) config_fail(path(), "missing metadata key '" + key + "'");
  if (v->type != GgufType::kString)
    config_fail(path(), "key '" + key + "': expected a STRING, got " + gguf_type_name(v->type));
  return v->s;
}
std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return find(key) ? get_string(key) : fallback;
}

const GgufTensorInfo* GgufFile::tensor_info(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

at::Tensor GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = tensor_info(name);
  if (!t)
    config_fail(path(),
                "no tensor '" + name + "' (it holds " + std::to_string(tensors_.size()) + " tensors)");
  uint8_t* data = map_->file->data() + data_start_ + t->offset;
  c10::ScalarType dtype;
  switch (static_cast<GgmlType>(t->type)) {
    case GgmlType::kF32:
      dtype = at::kFloat;
      break;
    case GgmlType::kF16:
      dtype = at::kHalf;
      break;
    case GgmlType::kBF16:
      dtype = at::kBFloat16;
      break;
    case GgmlType::kQ8_0: {
      // block_q8_0: f16 scale d, then 32 int8 quants; x = d · q.
      const int64_t n_blocks = static_cast<int64_t>(t->nbytes / 34);
      auto raw = at::from_blob(data, {n_blocks, 34}, at::kByte);
      auto d = raw.narrow(1, 0, 2).contiguous().view(at::kHalf).to(at::kFloat);   // [n_blocks, 1]
      auto q = raw.narrow(1, 2, 32).contiguous().view(at::kChar).to(at::kFloat);  // [n_blocks, 32]
      return (q * d).reshape(t->shape);
    }
    default:
      config_fail(path(), "tensor '" + name + "' is " + ggml_type_name(t->type) +
                              "; vispco reads F32, F16, BF16 and Q8_0 (re-convert with --outtype f16, or "
                              "llama-quantize to Q8_0)");
  }
  return MappedFile::view(map_->file, data_start_ + t->offset, t->shape, dtype);  // copies when misaligned
}

}  // namespace vispco::io
