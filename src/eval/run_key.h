// The strings that key an evaluation in the result store (result_store.h RunKey): a cheap fingerprint of a
// model folder, the canonical spelling of a pruning plan and of the decoding settings. Two runs share stored
// results exactly when these strings are equal, so everything that changes a prediction must be in them.
#pragma once
#include <c10/core/ScalarType.h>

#include <string>

#include "model/generate.h"

namespace vispco::eval {

/// Version of the code that computes a stored result, part of every decoding key (decoding_key()). Bump it in
/// the same commit as any change that alters a prediction or a stored field for unchanged model, data, plan
/// and decoding settings — a scorer or selector fix, image preprocessing, prompt building, tokenisation,
/// decoding, answer scoring, a new field in SampleResult::extra — so that `eval` and `optimize` recompute
/// instead of silently reusing results the old code stored. Changes that provably leave every stored value
/// as it was (speed, refactoring, messages) do not bump it.
/// History: 1 — issue 45 (keys before it had no version: all of them are recomputed once).
inline constexpr int kResultsVersion = 1;

/// The files of a Hugging Face model folder, other than weights, that change a prediction: the model config,
/// the image preprocessing, and every tokenizer and chat-template file (added and special tokens change
/// prompt ids). model_folder_hash() hashes each one present, in this order.
inline constexpr const char* kModelKeyFiles[] = {"config.json",
                                                 "preprocessor_config.json",
                                                 "processor_config.json",
                                                 "tokenizer.model",
                                                 "tokenizer.json",
                                                 "tokenizer_config.json",
                                                 "special_tokens_map.json",
                                                 "added_tokens.json",
                                                 "vocab.json",
                                                 "merges.txt",
                                                 "chat_template.json",
                                                 "chat_template.jinja",
                                                 "model.safetensors.index.json"};

/// "sha256:<hex>" fingerprint of a Hugging Face model folder, cheap even for a 7B checkpoint (reads a few MB
/// at most): SHA-256 over each file of kModelKeyFiles that exists (name, size, bytes); then for every
/// *.safetensors file in name order except gate.safetensors (the learned gate's file, keyed with its plan
/// instead): its name, size, raw header bytes (dtypes, shapes, offsets) and, per tensor in header order, the
/// first and last 256 bytes of its data (all of it when smaller). Not hashed: the middle of each tensor's
/// data, so an edit that leaves the first and last 256 bytes of every tensor untouched goes unnoticed (any
/// training step or re-initialisation changes them).
/// A GGUF pair (model/model_source.h) hashes both files the same way: name, size, header bytes, each tensor's
/// first and last 256 bytes.
/// @throws IoError when the folder or a file cannot be read, FormatError for a truncated safetensors header.
std::string model_folder_hash(const std::string& dir);

/// Canonical plan string: "" and "none" (any case, surrounding spaces ignored) → "none"; any other string is
/// returned trimmed. Pruning plans are opaque here; a later issue gives them a canonical form.
std::string canonical_plan(const std::string& plan);

/// Canonical decoding key: compact JSON with sorted keys {"dtype": dtype_name, "generation":
/// to_json(gc), "prompt": "llava-1.5", "results_version": results_version}. The compute dtype is part of it
/// because bf16 and fp32 predictions differ; the device and batch size are not (batched generation equals
/// per-request generation). @param results_version the code's version, kResultsVersion everywhere but in
/// tests of what a bump does.
std::string decoding_key(const GenerationConfig& gc, c10::ScalarType dtype,
                         int results_version = kResultsVersion);

}  // namespace vispco::eval
