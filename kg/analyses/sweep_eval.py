"""Evaluating one combination of a sweep (kg.analyses.sweep): the Plan (base stack, axes, GPUs, engines,
workload; picklable, shipped once to worker processes or Ray's object store) and the Evaluator that copies
the base, applies the combination's axis values the way the engine's flags would, checks it and times it.
Executors (kg.analyses.sweep_exec) call ``Evaluator.evaluate(i)``; kg.analyses.sweep ranks the rows.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kg.knowledge.catalog import Catalog
from kg.analyses.check import Checked, check_parts, check_stack, report_of
from kg.core.errors import OptkgError
from kg.core.parallel import gc_tick
from kg.engine.expr import evaluate
from kg.engine.incremental import Session, use
from kg.engine.rules import SEVERITY_ORDER, RuleSet
from kg.engines import of
from kg.inputs.stack import Stack, add_technique
from kg.speed.mapping import ENGINES  # module-level: a function-level import costs ~2.5 us a stack

# setting -> the flag a user would type (for error messages)
# setting -> the flag a user would type (for error messages), in the order combinations are enumerated
AXES = {"tp_size": "--tp", "pp_size": "--pp", "dp_size": "--dp", "ep_size": "--ep", "enable_dp_attention": "--dp-attention",
        "dcp_size": "--dcp", "max_num_seqs": "--max-num-seqs", "quantization": "--quantization",
        "kv_cache_dtype": "--kv-cache-dtype"}
# the value a stack has when it does not set the axis (an axis that only lists it needs no flag)
AXIS_DEFAULTS = {"tp_size": 1, "pp_size": 1, "dp_size": 1, "ep_size": 1, "enable_dp_attention": False, "dcp_size": 1,
                 "kv_cache_dtype": "auto"}
LEGACY = ("tp_size", "pp_size", "dcp_size", "kv_cache_dtype")


KV_KEYS = ("kv_bytes_per_token_per_gpu", "kv_replication", "kv_budget_bytes_per_gpu", "kv_budget_source",
           "kv_budget_error_bytes", "kv_tokens_per_gpu", "kv_tokens_total", "max_concurrency", "unique_kv_tokens_per_gpu")
# the check report's derived numbers a combination reads (KV_KEYS, _fit_reasons, the pools' basis, max_model_len)
DERIVED_READ = (*(k for k in KV_KEYS if k != "unique_kv_tokens_per_gpu"), "kv_tokens_total_basis", "max_model_len_effective")


def _flag_specs(engine: str | None, version: str | None = None) -> dict[str, dict[str, Any]]:
    """setting name -> flag spec of the engine's flag table (vLLM's when the engine is unknown), keeping only the
    flags the release ``version`` has (``catalog/engines/options/<engine>.yaml``, as the launch parser reads it):
    SGLang 0.5.10 has no --dcp-size (from 0.5.15), so a DCP sweep there is refused."""
    from kg.inputs.launch.argv import present_at, release_for, release_options
    from kg.inputs.stack import _engine_tables
    tables = _engine_tables()
    table = tables.get(engine or "") or tables.get("vllm") or {"flags": []}
    data = release_options(engine or "vllm") if version else None
    release = release_for(data, version)[0] if data else None
    opts = (data or {}).get("options") or {}
    out: dict[str, dict[str, Any]] = {}
    for spec in table.get("flags") or []:
        names = [n for n in spec.get("names") or [] if n in opts]
        if release and names and not any(present_at(opts[n], release) for n in names):
            continue  # the release has none of this entry's spellings
        if spec.get("set") in (*AXES, "enable_expert_parallel") and spec["set"] not in out:
            out[spec["set"]] = spec
    return out


def _copy_stack(base: Stack) -> Stack:
    return replace(base, techniques={k: dict(v) for k, v in base.techniques.items()}, settings=dict(base.settings),
                   ignored=list(base.ignored), notes=list(base.notes))


class _Applier:
    """Sets one axis value on a stack the way the engine's flag would (see module doc)."""

    def __init__(self, base: Stack, catalog: Catalog):
        self.catalog = catalog
        self.specs = _flag_specs(base.engine, base.engine_version)
        self.engine = base.engine or "vllm"
        self.version = base.engine_version
        self.whens: dict[tuple, bool] = {}  # _when's answers
        # techniques that take each setting as a parameter (their parameter mirrors the setting)
        # (one pass over the catalog: a 40-stack sweep spent ~4 % of its time on one pass per axis)
        wanted = (*AXES, "enable_expert_parallel")
        self.param_owners: dict[str, list[str]] = {name: [] for name in wanted}
        for tid, t in catalog.techniques.items():
            names = {p.get("name") for p in t.get("parameters") or []}
            for name in wanted:
                if name in names:
                    self.param_owners[name].append(tid)

    def _when(self, when: str, value: Any) -> bool:
        """A flag entry's ``when`` over the axis value (once per text, value and its type: a sweep sets each axis on
        every stack)."""
        try:
            key = (when, value.__class__, value)
            hit = self.whens.get(key)
        except TypeError:  # an unhashable value: evaluated each time
            return bool(evaluate(when, {"value": value}))
        if hit is None:
            hit = self.whens[key] = bool(evaluate(when, {"value": value}))
        return hit

    def check_supported(self, name: str, values: list[Any], default: Any) -> None:
        if name == "ep_size" and "enable_expert_parallel" in self.specs:
            return  # vLLM: --enable-expert-parallel (ep = tp x dp)
        if name not in self.specs and any(v != default for v in values):
            at = f" at release {self.version}" if self.version else ""
            raise OptkgError(f"{AXES[name]}: the {self.engine} flag table (catalog/engines/{self.engine}.yaml) has no "
                             f"flag that sets {name}{at}, so {self.engine} cannot run it; sweep only {default}")

    def apply(self, st: Stack, name: str, value: Any) -> None:
        if name == "ep_size" and name not in self.specs and "enable_expert_parallel" in self.specs:
            name, value = "enable_expert_parallel", value > 1  # vLLM: EP is a switch over all tp x dp ranks
        if name == "enable_dp_attention" and not value and name not in self.specs:
            return  # the engine has no DP-attention switch: off is what it runs
        if name == "quantization" and str(value).lower() == "none":
            # sweep --quantization none: the launch without --quantization (the checkpoint's own format)
            st.settings.pop(name, None)
            for tid in set(((self.specs.get(name) or {}).get("technique_by_value") or {}).values()):
                st.techniques.pop(self.catalog.resolve(tid) or tid, None)
            return
        st.settings[name] = value
        spec = self.specs.get(name)
        by_value = (spec or {}).get("technique_by_value") or {}
        if by_value:  # --quantization awq -> awq-quantization, ...: the value picks the technique
            for tid in set(by_value.values()):
                st.techniques.pop(self.catalog.resolve(tid) or tid, None)
            tid = by_value.get(str(value))
            if tid and self.catalog.resolve(tid):
                add_technique(st, self.catalog, self.catalog.resolve(tid), None, AXES.get(name, name))
        tid = spec.get("technique") if spec else None
        if tid and self.catalog.resolve(tid):
            tid = self.catalog.resolve(tid)
            # a switch (type flag, vLLM --enable-expert-parallel) turns its technique on only when set: ep 1 -> off
            on = self._when(spec["when"], value) if spec.get("when") else \
                (bool(value) if spec.get("type") == "flag" else True)
            if on and tid not in st.techniques:
                add_technique(st, self.catalog, tid, None, AXES.get(name, name))
            elif not on:
                st.techniques.pop(tid, None)
        for owner in self.param_owners.get(name, []):
            if owner in st.techniques:
                st.techniques[owner][name] = value


@dataclass
class Plan:
    """What every evaluation needs, picklable (shipped once to worker processes or Ray's object store):
    the base stack, the axes, the GPU and engine lists, the workload and limits."""

    base: Stack
    axes: dict[str, list[Any]]
    gpus: list[str | None]
    engines: list[str | None]
    invalid_on: str = "error"
    workload: Any = None  # kg.speed.serving.Workload
    ttft_ms: float | None = None
    itl_ms: float | None = None
    catalog_dir: str | None = None
    rules_dir: str | None = None

    def size(self) -> int:
        n = len(self.gpus) * len(self.engines)
        for v in self.axes.values():
            n *= len(v)
        return n

    def point(self, i: int) -> dict[str, Any]:
        """The ``i``-th combination's axis values (row-major over gpus, engines, then ``AXES`` order)."""
        names = list(self.axes)
        sizes = [len(self.gpus), len(self.engines)] + [len(self.axes[k]) for k in names]
        idx = []
        for n in reversed(sizes):
            idx.append(i % n)
            i //= n
        idx.reverse()
        out = {"gpu": self.gpus[idx[0]], "engine": self.engines[idx[1]]}
        out.update({k: self.axes[k][j] for k, j in zip(names, idx[2:])})
        return out


class Evaluator:
    """Evaluates combinations of a Plan in one process (catalog and rules loaded once per process)."""

    def __init__(self, plan: Plan, catalog: Catalog | None = None, rules: RuleSet | None = None,
                 incremental: bool = True):
        from pathlib import Path
        if catalog is None:
            from kg.knowledge.catalog import load_catalog
            catalog, problems = load_catalog(Path(plan.catalog_dir) if plan.catalog_dir else None)
            if problems:
                raise OptkgError(f"the catalog has {len(problems)} problem(s); run `optkg validate`")
        if rules is None:
            from kg.engine.rules import load_ruleset
            rules = load_ruleset("check", Path(plan.rules_dir) if plan.rules_dir else None)
        self.plan, self.catalog, self.rules = plan, catalog, rules
        # incremental: a rule or check row whose inputs equal those of an earlier stack keeps its result
        # (kg.engine.incremental; the same findings as evaluating every stack afresh: tests/test_sweep_incremental.py)
        self.session = Session() if incremental else None
        self.threshold = SEVERITY_ORDER[plan.invalid_on]
        self.bases: dict[str | None, Stack] = {}
        self.appliers: dict[str | None, _Applier] = {}
        self.hardware: dict[str | None, Any] = {}
        for e in plan.engines:
            b = plan.base if e is None or e == plan.base.engine else replace(
                _copy_stack(plan.base), engine=e, engine_version=None, engine_version_assumed=True)
            self.bases[e] = b
            self.appliers[e] = _Applier(b, catalog)
        for g in plan.gpus:
            self.hardware[g] = plan.base.hardware if g is None else catalog.resolve_hardware(g)

    def check_axes(self) -> None:
        for e, ap in self.appliers.items():
            for name, values in self.plan.axes.items():
                ap.check_supported(name, values, AXIS_DEFAULTS.get(name))

    def stack(self, i: int) -> tuple[Stack, dict[str, Any], str | None]:
        """Combination ``i``'s stack, its axis values (without GPU and engine) and its GPU."""
        pv = self.plan.point(i)
        gpu, engine = pv.pop("gpu"), pv.pop("engine")
        ap, base = self.appliers[engine], self.bases[engine]
        st = _copy_stack(base)
        st.hardware = self.hardware[gpu]
        for name, v in pv.items():
            ap.apply(st, name, v)
        return st, pv, gpu

    def check(self, st: Stack):
        """check_stack of one combination; results of rules and check rows whose inputs did not change since an
        earlier combination are kept (``incremental``)."""
        with use(self.session):
            return check_stack(st, self.catalog, self.rules)

    def parts(self, st: Stack) -> Checked:
        """``check`` up to its report (kg.analyses.check.check_parts): a rules-only sweep keeps only the findings'
        ids and severities and a few derived numbers of each combination, so it does not write the whole report."""
        with use(self.session):
            return check_parts(st, self.catalog, self.rules)

    def evaluate(self, i: int) -> dict[str, Any]:
        """Combination ``i`` as plain data (``Combination.to_dict`` keys, speed under ``_speed``)."""
        gc_tick()  # a sweep's collector runs every few thousand stacks (kg.core.parallel.frozen_gc)
        st, pv, gpu = self.stack(i)
        if self.session is None:  # the reference: the whole report, as `optkg check` writes it
            rep = self.check(st)
            d = rep.derived
            brief = [(f.rule_id, f.severity) for f in rep.findings]
        else:
            c = self.parts(st)
            d = c.derived_subset(DERIVED_READ)
            brief = c.findings_brief()
        vals = st.values()
        tp, pp, dp = int(vals.get("tp_size") or 1), int(vals.get("pp_size") or 1), int(vals.get("dp_size") or 1)
        findings = [{"rule_id": r, "severity": sev} for r, sev in brief]
        blocking = [r for r, sev in brief if SEVERITY_ORDER.get(sev, 0) >= self.threshold]
        gpus = _gpus_needed(st, vals)
        layout = _layout_errors(st, tp, dp, pv.get("ep_size"))
        fit_reasons = _fit_reasons(st, d, vals, gpus, tp, pp, dp)
        fits = not fit_reasons
        reasons = [f"rule {r}" for r in blocking] + layout or fit_reasons
        kv = {k: d.get(k) for k in KV_KEYS if k != "unique_kv_tokens_per_gpu"}
        # kv_tokens_total counts every scheduler's pool when check says "x dp" (SGLang --dp): those pools sit on
        # all the layout's GPUs unless DP attention splits the TP group (then on tp x pp); else one engine's pool
        per_dp = str(d.get("kv_tokens_total_basis") or "").startswith("x dp") and gpus == tp * pp * dp
        pool_gpus = gpus if per_dp else tp * pp
        kv["unique_kv_tokens_per_gpu"] = (int(d["kv_tokens_total"] // pool_gpus)
                                          if d.get("kv_tokens_total") is not None else None)
        axes = {k: v for k, v in pv.items() if k not in LEGACY}
        if len(self.plan.gpus) > 1 or gpu is not None:
            axes["gpu"] = (st.hardware or {}).get("id") if st.hardware else None
        if len(self.plan.engines) > 1:
            axes["engine"] = st.engine
        out = {"tp_size": pv.get("tp_size", tp), "pp_size": pv.get("pp_size", pp), "dcp_size": pv.get("dcp_size", 1),
               "kv_cache_dtype": pv.get("kv_cache_dtype", "auto"), **axes, "gpus_needed": gpus,
               "valid": not blocking and not layout, "fits": fits, "reasons": reasons, "findings": findings, **kv,
               "_mml": d.get("max_model_len_effective")}
        if self.plan.workload is not None and not blocking and not layout and fits:
            from kg.speed.serving import speed_for_stack
            if self.session is not None:
                rep = report_of(c, self.catalog)
            out["_speed"] = speed_for_stack(st, rep.to_dict(), self.plan.workload)
        elif self.plan.workload is not None:
            out["_speed"] = {"status": "infeasible", "reasons": reasons}
        return out


def _gpus_needed(st: Stack, vals: dict[str, Any]) -> int:
    """GPUs the layout occupies: the engine's speed mapping knows how DP attention splits the TP group
    (kg.speed.mapping); tp x pp x dp for an engine it does not list."""
    m = ENGINES.get(st.engine or "vllm")
    tp, pp, dp = int(vals.get("tp_size") or 1), int(vals.get("pp_size") or 1), int(vals.get("dp_size") or 1)
    if m is None or st.model is None:
        return tp * pp * dp
    return m.parallel(vals, set(st.techniques), bool(st.model.is_moe)).gpus


def _layout_errors(st: Stack, tp: int, dp: int, ep: int | None) -> list[str]:
    """Expert-parallel sizes the engine cannot be asked for (an invalid layout, as a refusing rule makes one; not a
    memory fit): vLLM's --enable-expert-parallel is a switch over all tp x dp ranks, and a dense model has no
    experts to spread."""
    out = []
    if ep is not None and ep > 1 and "enable_expert_parallel" in st.settings and ep != tp * dp:
        out.append(f"layout: ep {ep} is not selectable: vLLM's --enable-expert-parallel spans all tp x dp = "
                   f"{tp * dp} ranks")
    if ep is not None and ep > 1 and st.model is not None and not st.model.is_moe:
        out.append(f"layout: ep {ep}: the model has no experts")
    return out


def _fit_reasons(st: Stack, d: dict[str, Any], vals: dict[str, Any], gpus: int, tp: int, pp: int,
                 dp: int) -> list[str]:
    out = []
    if st.gpu_count is not None and gpus > st.gpu_count:
        out.append(f"needs {gpus} GPUs (tp {tp} x pp {pp}" + (f" x dp {dp})" if gpus == tp * pp * dp else
                                                               f", dp {dp} attention groups inside TP)")
                   + f"; the stack has {st.gpu_count}")
    if d.get("kv_budget_bytes_per_gpu") == 0:
        out.append("no KV-cache memory left per GPU (estimated weights fill the budget)"
                   if str(d.get("kv_budget_source", "")).startswith("estimated") else "the KV budget is 0")
    elif d.get("kv_tokens_per_gpu") == 0:
        out.append("the KV budget per GPU holds less than one KV block")
    elif d.get("max_concurrency") is not None and d["max_concurrency"] < 1 and of(st).refuses_context_over_kv_pool:
        # vLLM refuses to start when one max_model_len request does not fit in the KV cache; SGLang starts and caps
        # the request length at the pool (kg.engines.base: refuses_context_over_kv_pool)
        mml = vals.get("max_model_len") or d.get("max_model_len_effective")
        out.append(f"one request of max_model_len {mml} tokens does not fit in "
                   f"the KV cache (max concurrency {d['max_concurrency']})")
    return out
