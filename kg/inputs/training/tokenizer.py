"""The vocabulary size of a tokenizer a training job names (``--tokenizer-model DIR``, a tokenizer.json, a
vocab.json): read with the ``tokenizers`` library, as ``len(tokenizer)`` counts it (base vocabulary plus the
added tokens), which is what Megatron's HuggingFaceTokenizer reports (megatron/training/tokenizer/
tokenizer.py ``_HuggingFaceTokenizer.vocab_size`` = ``len(self._tokenizer)`` at Megatron-LM core_v0.16.1).

``tokenizer_vocab(path)`` -> (size, how it was read). A folder is read from its ``tokenizer.json``; a
GPT-2 ``vocab.json`` counts its entries; anything else is an OptkgError naming the file and what was
expected (sizes are never guessed from file names). Files over ``MAX_BYTES`` are refused.
"""
from __future__ import annotations

import json
from pathlib import Path

from kg.core.errors import OptkgError

MAX_BYTES = 64 * 2**20  # the largest tokenizer.json of a public model (Gemma-3, 262k tokens) is ~33 MB


def tokenizer_vocab(path: Path | str, where: str) -> tuple[int, str]:
    """(vocabulary size with added tokens, a note saying what was read) for ``path``."""
    p = Path(path)
    if p.is_dir():
        f = p / "tokenizer.json"
        if not f.exists():
            if (p / "vocab.json").exists():
                return tokenizer_vocab(p / "vocab.json", where)
            raise OptkgError(f"{where}: {p} holds no tokenizer.json (a Hugging Face tokenizer folder is expected)")
        p = f
    if not p.is_file():
        raise OptkgError(f"{where}: tokenizer '{path}' not found")
    if p.stat().st_size > MAX_BYTES:
        raise OptkgError(f"{where}: {p} is larger than {MAX_BYTES // 2**20} MiB; not a tokenizer file")
    if p.name == "vocab.json":
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise OptkgError(f"{where}: {p} is not JSON ({e})") from None
        if not isinstance(data, dict):
            raise OptkgError(f"{where}: {p}: a vocab.json maps tokens to ids")
        return len(data), f"{len(data):,} entries of {p}"
    try:
        from tokenizers import Tokenizer
    except ImportError:  # a dependency of optkg (pyproject.toml); say what to install instead of guessing
        raise OptkgError(f"{where}: reading {p} needs the 'tokenizers' package (pip install tokenizers)") from None
    try:
        tok = Tokenizer.from_file(str(p))
    except Exception as e:  # the Rust library raises its own exception type for any malformed file
        raise OptkgError(f"{where}: {p} is not a Hugging Face tokenizer.json ({str(e).splitlines()[0][:120]})") from None
    n, base = tok.get_vocab_size(with_added_tokens=True), tok.get_vocab_size(with_added_tokens=False)
    return n, f"{p}: {base:,} tokens + {n - base:,} added = {n:,} (tokenizers {_version()}, len(tokenizer))"


def _version() -> str:
    import tokenizers
    return tokenizers.__version__
