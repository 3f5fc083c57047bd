// SentencePiece behind a plain C++ interface, implemented in the shared library libvispco_spm.so
// (spm_shim.cpp) that the tokenizer loads with dlopen(RTLD_LOCAL | RTLD_DEEPBIND). Why: Debian's
// libsentencepiece bundles protobuf-lite 3.14 and exports its symbols; linked into a process with LibTorch's
// libprotobuf 3.21 one copy interposes on the other and the process aborts at start-up (either link order).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace vispco::io::detail {

/// A SentencePieceProcessor. No third-party types cross this interface; errors come back as messages.
class SpmProcessor {
 public:
  virtual ~SpmProcessor() = default;
  /// Parses a serialized ModelProto. @return false with `*error` set when it is not a valid model.
  virtual bool load(const std::string& proto, std::string* error) = 0;
  /// Piece ids of `text` (no BOS). @return false with `*error` set on failure.
  virtual bool encode(const std::string& text, std::vector<int>* ids, std::string* error) const = 0;
  /// Text of `ids` (all must be in [0, piece_size())). @return false with `*error` set on failure.
  virtual bool decode(const std::vector<int>& ids, std::string* text, std::string* error) const = 0;
  virtual int piece_size() const = 0;
  /// The piece of `id` (in [0, piece_size())), e.g. "▁star" or a byte-fallback piece "<0x0A>".
  virtual std::string id_to_piece(int id) const = 0;
  /// The piece's score (BPE: merge priority).
  virtual float score(int id) const = 0;
  /// ModelProto.SentencePiece.Type of `id`: 2 unknown, 3 control, 5 unused, 6 byte, else 1 (SentencePiece's
  /// API cannot tell a user-defined piece from a normal one).
  virtual int piece_type(int id) const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  /// −1 when the model defines no pad piece.
  virtual int pad_id() const = 0;
};

/// `vispco_spm_new_processor_v2` (versioned with this interface): a new, empty processor owned by the caller
/// (delete through the base).
using SpmNewProcessorFn = SpmProcessor* (*)();
/// `vispco_spm_train`: SentencePieceTrainer::Train over `sentences` with trainer flags `kwargs`; writes the
/// serialized model to `*proto`. @return false with `*error` set on failure.
using SpmTrainFn = bool (*)(const std::vector<std::string>* sentences,
                            const std::vector<std::pair<std::string, std::string>>* kwargs,
                            std::string* proto, std::string* error);

inline constexpr const char* kSpmShimFile = "libvispco_spm.so";
inline constexpr const char* kSpmNewProcessorSymbol = "vispco_spm_new_processor_v2";
inline constexpr const char* kSpmTrainSymbol = "vispco_spm_train";

/// Entry points of the loaded shim.
struct SpmShim {
  SpmNewProcessorFn new_processor = nullptr;
  SpmTrainFn train = nullptr;
};

/// Loads libvispco_spm.so on first use (next to the running executable, then the build tree's copy, then
/// the dynamic loader's search path) and keeps it loaded for the life of the process. Thread-safe.
/// @throws Error naming every path tried and dlerror() when the shim cannot be loaded.
const SpmShim& spm_shim();

}  // namespace vispco::io::detail
