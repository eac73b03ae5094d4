"""The KV budget of any engine by name: ``serving_budget(engine, ...)`` is ``kg.engines.get(engine).budget(...)``
over ``kg.derive.budget.BudgetInputs`` (the engine's own lines: kg.engines.<engine>.budget)."""
from __future__ import annotations

from typing import Any

from kg.derive.budget import BudgetInputs, ServingBudget
from kg.engines import get


def serving_budget(engine: str | None, total_memory_bytes: float, gpu_memory_utilization: float,
                   utilization_source: str, weight_bytes_per_gpu: float, model: Any, tp_size: int = 1,
                   max_num_batched_tokens: int = 8192, max_num_seqs: int = 1024, enforce_eager: bool = False,
                   moe_tp_size: int | None = None, weights_source: str = "kg.derive.weights",
                   draft_weight_bytes: float = 0.0, engine_version: str | None = None,
                   max_model_len: int | None = None, limit_mm_per_prompt: Any = None,
                   language_model_only: bool = False) -> ServingBudget:
    """The budget breakdown ``engine`` makes for one GPU (``BudgetInputs`` for the arguments; never negative)."""
    return get(engine).budget(BudgetInputs(
        engine, total_memory_bytes, gpu_memory_utilization, utilization_source, weight_bytes_per_gpu, model, tp_size,
        max_num_batched_tokens, max_num_seqs, enforce_eager, moe_tp_size, weights_source, draft_weight_bytes,
        engine_version, max_model_len, limit_mm_per_prompt, language_model_only))
