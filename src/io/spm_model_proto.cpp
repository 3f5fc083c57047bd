// Protobuf wire encoding of a SentencePiece ModelProto (varint, 32-bit and length-delimited fields only;
// https://protobuf.dev/programming-guides/encoding/). The field numbers were checked against a model written
// by SentencePiece's own trainer (the bundled tokenizer.model); tests compare the encodings of both.
#include "io/spm_model_proto.h"

#include <cstring>

#include "core/errors.h"

namespace vispco::io {
namespace {

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void tag(std::string& out, uint32_t field, uint32_t wire) { varint(out, (uint64_t{field} << 3) | wire); }
/// int32 and enum fields: negative values are sign-extended to 64 bits (ten bytes), as protobuf does.
void int_field(std::string& out, uint32_t field, int64_t v) {
  tag(out, field, 0);
  varint(out, static_cast<uint64_t>(v));
}
void bytes_field(std::string& out, uint32_t field, const std::string& bytes) {
  tag(out, field, 2);
  varint(out, bytes.size());
  out += bytes;
}
void float_field(std::string& out, uint32_t field, float v) {
  tag(out, field, 5);
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}

}  // namespace

std::string serialize_spm_model(const SpmModelSpec& spec) {
  const auto n = static_cast<int64_t>(spec.pieces.size());
  if (n == 0) throw InvalidArgument("serialize_spm_model: no pieces");
  const auto check = [&](const char* what, int32_t id, bool may_be_none) {
    if ((id < 0 && !(may_be_none && id == -1)) || id >= n)
      throw InvalidArgument(std::string("serialize_spm_model: ") + what + " id " + std::to_string(id) +
                            " is outside the " + std::to_string(n) + " pieces");
  };
  check("unk", spec.unk_id, false);
  check("bos", spec.bos_id, true);
  check("eos", spec.eos_id, true);
  check("pad", spec.pad_id, true);
  std::string out;
  for (const auto& p : spec.pieces) {
    std::string m;
    bytes_field(m, 1, p.piece);
    float_field(m, 2, p.score);
    int_field(m, 3, static_cast<int32_t>(p.type));
    bytes_field(out, 1, m);
  }
  std::string trainer;
  int_field(trainer, 3, spec.bpe ? 2 : 1);
  int_field(trainer, 4, n);
  int_field(trainer, 35, spec.byte_fallback ? 1 : 0);
  int_field(trainer, 40, spec.unk_id);
  int_field(trainer, 41, spec.bos_id);
  int_field(trainer, 42, spec.eos_id);
  int_field(trainer, 43, spec.pad_id);
  // SentencePiece finds its special ids by these piece texts, so they must name the pieces at those ids.
  bytes_field(trainer, 45, spec.pieces[spec.unk_id].piece);
  if (spec.bos_id >= 0) bytes_field(trainer, 46, spec.pieces[spec.bos_id].piece);
  if (spec.eos_id >= 0) bytes_field(trainer, 47, spec.pieces[spec.eos_id].piece);
  if (spec.pad_id >= 0) bytes_field(trainer, 48, spec.pieces[spec.pad_id].piece);
  bytes_field(out, 2, trainer);
  std::string norm;
  bytes_field(norm, 1, "identity");
  int_field(norm, 3, spec.add_dummy_prefix ? 1 : 0);
  int_field(norm, 4, spec.remove_extra_whitespaces ? 1 : 0);
  int_field(norm, 5, 1);
  bytes_field(out, 3, norm);
  return out;
}

}  // namespace vispco::io
