// Micro training recipe shared by the training tests: SynthVQA's 336 px (N_v = 576) at tiny widths,
// tokenizer from 20 scenes.
#pragma once
#include "train/recipe.h"

namespace vispco::train::testing_micro {

inline TrainRecipe micro_recipe() {
  TrainRecipe r;
  auto& c = r.model;
  c.vision = {.hidden_size = 16,
              .intermediate_size = 32,
              .num_hidden_layers = 2,
              .num_attention_heads = 2,
              .image_size = 336,
              .patch_size = 14};
  c.text.vocab_size = 448;
  c.text.hidden_size = 32;
  c.text.intermediate_size = 64;
  c.text.num_hidden_layers = 2;
  c.text.num_attention_heads = 2;
  c.text.num_key_value_heads = 1;
  c.text.max_position_embeddings = 1024;
  c.image_token_index = 400;
  r.tokenizer_vocab = 400;
  r.tokenizer_images = 20;
  r.vision = {.steps = 8, .batch = 2, .lr = 5e-3, .warmup = 0.0};
  r.decoder = {.steps = 6, .batch = 2, .lr = 5e-3, .warmup = 0.0};
  r.turns = 3;
  return r;
}

}  // namespace vispco::train::testing_micro
