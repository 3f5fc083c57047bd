// The only translation unit that includes SentencePiece: built into libvispco_spm.so (not vispco_lib) and
// dlopen()ed with RTLD_LOCAL | RTLD_DEEPBIND so its bundled protobuf-lite never meets LibTorch's protobuf.
// See spm_backend.h. Exceptions never cross the boundary: failures return as messages.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <exception>
#include <type_traits>
#include <unordered_map>

#include "io/spm_backend.h"

#define VISPCO_SPM_EXPORT extern "C" __attribute__((visibility("default")))

namespace vispco::io::detail {
namespace {

class Processor final : public SpmProcessor {
 public:
  bool load(const std::string& proto, std::string* error) override {
    return check(sp_.LoadFromSerializedProto(proto), error);
  }
  bool encode(const std::string& text, std::vector<int>* ids, std::string* error) const override {
    return check(sp_.Encode(text, ids), error);
  }
  bool decode(const std::vector<int>& ids, std::string* text, std::string* error) const override {
    return check(sp_.Decode(ids, text), error);
  }
  int piece_size() const override { return sp_.GetPieceSize(); }
  std::string id_to_piece(int id) const override { return sp_.IdToPiece(id); }
  float score(int id) const override { return sp_.GetScore(id); }
  int piece_type(int id) const override {
    if (sp_.IsUnknown(id)) return 2;
    if (sp_.IsControl(id)) return 3;
    if (sp_.IsUnused(id)) return 5;
    if (sp_.IsByte(id)) return 6;
    return 1;
  }
  int bos_id() const override { return sp_.bos_id(); }
  int eos_id() const override { return sp_.eos_id(); }
  int pad_id() const override { return sp_.pad_id(); }

 private:
  static bool check(const sentencepiece::util::Status& status, std::string* error) {
    if (status.ok()) return true;
    *error = status.ToString();
    return false;
  }
  sentencepiece::SentencePieceProcessor sp_;
};

/// Feeds an in-memory sentence list to the trainer.
class VectorSentenceIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<std::string>& sentences) : sentences_(sentences) {}
  bool done() const override { return pos_ >= sentences_.size(); }
  void Next() override { ++pos_; }
  const std::string& value() const override { return sentences_[pos_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& sentences_;
  size_t pos_ = 0;
};

}  // namespace
}  // namespace vispco::io::detail

VISPCO_SPM_EXPORT vispco::io::detail::SpmProcessor* vispco_spm_new_processor_v2() noexcept {
  try {
    return new vispco::io::detail::Processor();
  } catch (...) {
    return nullptr;
  }
}

VISPCO_SPM_EXPORT bool vispco_spm_train(const std::vector<std::string>* sentences,
                                        const std::vector<std::pair<std::string, std::string>>* kwargs,
                                        std::string* proto, std::string* error) noexcept {
  try {
    const std::unordered_map<std::string, std::string> args(kwargs->begin(), kwargs->end());
    vispco::io::detail::VectorSentenceIterator it(*sentences);
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, proto);
    if (status.ok()) return true;
    *error = status.ToString();
  } catch (const std::exception& e) {
    *error = e.what();
  } catch (...) {
    *error = "unknown exception in SentencePiece training";
  }
  return false;
}

// Compile-time check that the entry points match the types the loader casts them to.
static_assert(std::is_convertible_v<decltype(&vispco_spm_train), vispco::io::detail::SpmTrainFn>);
static_assert(
    std::is_convertible_v<decltype(&vispco_spm_new_processor_v2), vispco::io::detail::SpmNewProcessorFn>);
