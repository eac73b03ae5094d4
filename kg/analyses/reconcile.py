"""``optkg reconcile``: put optkg's memory estimate beside every number an engine's startup log prints,
and explain each difference.

Per log (kg.engines.logs): three columns per quantity (``kg.engines.rows.Row``): what the engine *logged*,
what optkg *reproduces from the logged numbers* with the engine's own arithmetic (is the log what the engine
computes?), and optkg's *own estimate* for the stack (kg.derive.budget / weights, the engine's KV plan). Each
engine fills the rows of its own log (``reconcile_log`` of its protocol: kg.engines.vllm.reconcile for vLLM V0
and V1, kg.engines.sglang.reconcile for SGLang); with two logs of different engines, ``compare`` asks them why
their KV pools differ.
"""
from __future__ import annotations

from typing import Any

from kg.core.errors import OptkgError
from kg.engines import get, of
from kg.engines.rows import Reconciliation, Row
from kg.inputs.logs import GIB, StartupLog

__all__ = ["Reconciliation", "Row", "compare", "log_stack_mismatch", "logged_kv_budget", "reconcile"]

SCHEMA_VERSION = "1.0"


def _stack_parts(stack) -> dict[str, Any]:
    """Model, layout, weights, budget inputs of the stack (kg.analyses.stackfacts arithmetic); ``budget()`` the
    ServingBudget optkg estimates for it (None without a GPU), ``plan(max_model_len)`` its engine's KV plan."""
    from kg.analyses.stackfacts import engine_utilization, serving_defaults, stack_budget
    from kg.derive.kv import gpu_memory_bytes, kv_layout
    from kg.derive.weights import weight_bytes_per_gpu, weight_scheme
    ns = stack.values()
    m = stack.model
    tp, pp = int(ns.get("tp_size") or 1), int(ns.get("pp_size") or 1)
    kvdt = str(ns.get("kv_cache_dtype") or "auto")
    scheme = weight_scheme(m, ns.get("quantization"), ns.get("dtype"), ns.get("expert_dtype"))
    expert_shards = of(stack).expert_shards(stack, ns, tp)
    util, util_src = engine_utilization(stack, ns)
    mnbt, seqs = serving_defaults(stack, ns)
    weights = weight_bytes_per_gpu(m, tp, pp, expert_shards, scheme)
    total = gpu_memory_bytes(stack.hardware) if stack.hardware else None

    def budget():
        return stack_budget(stack, ns, m, total, util, util_src, weights, tp)

    def plan(mml: int):
        return of(stack).kv_plan(stack, ns, m, tp, pp, 1, kvdt, mml, serving_defaults(stack, ns, m)[0])
    return {"ns": ns, "model": m, "tp": tp, "pp": pp, "kvdt": kvdt, "layout": kv_layout(m, tp, pp, 1, kvdt),
            "weights": weights, "util": util, "util_source": util_src, "mnbt": mnbt, "max_num_seqs": seqs,
            "total_memory": total, "budget": budget if total is not None else None, "plan": plan}


def reconcile(log: StartupLog, stack=None) -> Reconciliation:
    """Reconcile one startup log with optkg's estimate for ``stack`` (a Stack, or None for the log alone)."""
    if stack is not None and stack.engine and stack.engine != log.engine:
        raise OptkgError(f"{log.path}: a {log.engine} log, but the command is for {stack.engine}; pass --{log.engine}")
    parts = _stack_parts(stack) if stack is not None and stack.model is not None else None
    rec = Reconciliation(log.path, log.engine, log.generation, stack.model.name if parts else None, [])
    get(log.engine).reconcile_log(log, parts, stack, rec)
    if parts is None:
        rec.notes.append("no --vllm/--sglang command: only the logged numbers are shown")
    return rec


def compare(a: Reconciliation, b: Reconciliation) -> list[str]:
    """Why two logs of the same model and GPUs, from different engines, hold different KV pools (sentences from
    either engine's ``compare_logs``; empty when neither explains the pair)."""
    return get(a.engine).compare_logs(a, b) or get(b.engine).compare_logs(b, a)


def logged_kv_budget(log: StartupLog) -> tuple[float, str]:
    """The KV-cache memory per GPU a log reports (bytes) and the line it came from. Raises OptkgError
    when the log has no such line (e.g. only token counts)."""
    got = get(log.engine).logged_kv_budget(log)
    if got is None:
        raise OptkgError(f"{log.path}: the log names no KV-cache memory (vLLM 'Available KV cache memory' / "
                         "'kv_cache_size=', SGLang 'K size' / 'KV size')")
    return got


def _name_key(name: str) -> str:
    """A model name reduced for comparison: the last path part (a Hugging Face cache folder
    ``models--org--name`` to ``name``), lower case, letters and digits only ('Meta-Llama-3.1-8B' -> 'metallama318b')."""
    last = name.rstrip("/").rsplit("/", 1)[-1]
    if last.startswith("models--"):
        last = last.split("--")[-1]
    return "".join(c for c in last.lower() if c.isalnum())


BYTES_PER_TOKEN_TOLERANCE = 0.10  # the log rounds memory to 0.01 GiB; V1 counts whole blocks (vllm-21348: +1.2 %)


def log_stack_mismatch(log: StartupLog, stack) -> list[str]:
    """Why the log's KV budget is not this stack's (empty when nothing says so): the model the log names
    differs from the stack's (compared by ``_name_key``, one containing the other: 'Qwen3-235B-A22B-FP8' is
    Qwen3-235B-A22B's checkpoint; a name without a digit such as '/data/model' is not compared), its TP size
    differs, or the KV bytes per token per GPU the log implies (KV memory / its token or block count) are off
    the stack's (kg.derive.kv.kv_layout) by more than ``BYTES_PER_TOKEN_TOLERANCE``: another model, TP size or
    KV dtype. Only full-attention models are checked that way (sliding-window and state layers change the count)."""
    out = []
    m = stack.model
    vals = stack.values()
    name = m.name if m is not None else None
    if log.model is not None and name:
        a, b = _name_key(log.model.text), _name_key(name)
        if any(c.isdigit() for c in a) and a not in b and b not in a:
            out.append(f"the log's model is '{log.model.text}' (line {log.model.line}), the stack runs {name}")
    tp = int(vals.get("tp_size") or 1)
    lt = log.values.get("tp_size")
    if lt is not None and int(lt.value) != tp:
        out.append(f"the log's tensor_parallel_size is {int(lt.value)} (line {lt.line}), the stack's tp_size {tp}")
    if m is None or out or m.num_sliding_layers or any(k not in ("full",) for k in m.layer_kinds):
        return out
    try:
        mem, _ = logged_kv_budget(log)
    except OptkgError:
        return out
    logged_tokens = get(log.engine).logged_kv_tokens(log, int(vals.get("block_size") or 16))
    if logged_tokens is None:
        return out
    count, basis, times_dcp = logged_tokens
    from kg.derive.kv import kv_layout
    try:
        lay = kv_layout(m, tp, int(vals.get("pp_size") or 1), int(vals.get("dcp_size") or 1),
                        str(vals.get("kv_cache_dtype") or "auto"))
    except OptkgError:
        return out
    own = lay.bytes_per_token_per_gpu / (lay.dcp_size if times_dcp else 1)
    logged = mem / count if count else 0.0
    if own and logged and abs(logged / own - 1) > BYTES_PER_TOKEN_TOLERANCE:
        out.append(f"the log holds {basis} in {mem / GIB:.2f} GiB, {logged:,.0f} B per token per GPU; the stack's "
                   f"{name} at tp {tp} stores {own:,.0f} (another model, TP size or KV dtype)")
    return out
