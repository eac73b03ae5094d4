"""The weights a checkpoint really stores, read from its own files beside ``config.json`` (never the network).

- ``model.safetensors.index.json``: ``metadata.total_size``, the bytes of every tensor of every shard, as
  transformers' ``save_pretrained`` / huggingface_hub's ``split_torch_state_dict_into_shards`` write it;
- else a single ``model.safetensors``: the file size less its 8-byte header length and the JSON header
  (the safetensors format: ``u64 N``, ``N`` bytes of JSON, then the tensor data).

The folder is the one ``config.json`` was read from: a local model folder, or the snapshot folder of the local
Hugging Face cache (``models--org--name/snapshots/<rev>/``: the cache holds the index only when it was
downloaded). A bundled config has no checkpoint beside it. Reads are bounded (the index at 64 MiB, the header
at 100 MiB as safetensors itself limits it); a file that is not what it claims is a note, never a number.
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
MAX_INDEX_BYTES = 64 * 1024 * 1024
MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors refuses larger headers (MAX_HEADER_SIZE)
_CACHED = re.compile(r"\(Hugging Face cache: (.+)\)$")


@dataclass(frozen=True)
class CheckpointSize:
    """``total_bytes`` of tensor data the checkpoint stores, and the file it was read from."""

    total_bytes: int
    path: str
    how: str  # "metadata.total_size" or "model.safetensors data"


def config_folder(source: str) -> Path | None:
    """The folder a model's ``config.json`` was read from (``ModelFacts.source``), or None (bundled, unknown)."""
    m = _CACHED.search(source or "")
    p = Path(m.group(1) if m else (source or ""))
    if p.name != "config.json" or not p.is_file():
        return None
    return p.parent


def checkpoint_size(source: str) -> tuple[CheckpointSize | None, str | None]:
    """(the checkpoint's stored bytes, a note) for the model whose config.json is ``source``.

    (None, None) when no checkpoint file is beside config.json; (None, note) when one is there but unreadable.
    """
    folder = config_folder(source)
    if folder is None:
        return None, None
    index = folder / INDEX_FILE
    if index.is_file():
        return _from_index(index)
    single = folder / SINGLE_FILE
    if single.is_file():
        return _from_single(single)
    return None, None


def _from_index(path: Path) -> tuple[CheckpointSize | None, str | None]:
    bad = f"{path}: not used for the weights"
    try:
        if path.stat().st_size > MAX_INDEX_BYTES:
            return None, f"{bad} (over {MAX_INDEX_BYTES // 2**20} MiB)"
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"{bad} ({type(e).__name__})"
    total = doc.get("metadata", {}).get("total_size") if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) \
        else None
    if isinstance(total, float) and total.is_integer():
        total = int(total)
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        return None, f"{bad} (no positive integer metadata.total_size)"
    return CheckpointSize(total, str(path), "metadata.total_size"), None


def _from_single(path: Path) -> tuple[CheckpointSize | None, str | None]:
    bad = f"{path}: not used for the weights"
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return None, f"{bad} (shorter than a safetensors header)"
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES or 8 + n > size:
                return None, f"{bad} (header length {n:,} does not fit the file)"
            header = json.loads(f.read(n).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"{bad} ({type(e).__name__})"
    if not isinstance(header, dict):
        return None, f"{bad} (the header is not a JSON object)"
    return CheckpointSize(size - 8 - n, str(path), "model.safetensors data"), None
