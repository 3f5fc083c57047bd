#!/usr/bin/env node
// Encodes strings with Hugging Face's own tokenizers library (its Node binding, npm package `tokenizers` 0.23.2,
// pinned by package-lock.json here): the external reference that bpe_reference.py and vispco's tokenizer must match.
// Usage: node hf_tokenizers.js TOKENIZER_JSON < strings.json
//   stdin   a JSON array of strings
//   stdout  a JSON array of id lists (Tokenizer.fromFile(TOKENIZER_JSON).encode(s, null, {addSpecialTokens: false}))
// Install with `npm ci --prefix tests/reference/qwen_tokenizer` (scripts/install-deps.sh does it).
'use strict'
const fs = require('fs')
const { Tokenizer } = require('tokenizers')

async function main() {
  if (process.argv.length !== 3) {
    process.stderr.write('usage: node hf_tokenizers.js TOKENIZER_JSON < strings.json\n')
    process.exit(2)
  }
  const tokenizer = Tokenizer.fromFile(process.argv[2])
  const texts = JSON.parse(fs.readFileSync(0, 'utf8'))
  const out = []
  for (const text of texts) {
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false })
    out.push(Array.from(encoding.getIds()))
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch((e) => {
  process.stderr.write(`error: ${e.message}\n`)
  process.exit(1)
})
