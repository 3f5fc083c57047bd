// Running the independent Python references of tests/reference/ (float64 PyTorch, sharing no code with
// vispco) from a test: the interpreter that has torch, a command's stdout, and the comparison of a vispco
// run with a LLaVA reference's output.
#pragma once
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/generate.h"

namespace vispco::testing {

/// Debian's python3 (where python3-torch lives) before whatever python3 is first on PATH; "" when neither
/// imports torch (the reference tests then skip).
inline std::string python_with_torch() {
  for (const char* py : {"/usr/bin/python3", "python3"})
    if (std::system((std::string(py) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return py;
  return "";
}

/// The stdout of a shell command.
inline std::string run_command(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while (p && (n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  return out;
}

/// Token ids as the references' IDS argument: decimal, comma-separated.
inline std::string comma_joined(const std::vector<int64_t>& ids) {
  std::string text;
  for (auto id : ids) text += (text.empty() ? "" : ",") + std::to_string(id);
  return text;
}

/// Checks a vispco run against a LLaVA reference's JSON (llava_reference.py, llava_next_reference.py:
/// image_embeds [N_v][D], first_logits [V], greedy [steps]) and prints the differences after `label`: the
/// image features within relative error 1e-5, the logits at the last prompt position within 1e-4, the greedy
/// tokens equal. @param embeds [N_v, D] float64 image features @param out generate() of one request with
/// record_logits.
inline void expect_matches_reference(const std::string& label, const nlohmann::json& ref,
                                     const at::Tensor& embeds, const GenerationOutput& out) {
  const auto rows = ref["image_embeds"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(static_cast<int64_t>(rows.size()), embeds.size(0));
  auto r = at::empty_like(embeds);
  for (size_t i = 0; i < rows.size(); ++i) r[static_cast<int64_t>(i)] = at::tensor(rows[i], at::kDouble);
  const double rel = ((embeds - r).norm() / r.norm()).item<double>();
  const auto logits = out.step_logits[0][0].to(at::kDouble);
  const auto ref_logits = at::tensor(ref["first_logits"].get<std::vector<double>>(), at::kDouble);
  const double max_abs = (logits - ref_logits).abs().max().item<double>();
  std::printf("%s: image features relative error %.2e, first logits max |diff| %.2e\n", label.c_str(), rel,
              max_abs);
  EXPECT_LE(rel, 1e-5);
  EXPECT_LE(max_abs, 1e-4);
  EXPECT_EQ(out.tokens[0], ref["greedy"].get<std::vector<int64_t>>());
}

}  // namespace vispco::testing
