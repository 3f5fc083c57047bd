#!/usr/bin/env node
// Renders a tokenizer_config.json's chat_template with Hugging Face's @huggingface/jinja (npm, 0.5.13, pinned by
// package-lock.json here): the external reference for vispco's built-in Qwen2-VL (ChatML) prompt builder.
// Usage: node chat_template.js TOKENIZER_CONFIG_JSON < request.json
//   stdin   {"messages": [...], "add_generation_prompt": true|false, ...}; any other key (e.g. add_vision_id) is
//           passed to the template as a variable too
//   stdout  the rendered prompt, byte for byte (no newline added)
// As transformers' apply_chat_template does, the config's special tokens (bos_token, eos_token, pad_token, unk_token)
// are template variables as well.
'use strict'
const fs = require('fs')
const { Template } = require('@huggingface/jinja')

function tokenText(t) {
  return t !== null && typeof t === 'object' ? t.content : t
}

function main() {
  if (process.argv.length !== 3) {
    process.stderr.write('usage: node chat_template.js TOKENIZER_CONFIG_JSON < request.json\n')
    process.exit(2)
  }
  const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  if (typeof config.chat_template !== 'string') {
    throw new Error(`${process.argv[2]} has no chat_template string`)
  }
  const request = JSON.parse(fs.readFileSync(0, 'utf8'))
  const context = {}
  for (const key of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
    if (config[key] !== undefined && config[key] !== null) context[key] = tokenText(config[key])
  }
  Object.assign(context, request)
  context.add_generation_prompt = Boolean(request.add_generation_prompt)
  process.stdout.write(new Template(config.chat_template).render(context))
}

try {
  main()
} catch (e) {
  process.stderr.write(`error: ${e.message}\n`)
  process.exit(1)
}
