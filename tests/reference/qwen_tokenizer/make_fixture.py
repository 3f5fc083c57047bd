#!/usr/bin/env python3
"""Writes the small Qwen2-style byte-level BPE tokenizer the Qwen tokenizer tests use (tokenizer.json and
tokenizer_config.json beside this file). Deterministic: the same files on every run.

tokenizer.json has the structure of Qwen2's (Qwen/Qwen2-VL-7B-Instruct's, huggingface/tokenizers format "1.0"):
normalizer NFC; pre_tokenizer Sequence[Split(Qwen2's regex, Isolated), ByteLevel(use_regex false)]; post_processor
and decoder ByteLevel; model BPE with the 256 byte symbols (GPT-2's bytes_to_unicode, ids in that table's order)
then the merged tokens (ids in merge order), merges as "a b" strings; added tokens <|endoftext|> ... <|video_pad|>
(special, normalized false) with ids right after the vocabulary, as Qwen2's 151643.. are. The merges are learned
here by plain BPE training on CORPUS below (its last line puts U+180E MONGOLIAN VOWEL SEPARATOR, which is not
Unicode White_Space and so not \\s in Oniguruma, in merges next to '!', so that a regex engine whose \\s includes it
-- PCRE2 with PCRE2_UCP does, through \\h -- splits those pieces differently and the corpus shows it), pre-tokenized exactly as encoding does (bpe_reference.py): each step
merges the adjacent pair with the highest count over the corpus's pieces, ties broken by the smaller pair in code
point order, until N_MERGES merges.

tokenizer_config.json follows Qwen/Qwen2-VL-7B-Instruct's (eos <|im_end|>, pad <|endoftext|>, bos null,
added_tokens_decoder, Qwen2Tokenizer) and carries its chat_template string verbatim. That string was taken from the
published Qwen2-VL-Instruct configs as mirrored in public copies (the Qwen2-VL-2B-Instruct tokenizer_config.json, and
transformers' tests/models/qwen2_vl/test_processor_qwen2_vl.py prepare_processor_dict, which agree character for
character); Qwen2-VL-7B-Instruct and -2B-Instruct ship the same template.

Usage: python3 make_fixture.py   (rewrites tokenizer.json and tokenizer_config.json next to it)
"""
import collections
import json
import os
import unicodedata

from bpe_reference import BYTE_CHAR, bytes_to_unicode

import regex

N_MERGES = 600

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")

ADDED_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]

CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in "
    "content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] "
    "== 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content "
    "%}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "<|im_start|>assistant\n{% endif %}")

CORPUS = """\
The quick brown fox jumps over the lazy dog. What color is the cross? The cross is red, and the circle is blue.
How many objects are there in the image? There are 3 objects: a cube, a sphere and a cylinder.
I don't know what you're saying, but I'll try. We've seen it; they'd agree. It's fine, isn't it? You'll see.
Describe this image in detail. The picture shows a street scene with a red stop sign in the foreground.
Numbers: 1234567, 2024-08-29, 3.14159, 42 and 100%. Call +49 30 1234567 or write to info@example.com today.
    def main():
        for i in range(10):
            print(i, i * i)    # four spaces, then a comment
\tTabs\tseparate\tthese\twords.
Line one

Line three after an empty line.   Trailing spaces here.   \n
Der schnelle braune Fuchs springt über den faulen Hund. Grüße aus München! Die Straße ist schön und groß.
Äpfel, Öl und Übermut: Mädchen können Bücher lesen, während Jungen Fußball spielen. Ich weiß es nicht.
我们今天去公园散步，天气非常好。这张图片里有一个红色的十字和一个蓝色的圆。请描述这张图片。
中文分词是自然语言处理中的重要问题，模型需要理解每一个字的意思。人工智能正在改变世界。
今日はとても良い天気ですね。この画像には赤い十字と青い円があります。カタカナとひらがなと漢字。
東京は日本の首都です。私は毎朝コーヒーを飲みます。ありがとうございます。
مرحبا بالعالم. هذه الصورة تحتوي على صليب أحمر ودائرة زرقاء. اللغة العربية جميلة جدا.
Emoji: 😀 😂 👍 🎉 ❤️ 🚀 and families 👨‍👩‍👧‍👦 👩‍💻 👩🏽‍💻 🏳️‍🌈 with skin tones 👋🏻 👋🏿 and flags 🇩🇪 🇯🇵.
<think> reasoning </think> {"key": "value", "list": [1, 2, 3]} (parentheses) [brackets] --- *** ...
ANSWER IN CAPITALS: DON'T STOP, I'LL WAIT. The answer is yes. The answer is no. The answer is two.
Separators that are not \\s: x!\u180e!\u180e!\u180e and a\u180e\u180e\u180eb; !\u180e !\u180e !\u180e
"""


def pieces(text, pattern):
    out, last = [], 0
    for m in pattern.finditer(text):
        if m.start() > last:
            out.append(text[last:m.start()])
        if m.end() > m.start():
            out.append(m.group())
        last = m.end()
    if last < len(text):
        out.append(text[last:])
    return out


def train(corpus, n_merges):
    pattern = regex.compile(QWEN2_PATTERN)
    words = collections.Counter(
        tuple(BYTE_CHAR[b] for b in p.encode("utf-8")) for p in pieces(unicodedata.normalize("NFC", corpus), pattern))
    merges = []
    while len(merges) < n_merges:
        counts = collections.Counter()
        for w, c in words.items():
            for pair in zip(w, w[1:]):
                counts[pair] += c
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        merged = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += c
        words = merged
    return merges


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    merges = train(CORPUS, N_MERGES)
    vocab = {ch: i for i, (_, ch) in enumerate(bytes_to_unicode())}
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    added = [{"id": len(vocab) + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(ADDED_TOKENS)]
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
    with open(os.path.join(here, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False, indent=1)
        f.write("\n")
    config = {
        "add_prefix_space": False,
        "added_tokens_decoder": {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                     "single_word", "special")} for t in added},
        "additional_special_tokens": ADDED_TOKENS[1:],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    with open(os.path.join(here, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"make_fixture: {len(merges)} merges, vocabulary {len(vocab)} + {len(added)} added tokens")


if __name__ == "__main__":
    main()
