"""The parsed form of a startup log: ``StartupLog`` of ``LoggedValue``s (bytes, tokens or ratios), and what every
engine's log reader (kg.engines.<engine>.logs) shares: the number pattern and the model-name reader."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from kg.core.errors import OptkgError

GIB = 1024**3
# a number as the engines print it: digits (or 1,234,567 grouping), an optional fraction; never a sign, an
# exponent, nan or inf. The capture in the line patterns is looser (``NUM``) so that a malformed number on a
# known line is an error here instead of a line silently not matched.
NUM = r"([-+]?[0-9A-Za-z.,_]*[0-9A-Za-z_])"
_PRINTED = re.compile(r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,15})(?:\.[0-9]{1,12})?")
# keys an engine that started cannot log as 0 (it stops first: vLLM "No available memory for the cache blocks")
POSITIVE = {"kv_cache_memory", "kv_cache_tokens", "num_gpu_blocks", "max_model_len", "total_memory",
            "gpu_memory_utilization", "tp_size", "max_running_requests", "max_concurrency"}


def logged_number(text: str, key: str, path: str, line: int, raw: str) -> float:
    """The number ``text`` that line ``line`` of the log prints for ``key``. Raises OptkgError (file, line, field)
    for a number no engine prints: a sign, nan/inf, an exponent, over 15 digits, or 0 where 0 cannot be."""
    where = f"{path}:{line}: {key} ({raw.strip()[:80]!r})"
    if not _PRINTED.fullmatch(text):
        shown = text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"
        if text.startswith("-") and _PRINTED.fullmatch(text[1:]):
            raise OptkgError(f"{where}: a negative number ({shown}): the engine had no memory left for it and stops "
                             "at start-up; nothing to compare")
        raise OptkgError(f"{where}: expected a number as the engine prints it (e.g. 12,345 or 7.25), found {shown}")
    value = float(text.replace(",", ""))
    if value == 0 and key in POSITIVE:
        raise OptkgError(f"{where}: 0 -- an engine that starts cannot have that (vLLM stops with 'No available "
                         "memory for the cache blocks'); this log is of a start that failed; nothing to compare")
    if key == "gpu_memory_utilization" and value > 1:
        raise OptkgError(f"{where}: expected a fraction in (0, 1], found {text}")
    return value


@dataclass
class LoggedValue:
    """One number read from the log: ``value`` (bytes, tokens or a ratio), the line it came from."""

    value: float
    line: int
    text: str


@dataclass
class StartupLog:
    """What a startup log says about memory (keys: each engine's log reader's module doc)."""

    path: str
    engine: str                    # the engine that printed it (kg.engines.<engine>.logs read it)
    generation: str                # vllm: "v0" or "v1"; sglang: "sglang"
    values: dict[str, LoggedValue] = field(default_factory=dict)
    # the model the engine loaded when the log names it (vLLM "with config: model='...'" / non-default args
    # 'model': '...', SGLang model_path='...'), with its line; its TP size is ``values["tp_size"]``
    model: LoggedValue | None = None

    def get(self, key: str) -> float | None:
        v = self.values.get(key)
        return None if v is None else v.value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def logged_model(raw: str, line: int, patterns: list[re.Pattern[str]]) -> LoggedValue | None:
    """The model a log line names (``LoggedValue`` whose ``text`` is the name, ``value`` 0), or None."""
    for rx in patterns:
        m = rx.search(raw)
        if m:
            return LoggedValue(0.0, line, m.group(1)[:300])
    return None
