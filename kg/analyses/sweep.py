"""Config sweeps: one base stack x axes of layouts, engines and GPUs, every combination checked and timed.

Input: a base ``Stack`` (from a stack file, ``--vllm``, ``--sglang`` or ``--config``) and lists per axis
(``AXES``: ``tp_size``, ``pp_size``, ``dp_size``, ``ep_size``, ``enable_dp_attention``, ``dcp_size``,
``max_num_seqs``, ``quantization``, ``kv_cache_dtype``; plus GPU types and engines). Each combination is a
copy of the base with those settings replaced; the technique each setting switches on is taken from the
engine's flag table (``catalog/engines/<engine>.yaml``; the vLLM table when the stack names no engine),
exactly as a pasted command would do it: ``tp_size > 1`` turns on ``tensor-parallelism``, ``dcp_size > 1``
``decode-context-parallelism``, ``kv_cache_dtype != auto`` ``kv-cache-quantization`` ... vLLM has no
expert-parallel size: its ``--enable-expert-parallel`` spans all tp x dp ranks, so ``ep_size`` there is 1
(off) or tp x dp (on), and any other value is marked as not selectable.

Every combination goes through ``kg.analyses.check.check_stack`` with the same compiled ruleset (only the
facts change). Per combination:

- ``valid``: no finding at or above ``invalid_on`` (default ``error``: the engine would refuse to
  start, e.g. ``dcp-invalid-size``, ``heads-not-divisible-by-tp``). This is the rules' verdict only.
- ``fits``: ``gpus_needed = tp_size * pp_size * dp_size`` (SGLang DP attention: ``tp_size * pp_size``, the dp
  attention groups split the TP group) is at most the GPU count (when given), the
  KV budget holds at least one block (the estimated weights leave memory for the cache), and one
  request of ``max_model_len`` fits in it (max concurrency >= 1; vLLM refuses to start otherwise).
  ``reasons``: the blocking rules (``rule <id>``) or, for a combination the rules allow, why it
  does not fit.
- KV numbers from the check's derivations (kg.derive.kv): ``kv_bytes_per_token_per_gpu`` (bytes),
  ``kv_tokens_per_gpu`` (tokens one GPU's KV budget holds, vLLM's "GPU KV cache size"),
  ``kv_tokens_total`` (scheduler-wide: per GPU x dcp_size), ``unique_kv_tokens_per_gpu``
  (``kv_tokens_total / (tp_size * pp_size)``: distinct context tokens cached per GPU, so KV-head
  replication counts against a combination) and ``max_concurrency`` (requests at
  ``max_model_len``; only when max_model_len is known).
- ``speed`` (when a workload is given): kg.speed.serving's estimate for the combination (TTFT, ITL,
  tokens/s per GPU and per request at the workload's ISL/OSL/concurrency, or why there is none).

Ranking (rank 1 is best): valid and fitting first; with speed, combinations that have an estimate and meet
the ``ttft_ms`` / ``itl_ms`` limits, by most output tokens/s per GPU; then the rest by the KV order: most
``unique_kv_tokens_per_gpu``, fewest findings, fewest GPUs; ties broken by the axes' order. ``pareto``
marks the combinations no other beats on both tokens/s per GPU and tokens/s per request.
Evaluation runs in this process, in worker processes or as Ray tasks (kg.analyses.sweep_exec): the
results are the same.
Errors: ``OptkgError`` for a bad axis value (names the flag and what was expected).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kg.knowledge.catalog import Catalog
from kg.analyses.check import describe_stack
from kg.core.errors import OptkgError
from kg.engine.rules import SEVERITY_ORDER, RuleSet
from kg.inputs.stack import Stack
from kg.analyses.sweep_eval import AXES, KV_KEYS, LEGACY, Evaluator, Plan

SCHEMA_VERSION = "1.1"  # 1.1: more axes (dp, ep, dp attention, max_num_seqs, quantization, GPU, engine), speed
MAX_COMBINATIONS = 100_000
# Bounded work (issue 26 #13): a combination costs a few CPU ms (10,000 took 47 s), so the sweep times its first
# combinations and refuses, before running them all, when the whole sweep would take longer than this many
# seconds (``--max-seconds`` raises it); parallel executors divide the estimate by their workers.
MAX_SECONDS = 10.0
_PROBE = 3  # combinations timed for the estimate (the fastest counts: the first one also warms caches)


def parse_int_list(text: str, flag: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]`` (order kept, duplicates dropped). Raises OptkgError naming ``flag``."""
    out: list[int] = []
    for part in str(text).split(","):
        p = part.strip()
        # ASCII digits only: str.isdigit() accepts '²' (int() refuses it) and '٨' (read as 8); 6 digits suffice
        if not (p.isascii() and p.isdigit()) or len(p) > 6 or int(p) < 1:
            if p.isascii() and p.isdigit() and len(p) > 6:
                raise OptkgError(f"{flag}: a {len(p)}-digit value is larger than any parallel size optkg models (65536)")
            raise OptkgError(f"{flag}: expected a comma-separated list of positive integers, found {part.strip()!r}"
                             f" in {text!r}")
        v = int(p)
        if v > 65536:
            raise OptkgError(f"{flag}: {v} is larger than any parallel size optkg models (65536)")
        if v not in out:
            out.append(v)
    return out


def parse_str_list(text: str, flag: str) -> list[str]:
    """``"auto,fp8"`` -> ``["auto", "fp8"]`` (lower-cased, order kept, duplicates dropped)."""
    out: list[str] = []
    for part in str(text).split(","):
        p = part.strip().lower()
        if not p:
            raise OptkgError(f"{flag}: expected a comma-separated list of values, found an empty item in {text!r}")
        if p not in out:
            out.append(p)
    return out


def parse_onoff_list(text: str, flag: str) -> list[bool]:
    """``"on,off"`` -> ``[True, False]``."""
    words = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False}
    out: list[bool] = []
    for p in parse_str_list(text, flag):
        if p not in words:
            raise OptkgError(f"{flag}: expected a comma-separated list of on/off, found {p!r} in {text!r}")
        if words[p] not in out:
            out.append(words[p])
    return out


@dataclass
class Combination:
    """One point of the sweep (see module doc for field meanings and units). ``axes``: the values of the
    axes beyond the four first ones (dp_size, ep_size, enable_dp_attention, max_num_seqs, quantization), the
    GPU and the engine; ``speed``: kg.speed.serving's result (None without a workload)."""

    tp_size: int
    pp_size: int
    dcp_size: int
    kv_cache_dtype: str
    gpus_needed: int
    valid: bool
    fits: bool
    reasons: list[str]
    findings: list[dict[str, str]]
    kv: dict[str, Any]
    axes: dict[str, Any] = field(default_factory=dict)
    speed: dict[str, Any] | None = None
    rank: int = 0
    pareto: bool = False
    meets_slo: bool | None = None

    def speed_ok(self) -> bool:
        return bool(self.speed) and self.speed.get("status") == "ok"

    def to_dict(self) -> dict[str, Any]:
        d = {"rank": self.rank, "tp_size": self.tp_size, "pp_size": self.pp_size, "dcp_size": self.dcp_size,
             "kv_cache_dtype": self.kv_cache_dtype, **self.axes, "gpus_needed": self.gpus_needed,
             "valid": self.valid, "fits": self.fits, "reasons": self.reasons, "findings": self.findings, **self.kv}
        if self.speed is not None:
            sp = self.speed
            d["speed"] = {k: sp.get(k) for k in ("status", "reasons", "ttft_ms", "itl_ms", "tokens_per_s_per_gpu",
                                                 "tokens_per_s_per_request", "running", "queued", "estimator",
                                                 "notes") if k in sp}
            d["meets_slo"], d["pareto"] = self.meets_slo, self.pareto
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Combination":
        kv = {k: d[k] for k in KV_KEYS if k in d}
        axes = {k: d[k] for k in ("dp_size", "ep_size", "enable_dp_attention", "max_num_seqs", "quantization",
                                  "gpu", "engine") if k in d}
        return cls(d["tp_size"], d["pp_size"], d["dcp_size"], d["kv_cache_dtype"], d["gpus_needed"], d["valid"],
                   d["fits"], d["reasons"], d["findings"], kv, axes, d.get("_speed"))


@dataclass
class SweepResult:
    """All combinations, ranked (``combinations[0]`` is the best), plus what the sweep ran over."""

    base: dict[str, Any]
    axes: dict[str, list[Any]]
    combinations: list[Combination]
    gpu_count: int | None
    kv_budget_source: str | None
    notes: list[str] = field(default_factory=list)
    workload: dict[str, int] | None = None
    slo: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cs = self.combinations
        best = next((c for c in cs if c.valid and c.fits), None)
        summary = {"combinations": len(cs), "valid": sum(c.valid for c in cs),
                   "valid_and_fit": sum(c.valid and c.fits for c in cs),
                   "best": ({**{k: getattr(best, k) for k in LEGACY}, **best.axes} if best else None)}
        if self.workload is not None:
            summary["with_speed"] = sum(c.valid and c.fits and c.speed_ok() for c in cs)
            summary["meeting_slo"] = sum(bool(c.meets_slo) for c in cs)
            summary["pareto"] = sum(c.pareto for c in cs)
        return {
            "schema_version": SCHEMA_VERSION, "kind": "sweep", "base": self.base, "axes": self.axes,
            "gpu_count": self.gpu_count, "kv_budget_source": self.kv_budget_source, "notes": self.notes,
            "workload": self.workload, "slo": self.slo, "summary": summary,
            "combinations": [c.to_dict() for c in cs],
        }


def _check_dtypes(dtypes: list[str], model) -> None:
    """Refuse a KV dtype kg.derive.kv cannot size (its OptkgError names --kv-cache-dtype and the known values)."""
    from kg.derive.kv import kv_element_bytes
    for d in dtypes:
        kv_element_bytes(d, model)


def build_plan(base: Stack, catalog: Catalog, axes_in: dict[str, list[Any] | None], gpus: list[str] | None = None,
               engines: list[str] | None = None, invalid_on: str = "error", workload: Any = None,
               ttft_ms: float | None = None, itl_ms: float | None = None) -> Plan:
    """A checked Plan: every axis value known to the engines asked for (OptkgError naming the flag)."""
    if base.model is None:
        raise OptkgError(f"{base.source or 'stack'}: the stack names no model (add `model:` or pass --config)")
    if invalid_on not in SEVERITY_ORDER:
        raise OptkgError(f"invalid_on: expected one of {', '.join(SEVERITY_ORDER)}, found {invalid_on!r}")
    vals = base.values()
    axes: dict[str, list[Any]] = {}
    for name in AXES:
        given = axes_in.get(name)
        if given:
            axes[name] = list(given)
        elif name in LEGACY:
            cur = vals.get(name)
            axes[name] = [str(cur or "auto").lower()] if name == "kv_cache_dtype" else [int(cur or 1)]
    _check_dtypes(axes["kv_cache_dtype"], base.model)
    from kg.speed.mapping import ENGINES
    for e in engines or []:
        if e not in ENGINES and e != base.engine:
            raise OptkgError(f"--engine: unknown engine {e!r}; sweepable: {', '.join(ENGINES)}")
    gl: list[str | None] = [catalog.resolve_hardware(g)["id"] for g in gpus] if gpus else [None]
    plan = Plan(base, axes, gl, list(engines) if engines else [None], invalid_on, workload, ttft_ms, itl_ms)
    if plan.size() > MAX_COMBINATIONS:
        raise OptkgError(f"{plan.size():,} combinations is over the limit of {MAX_COMBINATIONS:,}; narrow the axes "
                         f"({', '.join(AXES[k] for k in axes if len(axes[k]) > 1)})")
    return plan


def _refuse_long(n: int, each: float, max_seconds: float, workers: int = 1) -> None:
    """OptkgError when ``n`` combinations at ``each`` CPU seconds over ``workers`` would take over ``max_seconds``."""
    import math
    est = n * each / max(1, workers)
    if est > max_seconds:
        on = f" on {workers} workers" if workers > 1 else ""
        raise OptkgError(f"{n:,} combinations would take about {est:,.0f} s{on} ({each * 1000:.1f} ms each, timed on "
                         f"the first {_PROBE}), over the bound of {max_seconds:g} s; narrow the axes or pass "
                         f"--max-seconds {math.ceil(est * 1.5)}")


def sweep(base: Stack, catalog: Catalog, rules: RuleSet, tp_sizes: list[int] | None = None,
          dcp_sizes: list[int] | None = None, pp_sizes: list[int] | None = None,
          kv_cache_dtypes: list[str] | None = None, invalid_on: str = "error", *,
          axes: dict[str, list[Any]] | None = None, gpus: list[str] | None = None, engines: list[str] | None = None,
          workload: Any = None, ttft_ms: float | None = None, itl_ms: float | None = None,
          executor: str = "inline", jobs: int | None = None, address: str | None = None,
          progress: bool = False, catalog_dir: str | None = None, rules_dir: str | None = None,
          max_seconds: float = MAX_SECONDS) -> SweepResult:
    """Check (and, with a ``workload``, time) every combination of the axes on ``base`` and rank them (see
    module doc). An axis left as None keeps the base stack's value. ``executor``: ``inline`` (this process),
    ``local`` (worker processes) or ``ray`` (Ray tasks, ``address`` of a cluster or a local Ray);
    kg.analyses.sweep_exec. Raises OptkgError for an unknown KV dtype, an axis the engine cannot set, more
    than ``MAX_COMBINATIONS`` combinations, more work than ``max_seconds`` (estimated from the first
    combinations, before the rest run), or a stack with no model."""
    from kg.analyses.sweep_exec import run_plan
    from kg.core.parallel import frozen_gc
    given = dict(axes or {})
    given.update({k: v for k, v in (("tp_size", tp_sizes), ("dcp_size", dcp_sizes), ("pp_size", pp_sizes),
                                    ("kv_cache_dtype", kv_cache_dtypes)) if v})
    untimed = workload is not None and not gpus and base.hardware is None
    plan = build_plan(base, catalog, given, gpus, engines, invalid_on, None if untimed else workload, ttft_ms, itl_ms)
    plan.catalog_dir, plan.rules_dir = catalog_dir, rules_dir  # what worker processes load
    ev = Evaluator(plan, catalog, rules)
    ev.check_axes()
    with frozen_gc():  # the catalog, rules and tables out of the collector's passes (kg.core.parallel)
        if plan.size() > _PROBE:
            import time

            from kg.analyses.sweep_exec import cpus
            took, probed = [], []
            for i in range(_PROBE):
                t0 = time.process_time()
                probed.append(ev.evaluate(i))
                took.append(time.process_time() - t0)
            _refuse_long(plan.size(), min(took), max_seconds, 1 if executor == "inline" else (jobs or cpus()))
        else:
            probed = []
        rows = run_plan(plan, ev, executor, jobs, address, progress, probed)
        result = rank(plan, rows)
    if untimed:
        result.notes.append("no speed: the estimator times a named GPU; pass --gpu (one, or a list: --gpu H100,H200)")
    return result


def rank(plan: Plan, rows: list[dict[str, Any]]) -> SweepResult:
    """Combinations from evaluated rows, ranked (module doc), Pareto-marked, with the header's notes."""
    combos = [Combination.from_dict(r) for r in rows]
    default_mml = next((r.get("_mml") for r in rows if r.get("_mml")), None)
    for c in combos:
        if c.speed_ok():
            sp = c.speed
            c.meets_slo = ((plan.ttft_ms is None or sp["ttft_ms"] <= plan.ttft_ms)
                           and (plan.itl_ms is None or sp["itl_ms"] <= plan.itl_ms))
    timed = [c for c in combos if c.valid and c.fits and c.speed_ok()]
    for c in timed:  # not beaten on both tokens/s per GPU and per request by another timed combination
        g, u = c.speed["tokens_per_s_per_gpu"], c.speed["tokens_per_s_per_request"]
        c.pareto = not any(o.speed["tokens_per_s_per_gpu"] >= g and o.speed["tokens_per_s_per_request"] >= u
                           and (o.speed["tokens_per_s_per_gpu"], o.speed["tokens_per_s_per_request"]) != (g, u)
                           for o in timed)
    names = list(plan.axes)
    order = {name: {v: i for i, v in enumerate(values)} for name, values in plan.axes.items()}
    extra = {"gpu": {g: i for i, g in enumerate(plan.gpus)}, "engine": {e: i for i, e in enumerate(plan.engines)}}

    def key(c: Combination):
        vals = {**{k: getattr(c, k) for k in LEGACY}, **c.axes}
        speed_key = (0, not c.meets_slo, -c.speed["tokens_per_s_per_gpu"]) if c.speed_ok() else (1, True, 0.0)
        return (not (c.valid and c.fits), not c.valid, *speed_key, -(c.kv["unique_kv_tokens_per_gpu"] or 0),
                len(c.findings), c.gpus_needed, extra["gpu"].get(c.axes.get("gpu"), 0),
                extra["engine"].get(c.axes.get("engine"), 0), *(order[n].get(vals.get(n), 0) for n in names))

    combos.sort(key=key)
    for i, c in enumerate(combos, 1):
        c.rank = i
    # the header's budget is the best row's, as check prints it for that stack (the error bar grows with TP:
    # non-torch memory, kg.derive.budget.non_torch_bytes); rows with another budget say so in their JSON
    sources = [c.kv.get("kv_budget_source") for c in combos if c.kv.get("kv_budget_source")]
    budget_source = sources[0] if sources else None
    if budget_source is not None and len(set(sources)) > 1:
        budget_source = f"rank 1: {budget_source}; other rows differ (kv_budget_source in --format json)"
    notes = []
    vals = plan.base.values()
    if budget_source is None:
        notes.append("no KV budget: pass --gpu (estimate) or --kv-budget-gib for KV tokens and concurrency")
    elif vals.get("max_model_len") is None:
        if any(c.kv.get("max_concurrency") is not None for c in combos):
            # the column is filled at the length the engine runs with when none is given (kg.analyses.check)
            notes.append(f"max concurrency at the engine's default max_model_len {default_mml:,} tokens "
                         "(the model's context limit); pass --max-model-len for another length"
                         if default_mml else "max concurrency at the engine's default max_model_len")
        else:
            notes.append("pass --max-model-len for max concurrency")
    if plan.workload is not None and "dcp_size" in plan.axes and len(plan.axes["dcp_size"]) > 1:
        notes.append("speed: the estimator has no DCP kernels; DCP changes only the KV capacity (running requests)")
    shown_axes = {k: v for k, v in plan.axes.items()}
    if plan.gpus != [None]:
        shown_axes["gpu"] = plan.gpus
    if plan.engines != [None]:
        shown_axes["engine"] = plan.engines
    return SweepResult(describe_stack(plan.base), shown_axes, combos, plan.base.gpu_count, budget_source, notes,
                       plan.workload.to_dict() if plan.workload is not None else None,
                       {"ttft_ms": plan.ttft_ms, "itl_ms": plan.itl_ms} if plan.workload is not None else {})


# CSV columns (kg.output.sweep_report.render_csv): the axes, the verdict, the KV numbers, the speed
CSV_COLUMNS = ("rank", "tp_size", "pp_size", "dp_size", "ep_size", "enable_dp_attention", "dcp_size", "max_num_seqs",
               "quantization", "kv_cache_dtype", "gpu", "engine", "gpus_needed", "valid", "fits",
               "kv_bytes_per_token_per_gpu", "kv_replication", "kv_budget_bytes_per_gpu", "kv_tokens_per_gpu",
               "kv_tokens_total", "unique_kv_tokens_per_gpu", "max_concurrency", "speed_status", "ttft_ms", "itl_ms",
               "tokens_per_s_per_gpu", "tokens_per_s_per_request", "running", "queued", "meets_slo", "pareto",
               "findings", "reasons")
