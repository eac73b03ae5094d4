"""Checking one setting's value as every stack input does: type, minimum, maximum, bounded counts.

Small on purpose: ``optkg kv`` validates ``--max-model-len`` with it (the same message ``check`` gives)
without importing the stack model, the catalog or PyYAML (its start-up time is benchmarked).
"""
from __future__ import annotations

import math
from typing import Any

from kg.core.errors import OptkgError
from kg.knowledge.vocabulary import BASE_SETTINGS

MAX_PARALLEL_SIZE = 65_536
# Smallest accepted value per setting (default 0 for numbers and integers): a 0 here is a typo.
SETTING_MINIMUM: dict[str, float] = {
    "max_model_len": 1, "request_len": 1, "block_size": 1, "max_num_batched_tokens": 1, "max_num_seqs": 1,
    "num_speculative_tokens": 1, "draft_tp_size": 1, "cp_kv_cache_interleave_size": 1, "flash_attn_version": 1,
    "max_num_partial_prefills": 1, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 1,
    "gpu_memory_utilization": 0.01,
    "max_lora_rank": 1, "lora_adapter_rank": 1, "num_scheduler_steps": 1, "max_mamba_cache_size": 1,
    "mamba_full_memory_ratio": 0.001,
    "chunked_prefill_size": -1,  # SGLang's -1 turns chunked prefill off (0.5.23 srt/arg_groups/memory_hook.py:304)
}
# A KV budget per GPU above any GPU's memory is a unit slip (MiB or bytes for GiB, a total for a per-GPU
# figure); 1,024 GiB is 3.5x the largest GPU in catalog/hardware (MI355X, 288 GiB; tests/test_kv_budget_bounds.py
# holds it above every entry). With a GPU known, kg.derive.kv.checked_kv_budget_gib bounds it by that GPU.
MAX_KV_BUDGET_GIB = 1024
SETTING_MAXIMUM: dict[str, float] = {"gpu_memory_utilization": 1, "kv_budget_gib": MAX_KV_BUDGET_GIB}


def coerce_value(value: Any, typ: str, where: str, minimum: float | None = None, maximum: float | None = None,
                 values: list[Any] | None = None) -> Any:
    """Check/convert ``value`` to ``typ``; raise OptkgError '<where>: expected ..., found ...'."""
    from kg.core.numparse import MAX_COUNT, bound_text, parse_int, show

    def bad(expect: str) -> OptkgError:
        return OptkgError(f"{where}: expected {expect}, found {show(value)}")
    if typ == "integer":
        if isinstance(value, bool):
            raise bad("an integer")
        if isinstance(value, str):  # ASCII digits only ('²' and '٨' are not integers), at most 30 of them
            value = parse_int(value, where, hi=None if maximum is None else int(maximum))
        if not isinstance(value, int):
            raise bad("an integer")
    elif typ == "number":
        if isinstance(value, bool):
            raise bad("a number")
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad("a number") from None
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise bad("a finite number")
    elif typ == "boolean" or typ == "flag":
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            value = value.lower() in ("true", "1")
        if not isinstance(value, bool):
            raise bad("true or false")
    elif typ in ("string", "enum"):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value:
            raise bad("a non-empty string")
        if values is not None and value not in [str(v) for v in values]:
            raise bad("one of " + ", ".join(map(str, values)))
    elif typ == "object":
        if not isinstance(value, dict):
            raise bad("a mapping")
    elif typ == "names":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise bad("a list of names")
    if maximum is None and typ in ("integer", "number"):
        maximum = MAX_COUNT  # bounded-work rule: no count or size is unbounded
    if minimum is not None and isinstance(value, (int, float)) and value < minimum:
        raise bad(f"a value >= {bound_text(minimum)}")
    if minimum is not None and minimum >= 0 and isinstance(value, float) and value == 0 and math.copysign(1, value) < 0:
        raise bad(f"a value >= {bound_text(minimum)} (a negative zero has a sign no size has)")
    if maximum is not None and isinstance(value, (int, float)) and value > maximum:
        raise bad(f"a value <= {bound_text(maximum)}")
    return value


def checked_setting(key: str, value: Any, where: str) -> Any:
    """``value`` of the base setting ``key`` checked and converted as every stack input checks it (type,
    ``SETTING_MINIMUM``, ``SETTING_MAXIMUM``, counts at most ``kg.core.numparse.MAX_COUNT``), so ``optkg kv``
    refuses what ``check`` refuses with the same message. Raises OptkgError '<where>: <key>: expected ...'."""
    typ = BASE_SETTINGS[key][0]
    lo = SETTING_MINIMUM.get(key, 0) if typ in ("integer", "number") else None
    return coerce_value(value, typ, f"{where}: {key}", lo, SETTING_MAXIMUM.get(key))
