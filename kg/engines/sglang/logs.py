"""SGLang startup-log lines -> ``StartupLog`` values.

Keys (bytes unless named otherwise):
- "KV Cache is allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB" (MHA) or "... KV size: X GB"
  (MLA): ``kv_cache_tokens``, ``k_size``, ``v_size`` / ``kv_size`` (SGLang's GB is 2**30 bytes:
  ``GB = 1024 * 1024 * 1024``, sglang 0.5.23 ``srt/mem_cache/memory_pool.py:116, 2073-2095``);
- "Load weight end. ... mem usage=X GB" -> ``weights``;
- "max_total_num_tokens=N, ... max_running_requests=M, context_len=L, available_gpu_mem=X GB" ->
  ``kv_cache_tokens``, ``max_running_requests``, ``max_model_len``.
"""
from __future__ import annotations

import re

from kg.inputs.logs.model import GIB, NUM, LoggedValue, StartupLog, logged_model, logged_number

PATTERNS: list[tuple[re.Pattern[str], list[tuple[str, int, float]]]] = [
    (re.compile(rf"KV Cache is allocated\..*?#tokens: {NUM}"), [("kv_cache_tokens", 1, 1)]),
    (re.compile(rf"KV Cache is allocated\..*?K size: {NUM} GB, V size: {NUM} GB"), [("k_size", 1, GIB), ("v_size", 2, GIB)]),
    (re.compile(rf"KV Cache is allocated\..*?KV size: {NUM} GB"), [("kv_size", 1, GIB)]),
    (re.compile(rf"Load weight end\..*?mem usage={NUM} GB"), [("weights", 1, GIB)]),
    (re.compile(rf"max_total_num_tokens={NUM}"), [("kv_cache_tokens", 1, 1)]),
    (re.compile(rf"max_running_requests={NUM}"), [("max_running_requests", 1, 1)]),
    (re.compile(rf"context_len={NUM}"), [("max_model_len", 1, 1)]),
    # the server_args line: ServerArgs(model_path='...', ..., tp_size=4, ...) or, in 0.5.23, a dict
    # (entrypoints/engine.py:311 logs server_args.resolved_dict())
    (re.compile(r"server_args=.*?(?:[(, ]tp_size=|'tp_size': )([0-9]+)"), [("tp_size", 1, 1)]),
]
MODEL_PATTERNS = [re.compile(r"server_args=(?:ServerArgs\(model_path='|\{.*?'model_path': ')([^']+)'")]


def parse(lines: list[str], path: str) -> StartupLog | None:
    """The SGLang values in ``lines`` (first occurrence of each key), or None when there are none."""
    values: dict[str, LoggedValue] = {}
    model = None
    for i, raw in enumerate(lines, 1):
        model = model or logged_model(raw, i, MODEL_PATTERNS)
        for rx, keys in PATTERNS:
            m = rx.search(raw)
            if m:
                for key, group, scale in keys:
                    if key not in values:
                        values[key] = LoggedValue(logged_number(m.group(group), key, path, i, raw) * scale, i,
                                                  raw.strip()[:300])
    if "kv_cache_tokens" not in values:
        return None
    return StartupLog(path, "sglang", "sglang", values, model)
