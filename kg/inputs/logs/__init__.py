"""Engine startup logs: the memory numbers vLLM and SGLang print while they size the KV cache.

``read_startup_log(path)`` detects the engine from the lines it finds and returns a ``StartupLog``
(every size in bytes; GiB in the logs are 2**30 bytes: vLLM's "GB" in ``Loading model weights took``
and SGLang's "GB" are GiB too, both divide by 2**30). One module per engine: ``vllm`` (V0 and V1
formats), ``sglang``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.yamlio import read_text

GIB = 1024**3
MAX_LOG_BYTES = 64 * 1024 * 1024


@dataclass
class LoggedValue:
    """One number read from the log: ``value`` (bytes, tokens or a ratio), the line it came from."""

    value: float
    line: int
    text: str


@dataclass
class StartupLog:
    """What a startup log says about memory (keys: see ``vllm.KEYS`` / ``sglang.KEYS``)."""

    path: str
    engine: str                    # vllm | sglang
    generation: str                # vllm: "v0" or "v1"; sglang: "sglang"
    values: dict[str, LoggedValue] = field(default_factory=dict)

    def get(self, key: str) -> float | None:
        v = self.values.get(key)
        return None if v is None else v.value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_startup_log(path: Path | str) -> StartupLog:
    """Read a vLLM or SGLang startup log. Raises OptkgError (naming the file) when it is unreadable
    or holds none of the memory lines either engine prints."""
    from kg.inputs.logs import sglang, vllm
    text = read_text(path, max_bytes=MAX_LOG_BYTES)
    lines = text.splitlines()
    for reader in (vllm, sglang):
        log = reader.parse(lines, str(path))
        if log is not None:
            return log
    raise OptkgError(f"{path}: no vLLM or SGLang KV-cache sizing line found (expected e.g. 'GPU KV cache size: N tokens', "
                     "'# GPU blocks: N', 'Available KV cache memory: X GiB' or 'KV Cache is allocated. #tokens: N')")
