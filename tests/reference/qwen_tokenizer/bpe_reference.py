#!/usr/bin/env python3
"""Independent reference of Hugging Face tokenizers' encoding of a Qwen2-style byte-level BPE tokenizer.json, for
vispco's tokenizer tests (tests/reference/qwen_README.md). Shares no code with vispco.

Written from the semantics of huggingface/tokenizers 0.2x (the Rust crate behind transformers' Qwen2TokenizerFast
and behind the npm package `tokenizers` 0.23.2 that hf_tokenizers.js runs), applied in its order:
  1. added tokens: the input is first split on the added tokens whose `normalized` is false, matched on the raw text,
     leftmost first and, at one position, the longest (AddedVocabulary, aho-corasick LeftmostLongest); each match
     becomes its own id and is never split, normalized or pre-tokenized. (Added tokens with normalized: true would be
     matched after normalization; Qwen2's have none and this reference refuses them.)
  2. normalizer NFC (unicodedata.normalize) on each remaining segment separately, so a combining mark right after an
     added token is not composed with anything before it;
  3. pre-tokenizer Sequence[Split(Regex, Isolated, invert false), ByteLevel(use_regex false)]: every regex match is
     a piece and so is every gap between matches (with Qwen2's pattern there are none); the regex runs through
     python3-regex, whose \\s is Unicode White_Space (as Oniguruma's is: U+0085, U+00A0, U+3000, ... but not
     U+001C..U+001F, which str.isspace() counts, nor U+180E, which PCRE2's UCP \\s counts), \\p{L} / \\p{N} its
     Unicode tables, (?i:...) full case folding ('ſ matches 's, as in Oniguruma);
  4. ByteLevel: each piece's UTF-8 bytes mapped through GPT-2's bytes_to_unicode table;
  5. model BPE (no dropout, ignore_merges false, byte_fallback false): starting from one symbol per byte, merge the
     adjacent pair of lowest merge rank, the leftmost of equal ranks, until no adjacent pair is a merge — the order
     tokenizers' priority queue of (rank, position) produces; then each symbol's vocab id. An unknown symbol is an
     error (all 256 byte symbols are in the vocabulary of a byte-level BPE).

Usage: python3 bpe_reference.py TOKENIZER_JSON < strings.json
  stdin   a JSON array of strings
  stdout  a JSON array of id lists, one per string (add_special_tokens false: nothing is added around them)
"""
import json
import sys
import unicodedata

import regex


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map: printable Latin-1 bytes map to themselves, the other 68
    bytes to U+0100 onward in byte order. Returns the list of (byte, char) in the table's own order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    pairs, n = [(b, chr(b)) for b in printable], 0
    for b in range(256):
        if b not in printable:
            pairs.append((b, chr(256 + n)))
            n += 1
    return pairs


BYTE_CHAR = dict(bytes_to_unicode())


class Tokenizer:
    def __init__(self, spec):
        if spec["normalizer"] is None or spec["normalizer"].get("type") != "NFC":
            raise SystemExit(f"expected normalizer NFC, got {spec['normalizer']}")
        pre = spec["pre_tokenizer"]
        steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
        if [s["type"] for s in steps] != ["Split", "ByteLevel"]:
            raise SystemExit(f"expected pre_tokenizer Sequence[Split, ByteLevel], got {[s['type'] for s in steps]}")
        split, byte_level = steps
        if split["behavior"] != "Isolated" or split.get("invert", False):
            raise SystemExit("expected Split behavior Isolated, invert false")
        if byte_level.get("add_prefix_space") or byte_level.get("use_regex", True):
            raise SystemExit("expected ByteLevel add_prefix_space false, use_regex false")
        self.pattern = regex.compile(split["pattern"]["Regex"])
        model = spec["model"]
        if model["type"] != "BPE" or model.get("byte_fallback") or model.get("ignore_merges") or model.get("dropout"):
            raise SystemExit("expected model BPE without dropout, byte_fallback or ignore_merges")
        self.vocab = model["vocab"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.rank = {pair: i for i, pair in enumerate(merges)}
        self.added = {}
        for t in spec["added_tokens"]:
            if t.get("normalized"):
                raise SystemExit(f"added token {t['content']!r} has normalized true: not supported here")
            if t.get("lstrip") or t.get("rstrip") or t.get("single_word"):
                raise SystemExit(f"added token {t['content']!r} uses lstrip/rstrip/single_word: not supported here")
            self.added[t["content"]] = t["id"]
        self.added_longest_first = sorted(self.added, key=len, reverse=True)

    def split_added(self, text):
        """[(segment, is_added)] with the added tokens cut out, leftmost first, longest at one position."""
        out, start, i = [], 0, 0
        while i < len(text):
            hit = next((t for t in self.added_longest_first if text.startswith(t, i)), None)
            if hit is None:
                i += 1
                continue
            if start < i:
                out.append((text[start:i], False))
            out.append((hit, True))
            i += len(hit)
            start = i
        if start < len(text):
            out.append((text[start:], False))
        return out

    def pre_tokenize(self, text):
        pieces, last = [], 0
        for m in self.pattern.finditer(text):
            if m.start() > last:
                pieces.append(text[last:m.start()])  # a gap is a piece too (Isolated)
            if m.end() > m.start():
                pieces.append(m.group())
            last = m.end()
        if last < len(text):
            pieces.append(text[last:])
        return pieces

    def bpe(self, word):
        symbols = list(word)
        while len(symbols) > 1:
            best, at = None, -1
            for j in range(len(symbols) - 1):
                r = self.rank.get((symbols[j], symbols[j + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, j
            if best is None:
                break
            symbols[at:at + 2] = [symbols[at] + symbols[at + 1]]
        return symbols

    def encode(self, text):
        ids = []
        for segment, is_added in self.split_added(text):
            if is_added:
                ids.append(self.added[segment])
                continue
            for piece in self.pre_tokenize(unicodedata.normalize("NFC", segment)):
                for symbol in self.bpe("".join(BYTE_CHAR[b] for b in piece.encode("utf-8"))):
                    if symbol not in self.vocab:
                        raise SystemExit(f"symbol {symbol!r} is not in the vocabulary")
                    ids.append(self.vocab[symbol])
        return ids


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        tok = Tokenizer(json.load(f))
    texts = json.load(sys.stdin)
    print(json.dumps([tok.encode(t) for t in texts]))


if __name__ == "__main__":
    main()
