"""Write the Llama-3.x tokenizer folder the training tests point ``--tokenizer-model`` at.

Source: the ``llama-models`` 0.3.0 wheel on PyPI (``pip download llama-models==0.3.0 --no-deps``):
``llama_models/llama3/tokenizer.model`` (tiktoken BPE ranks, 128,000 lines, sha256 82e9d319...5b55, the file
Hugging Face's meta-llama/Llama-3.1-* repos ship as ``original/tokenizer.model``) and the 256 special
tokens of ``llama_models/llama3/tokenizer.py:75-96`` (num_reserved_special_tokens = 256).

Output: ``tokenizer.json`` in the Hugging Face ``tokenizers`` format that Megatron's HuggingFaceTokenizer
(AutoTokenizer) reads: a byte-level BPE whose vocabulary is the 128,000 ranks (bytes mapped with GPT-2's
bytes_to_unicode, as transformers' TikTokenConverter does) and the 256 special tokens as added tokens.
The merges are left out and ``ignore_merges`` is set (Llama-3's own tokenizer.json sets it too): the
vocabulary and its size are the real ones, which is what optkg reads; encoding text is not the point.

Run: ``python tools/llama3_tokenizer_fixture.py WHEEL OUT_DIR``.
"""
from __future__ import annotations

import base64
import json
import sys
import zipfile
from pathlib import Path


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (openai/gpt-2 encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def specials(num_reserved: int = 256) -> list[str]:
    named = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
             "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
             "<|eot_id|>", "<|python_tag|>", "<|image|>"]
    return named + [f"<|reserved_special_token_{2 + i}|>" for i in range(num_reserved - len(named))]


def build(model_text: str) -> dict:
    m = bytes_to_unicode()
    vocab: dict[str, int] = {}
    for line in model_text.splitlines():
        if line.strip():
            tok, rank = line.split()
            vocab["".join(m[b] for b in base64.b64decode(tok))] = int(rank)
    base = len(vocab)
    added = [{"id": base + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(specials())]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                                "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                      "vocab": vocab, "merges": []}}


def main(wheel: str, out: str) -> None:
    with zipfile.ZipFile(wheel) as z:
        text = z.read("llama_models/llama3/tokenizer.model").decode()
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    (d / "tokenizer.json").write_text(json.dumps(build(text), ensure_ascii=False, separators=(",", ":")) + "\n",
                                      encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                          "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                                                          "model_max_length": 131072}, indent=2) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
