"""Engine startup logs: the memory numbers vLLM and SGLang print while they size the KV cache.

``read_startup_log(path)`` detects the engine from the lines it finds and returns a ``StartupLog``
(every size in bytes; GiB in the logs are 2**30 bytes: vLLM's "GB" in ``Loading model weights took``
and SGLang's "GB" are GiB too, both divide by 2**30). One module per engine: ``vllm`` (V0 and V1
formats), ``sglang``.
"""
from __future__ import annotations

from pathlib import Path

from kg.core.errors import OptkgError
from kg.core.yamlio import read_text
from kg.inputs.logs.model import GIB, LoggedValue, StartupLog

__all__ = ["GIB", "LoggedValue", "StartupLog", "read_startup_log"]
MAX_LOG_BYTES = 64 * 1024 * 1024


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
