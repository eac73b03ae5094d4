"""``optkg reconcile``: put optkg's memory estimate beside every number an engine's startup log prints,
and explain each difference.

Per log (kg.inputs.logs): three columns per quantity: what the engine *logged*, what optkg
*reproduces from the logged numbers* with the engine's own arithmetic (is the log what the engine
computes?), and optkg's *own estimate* for the stack (kg.derive.budget / weights / kv_specs).

- vLLM V0 (0.6.x): KV memory = ``total x gpu_memory_utilization - peak_torch - non_torch``
  (``worker/worker.py determine_num_available_blocks``); blocks = ``floor(KV memory / (block x
  bytes per token))``; the token limit in "max seq len ... larger than the maximum number of tokens
  that can be stored in KV cache (N)" is ``# GPU blocks x block_size``; max concurrency
  ``blocks x block_size / max_model_len``.
- vLLM V1: "GPU KV cache size" from the logged "Available KV cache memory" through kg.derive.kv_specs
  (``int(max_concurrency x max_model_len)``, vLLM 0.33.0 ``v1/core/kv_cache_utils.py:1120-1128``).
- SGLang: tokens from the logged K size: each layer's K buffer holds ``#tokens + page_size`` rows of
  ``kv_heads_per_rank x head_dim`` elements (sglang 0.5.23 ``srt/mem_cache/memory_pool.py:2567-2578``),
  so ``#tokens = K / (layers x heads x head_dim x bytes) - page_size``.
With a vLLM and an SGLang log of the same model, ``compare`` says why their KV pools differ.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from kg.core.errors import OptkgError
from kg.inputs.logs import GIB, StartupLog

SCHEMA_VERSION = "1.0"


@dataclass
class Row:
    """One quantity: ``logged`` / ``reproduced`` / ``estimated`` in ``unit`` (bytes, tokens, blocks, x)."""

    quantity: str
    unit: str
    logged: float | None
    reproduced: float | None = None
    estimated: float | None = None
    explanation: str = ""

    def diff_pct(self, other: float | None) -> float | None:
        if self.logged in (None, 0) or other is None:
            return None
        return round(100.0 * (other - self.logged) / self.logged, 2)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reproduced_diff_pct"] = self.diff_pct(self.reproduced)
        d["estimated_diff_pct"] = self.diff_pct(self.estimated)
        return d


@dataclass
class Reconciliation:
    log: str
    engine: str
    generation: str
    model: str | None
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    kv_bytes_logged: float | None = None      # KV pool per GPU the log implies (bytes)
    weights_estimated: float | None = None
    total_memory: float | None = None
    utilization: float | None = None

    def row(self, quantity: str) -> Row | None:
        return next((r for r in self.rows if r.quantity == quantity), None)

    def to_dict(self) -> dict[str, Any]:
        return {"log": self.log, "engine": self.engine, "generation": self.generation, "model": self.model,
                "rows": [r.to_dict() for r in self.rows], "notes": self.notes,
                "kv_bytes_logged": self.kv_bytes_logged, "weights_estimated": self.weights_estimated,
                "total_memory": self.total_memory, "utilization": self.utilization}


def _stack_parts(stack) -> dict[str, Any]:
    """Model, layout, weights, budget inputs of the stack (kg.analyses.check arithmetic)."""
    from kg.analyses.check import engine_utilization, serving_defaults
    from kg.derive.kv import kv_layout
    from kg.derive.weights import weight_bytes_per_gpu, weight_scheme
    ns = stack.values()
    m = stack.model
    tp, pp = int(ns.get("tp_size") or 1), int(ns.get("pp_size") or 1)
    kvdt = str(ns.get("kv_cache_dtype") or "auto")
    scheme = weight_scheme(m, ns.get("quantization"), ns.get("dtype"), ns.get("expert_dtype"))
    expert_shards = tp
    if "expert-parallelism" in stack.techniques:
        ep = int(ns.get("ep_size") or 1)
        expert_shards = ep if ep > 1 else tp * int(ns.get("dp_size") or 1)
    util, util_src = engine_utilization(stack, ns)
    mnbt, seqs = serving_defaults(stack, ns)
    return {"ns": ns, "model": m, "tp": tp, "pp": pp, "kvdt": kvdt, "layout": kv_layout(m, tp, pp, 1, kvdt),
            "weights": weight_bytes_per_gpu(m, tp, pp, expert_shards, scheme), "util": util, "util_source": util_src,
            "mnbt": mnbt, "max_num_seqs": seqs}


def _reconcile_vllm_v0(log: StartupLog, parts: dict[str, Any] | None, rec: Reconciliation) -> None:
    from kg.derive.budget import activation_peak_bytes
    g = log.get
    block = int(parts["ns"].get("block_size") or 16) if parts else 16
    total, util = g("total_memory"), g("gpu_memory_utilization")
    rec.total_memory, rec.utilization = total, util
    weights_l = g("weights")
    act_l = g("peak_torch") - weights_l if g("peak_torch") is not None and weights_l is not None else None
    mml = int(g("max_model_len") or (parts["ns"].get("max_model_len") if parts else 0) or 0)
    est: dict[str, float] = {}
    if parts:
        est["weights"] = parts["weights"]
        # V0 profiles max_num_batched_tokens = max(max_model_len, 2048) tokens without chunked prefill
        # (max_model_len <= 32K) and 256 sequences (V0 SchedulerConfig defaults)
        profiled = int(parts["ns"].get("max_num_batched_tokens") or max(mml, 2048))
        est["activation"] = activation_peak_bytes(parts["model"], parts["tp"], profiled, 256)
        from kg.derive.budget import non_torch_bytes
        est["non_torch"] = non_torch_bytes(total or 0.0, parts["tp"])[0]
    rec.weights_estimated = est.get("weights")
    rec.rows.append(Row("weights", "bytes", weights_l, None, est.get("weights"),
                        "optkg counts the linear, embedding and lm_head matrices; the engine's figure adds norms and "
                        "rotary caches (kg.derive.weights)"))
    if total is not None:
        rec.rows.append(Row("total GPU memory", "bytes", total, None, None, "as torch reports it (cudaMemGetInfo total)"))
    if total is not None and util is not None:
        rec.rows.append(Row("requested (total x gpu_memory_utilization)", "bytes", None, total * util, None,
                            f"{total / GIB:.2f} GiB x {util:g}"))
    rec.rows.append(Row("activation peak (peak_torch - weights)", "bytes", act_l, None, est.get("activation"),
                        "optkg's profile-run estimate (kg.derive.budget.activation_peak_bytes) for the tokens V0 "
                        "profiles: max(max_model_len, 2048) without chunked prefill"))
    rec.rows.append(Row("non-torch memory", "bytes", g("non_torch"), None, est.get("non_torch"),
                        "CUDA context and cuBLAS workspace outside the torch allocator"))
    kv_l = g("kv_cache_memory")
    kv_rep = None
    if total is not None and util is not None and g("peak_torch") is not None and g("non_torch") is not None:
        kv_rep = total * util - g("peak_torch") - g("non_torch")
    kv_est = None
    if parts and total is not None and util is not None:
        kv_est = max(0.0, total * util - est["weights"] - est["activation"] - est["non_torch"])
    rec.kv_bytes_logged = kv_l
    rep_text = (f" = {total / GIB:.2f} x {util:g} - {g('peak_torch') / GIB:.2f} - {g('non_torch') / GIB:.2f} GiB = "
                f"{kv_rep / GIB:.3f} GiB" if kv_rep is not None else "")
    rec.rows.append(Row("KV cache memory", "bytes", kv_l, kv_rep, kv_est,
                        f"reproduced: total x utilization - peak_torch - non_torch{rep_text} (the logged parts, each "
                        "rounded to 0.01 GiB); estimated: the same with optkg's weights, activation and non-torch estimates"))
    if parts:
        per_block = parts["layout"].bytes_per_token_per_gpu * block
        blocks_l = g("num_gpu_blocks")
        blocks_rep = math.floor(kv_l / per_block) if kv_l is not None else None
        rec.rows.append(Row("GPU blocks", "blocks", blocks_l, blocks_rep,
                            math.floor(kv_est / per_block) if kv_est is not None else None,
                            "floor(KV memory / {:,.0f} B per {}-token block){}; the logged GiB is rounded to 0.01 GiB "
                            "(+-{:.1f} blocks)".format(per_block, block, "" if blocks_rep is None else
                                                       f": reproduced from the logged {kv_l / GIB:.2f} GiB = {blocks_rep:,}",
                                                       0.005 * GIB / per_block)))
        tok_rep = int(blocks_l) * block if blocks_l is not None else None
        tok_est = math.floor(kv_est / per_block) * block if kv_est is not None else None
        rec.rows.append(Row("KV token limit (# GPU blocks x block_size)", "tokens", g("kv_token_limit"), tok_rep, tok_est,
                            "V0 stores at most # GPU blocks x block_size tokens; a max_model_len above it is a startup "
                            "ValueError"))
        if mml:
            conc_rep = round(blocks_l * block / mml, 2) if blocks_l is not None else None
            conc_est = round(tok_est / mml, 2) if tok_est is not None else None
            rec.rows.append(Row(f"max concurrency at {mml:,} tokens", "x", g("max_concurrency"), conc_rep, conc_est,
                                "V0: GPU blocks x block_size / max_model_len" + (
                                    f" = {int(blocks_l):,} x {block} / {mml:,} = {blocks_l * block / mml:.4f}"
                                    if blocks_l is not None else "")))
            if tok_rep is not None and tok_rep < mml:
                rec.notes.append(f"max_model_len {mml:,} does not fit: the cache holds {tok_rep:,} tokens "
                                 f"({int(blocks_l):,} blocks x {block}); vLLM V0 refuses to start")


def _reconcile_vllm_v1(log: StartupLog, parts: dict[str, Any] | None, stack, rec: Reconciliation) -> None:
    from kg.analyses.check import stack_budget, vllm_plan
    from kg.derive.kv import gpu_memory_bytes
    g = log.get
    kv_l = g("kv_cache_memory")
    rec.kv_bytes_logged = kv_l
    plan = None
    sb = None
    if parts:
        mml = int(g("max_model_len") or parts["ns"].get("max_model_len") or parts["model"].vllm_default_max_model_len or
                  parts["model"].derived_max_model_len or 0)
        plan = vllm_plan(stack, parts["ns"], parts["model"], parts["tp"], parts["pp"], 1, parts["kvdt"], mml) if mml else None
        rec.weights_estimated = parts["weights"]
        if stack.hardware:
            total = gpu_memory_bytes(stack.hardware)
            rec.total_memory, rec.utilization = total, parts["util"]
            sb = stack_budget(stack, parts["ns"], parts["model"], total, parts["util"], parts["util_source"],
                              parts["weights"], parts["tp"])
        else:
            rec.notes.append("no --gpu: optkg's own budget estimate needs the GPU's memory")
    rec.rows.append(Row("weights", "bytes", g("weights"), None, parts["weights"] if parts else None,
                        "kg.derive.weights per GPU"))
    if sb is not None:
        for name, key in (("activation peak", "activation_peak"), ("CUDA graphs", "cuda_graphs")):
            line = sb.line(name)
            rec.rows.append(Row(name, "bytes", g(key), None, line.bytes if line else None, line.basis if line else ""))
    rec.rows.append(Row("KV cache memory", "bytes", kv_l, None, sb.kv_bytes if sb else None,
                        (f"optkg: {' - '.join(x.name for x in sb.lines)} at gpu_memory_utilization {sb.gpu_memory_utilization:g}"
                         f" ({sb.utilization_source}); {sb.error_text}") if sb else ""))
    if plan is not None:
        rep = plan.capacity(kv_l) if kv_l is not None else None
        est = plan.capacity(sb.kv_bytes) if sb is not None else None
        worked = (f" = int({rep['num_blocks']:,} / {plan.blocks_per_request:,} x {plan.max_model_len:,}) = "
                  f"{rep['kv_cache_size_tokens']:,} from the logged memory" if rep else "")
        rec.rows.append(Row("GPU KV cache size", "tokens", g("kv_cache_tokens"), rep["kv_cache_size_tokens"] if rep else None,
                            est["kv_cache_size_tokens"] if est else None,
                            f"int(num_blocks / blocks per request x max_model_len){worked} (the unrounded concurrency, "
                            f"vllm 0.33.0 v1/core/kv_cache_utils.py:1120-1128); num_blocks = floor(KV memory / "
                            f"{plan.bytes_per_block:,} B per {plan.block_size}-token block); the log's memory line is one "
                            "rank's, rounded to 0.01 GiB, while every rank gets the smallest rank's block count "
                            "(vllm 0.33.0 v1/core/kv_cache_planning.py:1580)"))
        rec.rows.append(Row(f"max concurrency at {plan.max_model_len:,} tokens", "x", g("max_concurrency"),
                            rep["max_concurrency"] if rep else None, est["max_concurrency"] if est else None,
                            f"num_blocks / {plan.blocks_per_request:,} blocks per request, rounded to 2 decimals as logged"
                            + (f" ({rep['num_blocks']:,} / {plan.blocks_per_request:,} = {rep['max_concurrency_exact']:.4f})"
                               if rep else "")))


def _reconcile_sglang(log: StartupLog, parts: dict[str, Any] | None, stack, rec: Reconciliation) -> None:
    from kg.analyses.check import stack_budget
    from kg.derive.kv import gpu_memory_bytes
    g = log.get
    k, v, kvs = g("k_size"), g("v_size"), g("kv_size")
    rec.kv_bytes_logged = (k + v) if k is not None and v is not None else kvs
    page = int(parts["ns"].get("block_size") or 1) if parts else 1
    rep = None
    worked = ""
    if parts and (k is not None or kvs is not None):
        lay = parts["layout"]
        per_tok_layer = lay.bytes_per_token_layer_per_rank
        cell_k = lay.layers_per_rank * per_tok_layer / (1 if kvs is not None else 2)
        rep = math.floor((k if k is not None else kvs) / cell_k) - page
        m = parts["model"]
        cell = (f"{lay.kv_heads_per_rank} x {m.head_dim} x {lay.kv_element_bytes:g}" if not m.is_mla and kvs is None
                else f"{cell_k / lay.layers_per_rank:,.0f}")
        worked = f": floor({(k if k is not None else kvs) / GIB:.2f} GiB / ({lay.layers_per_rank} x {cell} B)) - {page} = {rep:,}"
    sb = None
    if parts and stack.hardware:
        total = gpu_memory_bytes(stack.hardware)
        rec.total_memory, rec.utilization = total, parts["util"]
        sb = stack_budget(stack, parts["ns"], parts["model"], total, parts["util"], parts["util_source"],
                          parts["weights"], parts["tp"])
    rec.weights_estimated = parts["weights"] if parts else None
    est = None
    if sb is not None:
        est = math.floor(sb.kv_bytes / parts["layout"].bytes_per_token_per_gpu) // page * page
    rec.rows.append(Row("KV cache memory (K + V)", "bytes", rec.kv_bytes_logged, None, sb.kv_bytes if sb else None,
                        (f"optkg: {' - '.join(x.name for x in sb.lines)} at mem_fraction_static {sb.gpu_memory_utilization:g}"
                         f"; {sb.error_text}") if sb else ""))
    rec.rows.append(Row("#tokens", "tokens", g("kv_cache_tokens"), rep, est,
                        f"reproduced from the logged K size: floor(K / (layers x KV heads x head_dim x bytes)) - page_size"
                        f"{worked} (each layer's buffer has #tokens + page_size rows, memory_pool.py:2574); the logged GB "
                        "(SGLang's GB is 2^30 bytes, memory_pool.py:116) has two decimals (+-0.005 GiB)"))


def reconcile(log: StartupLog, stack=None) -> Reconciliation:
    """Reconcile one startup log with optkg's estimate for ``stack`` (a Stack, or None for the log alone)."""
    if stack is not None and stack.engine and stack.engine != log.engine:
        raise OptkgError(f"{log.path}: a {log.engine} log, but the command is for {stack.engine}; pass --{log.engine}")
    parts = _stack_parts(stack) if stack is not None and stack.model is not None else None
    rec = Reconciliation(log.path, log.engine, log.generation, stack.model.name if parts else None, [])
    if log.engine == "sglang":
        _reconcile_sglang(log, parts, stack, rec)
    elif log.generation == "v0":
        _reconcile_vllm_v0(log, parts, rec)
    else:
        _reconcile_vllm_v1(log, parts, stack, rec)
    if parts is None:
        rec.notes.append("no --vllm/--sglang command: only the logged numbers are shown")
    return rec


def compare(a: Reconciliation, b: Reconciliation) -> list[str]:
    """Why a vLLM and an SGLang log of the same model and GPUs hold different KV pools (sentences)."""
    v, s = (a, b) if a.engine == "vllm" else (b, a)
    if v.engine != "vllm" or s.engine != "sglang" or not v.kv_bytes_logged or not s.kv_bytes_logged:
        return []
    out = [f"KV pool per GPU: SGLang {s.kv_bytes_logged / GIB:.2f} GiB (K + V) vs vLLM {v.kv_bytes_logged / GIB:.2f} GiB: "
           f"{s.kv_bytes_logged / v.kv_bytes_logged:.2f}x"]
    if v.total_memory and v.utilization and s.utilization and v.weights_estimated is not None:
        total = v.total_memory
        frac = (s.utilization - v.utilization) * total
        v_other = total * v.utilization - v.weights_estimated - v.kv_bytes_logged
        s_other = total * s.utilization - s.weights_estimated - s.kv_bytes_logged
        out.append(f"1. share of memory: SGLang mem_fraction_static {s.utilization:g} vs vLLM gpu_memory_utilization "
                   f"{v.utilization:g}: {frac / GIB:+.2f} GiB for SGLang")
        out.append(f"2. what else comes out of that share: vLLM subtracts its profiled activation peak, CUDA graphs and "
                   f"non-torch memory inside gpu_memory_utilization ({v_other / GIB:.2f} GiB beside optkg's "
                   f"{v.weights_estimated / GIB:.2f} GiB of weights); SGLang keeps activations and graphs in the "
                   f"remaining {1 - s.utilization:.0%} and takes only {s_other / GIB:.2f} GiB from its share")
        out.append(f"3. bytes per token are the same in both engines for this model, so the token counts differ by the "
                   f"same factor")
    return out


def logged_kv_budget(log: StartupLog) -> tuple[float, str]:
    """The KV-cache memory per GPU a log reports (bytes) and the line it came from. Raises OptkgError
    when the log has no such line (e.g. only token counts)."""
    if log.engine == "sglang":
        k, v, kv = log.values.get("k_size"), log.values.get("v_size"), log.values.get("kv_size")
        if k is not None and v is not None:
            return k.value + v.value, f"{log.path}:{k.line} (K + V size)"
        if kv is not None:
            return kv.value, f"{log.path}:{kv.line} (KV size)"
    else:
        x = log.values.get("kv_cache_memory")
        if x is not None:
            return x.value, f"{log.path}:{x.line}"
    raise OptkgError(f"{log.path}: the log names no KV-cache memory (vLLM 'Available KV cache memory' / "
                     "'kv_cache_size=', SGLang 'K size' / 'KV size')")


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
    tokens = log.values.get("kv_cache_tokens")
    blocks = log.values.get("num_gpu_blocks")
    if log.engine == "vllm" and blocks is not None:
        count, basis = blocks.value * int(vals.get("block_size") or 16), f"{int(blocks.value):,} blocks (line {blocks.line})"
    elif tokens is not None:
        count, basis = tokens.value, f"{int(tokens.value):,} tokens (line {tokens.line})"
    else:
        return out
    from kg.derive.kv import kv_layout
    try:
        lay = kv_layout(m, tp, int(vals.get("pp_size") or 1), int(vals.get("dcp_size") or 1),
                        str(vals.get("kv_cache_dtype") or "auto"))
    except OptkgError:
        return out
    own = lay.bytes_per_token_per_gpu / (lay.dcp_size if log.engine == "vllm" and blocks is None else 1)
    logged = mem / count if count else 0.0
    if own and logged and abs(logged / own - 1) > BYTES_PER_TOKEN_TOLERANCE:
        out.append(f"the log holds {basis} in {mem / GIB:.2f} GiB, {logged:,.0f} B per token per GPU; the stack's "
                   f"{name} at tp {tp} stores {own:,.0f} (another model, TP size or KV dtype)")
    return out
