"""Reading an engine's startup log: every engine package is asked (its protocol's ``read_log``, in the order of
their ``log_priority``: an engine whose lines another's patterns could misread goes first) until one recognises the
lines; the log's numbers are in bytes (kg.inputs.logs.StartupLog)."""
from __future__ import annotations

from pathlib import Path

from kg.core.errors import OptkgError
from kg.core.yamlio import read_text
from kg.engines import get, names
from kg.inputs.logs import MAX_LOG_BYTES, StartupLog


def read_startup_log(path: Path | str) -> StartupLog:
    """Read a startup log of any engine optkg has a log reader for. Raises OptkgError (naming the file) when it is
    unreadable or holds none of the memory lines any engine prints."""
    text = read_text(path, max_bytes=MAX_LOG_BYTES)
    lines = text.splitlines()
    for eng in sorted((get(n) for n in names()), key=lambda e: (e.log_priority, e.name)):
        log = eng.read_log(lines, str(path))
        if log is not None:
            return log
    raise OptkgError(f"{path}: no vLLM or SGLang KV-cache sizing line found (expected e.g. 'GPU KV cache size: N tokens', "
                     "'# GPU blocks: N', 'Available KV cache memory: X GiB' or 'KV Cache is allocated. #tokens: N')")
