"""Config sweeps: one base stack x axes of parallel sizes and KV dtypes, every combination checked.

Input: a base ``Stack`` (from a stack file, ``--vllm``, ``--sglang`` or ``--config``) and lists of
``tp_size``, ``dcp_size``, ``pp_size`` (ranks) and ``kv_cache_dtype`` values. Each combination is a
copy of the base with those four settings replaced; the technique each setting switches on is
taken from the engine's flag table (``catalog/engines/<engine>.yaml``; the vLLM table when the
stack names no engine), exactly as a pasted command would do it: ``tp_size > 1`` turns on
``tensor-parallelism``, ``dcp_size > 1`` ``decode-context-parallelism``, ``pp_size > 1``
``pipeline-parallelism``, ``kv_cache_dtype != auto`` ``kv-cache-quantization``.

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

Ranking (rank 1 is best): valid and fitting first; then most ``unique_kv_tokens_per_gpu``; then
fewest findings; then fewest GPUs; ties broken by (tp, pp, dcp, dtype) for a stable order.
Errors: ``OptkgError`` for a bad axis value (names the flag and what was expected).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from kg.knowledge.catalog import Catalog
from kg.analyses.check import check_stack, describe_stack
from kg.core.errors import OptkgError
from kg.core.numfmt import SWEEP, fmt_num
from kg.engine.rules import SEVERITY_ORDER, RuleSet
from kg.inputs.stack import Stack, add_technique

SCHEMA_VERSION = "1.0"
MAX_COMBINATIONS = 100_000

# setting -> the flag a user would type (for error messages)
AXES = {"tp_size": "--tp", "pp_size": "--pp", "dcp_size": "--dcp", "kv_cache_dtype": "--kv-cache-dtype"}


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


@dataclass
class Combination:
    """One point of the sweep (see module doc for field meanings and units)."""

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
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "tp_size": self.tp_size, "pp_size": self.pp_size, "dcp_size": self.dcp_size,
                "kv_cache_dtype": self.kv_cache_dtype, "gpus_needed": self.gpus_needed, "valid": self.valid,
                "fits": self.fits, "reasons": self.reasons, "findings": self.findings, **self.kv}


@dataclass
class SweepResult:
    """All combinations, ranked (``combinations[0]`` is the best), plus what the sweep ran over."""

    base: dict[str, Any]
    axes: dict[str, list[Any]]
    combinations: list[Combination]
    gpu_count: int | None
    kv_budget_source: str | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        cs = self.combinations
        best = next((c for c in cs if c.valid and c.fits), None)
        return {
            "schema_version": SCHEMA_VERSION, "kind": "sweep", "base": self.base, "axes": self.axes,
            "gpu_count": self.gpu_count, "kv_budget_source": self.kv_budget_source, "notes": self.notes,
            "summary": {"combinations": len(cs), "valid": sum(c.valid for c in cs),
                        "valid_and_fit": sum(c.valid and c.fits for c in cs),
                        "best": ({k: getattr(best, k) for k in ("tp_size", "pp_size", "dcp_size", "kv_cache_dtype")}
                                 if best else None)},
            "combinations": [c.to_dict() for c in cs],
        }


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
        if spec.get("set") in AXES and spec["set"] not in out:
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
        # techniques that take each setting as a parameter (their parameter mirrors the setting)
        self.param_owners: dict[str, list[str]] = {}
        for name in AXES:
            self.param_owners[name] = [tid for tid, t in catalog.techniques.items()
                                       if any(p.get("name") == name for p in t.get("parameters") or [])]

    def check_supported(self, name: str, values: list[Any], default: Any) -> None:
        if name not in self.specs and any(v != default for v in values):
            at = f" at release {self.version}" if self.version else ""
            raise OptkgError(f"{AXES[name]}: the {self.engine} flag table (catalog/engines/{self.engine}.yaml) has no "
                             f"flag that sets {name}{at}, so {self.engine} cannot run it; sweep only {default}")

    def apply(self, st: Stack, name: str, value: Any) -> None:
        from kg.engine.expr import evaluate
        st.settings[name] = value
        spec = self.specs.get(name)
        tid = spec.get("technique") if spec else None
        if tid and self.catalog.resolve(tid):
            tid = self.catalog.resolve(tid)
            on = not spec.get("when") or bool(evaluate(spec["when"], {"value": value}))
            if on and tid not in st.techniques:
                add_technique(st, self.catalog, tid, None, AXES[name])
            elif not on:
                st.techniques.pop(tid, None)
        for owner in self.param_owners[name]:
            if owner in st.techniques:
                st.techniques[owner][name] = value


def _check_dtypes(dtypes: list[str], model) -> None:
    """Refuse a KV dtype kg.derive.kv cannot size (its OptkgError names --kv-cache-dtype and the known values)."""
    from kg.derive.kv import kv_element_bytes
    for d in dtypes:
        kv_element_bytes(d, model)


def sweep(base: Stack, catalog: Catalog, rules: RuleSet, tp_sizes: list[int] | None = None,
          dcp_sizes: list[int] | None = None, pp_sizes: list[int] | None = None,
          kv_cache_dtypes: list[str] | None = None, invalid_on: str = "error") -> SweepResult:
    """Check every combination of the axes on ``base`` and rank them (see module doc).

    An axis left as None keeps the base stack's value. Raises OptkgError for an unknown KV dtype,
    an axis the engine cannot set, more than ``MAX_COMBINATIONS`` combinations, or a stack with no model.
    """
    if base.model is None:
        raise OptkgError(f"{base.source or 'stack'}: the stack names no model (add `model:` or pass --config)")
    if invalid_on not in SEVERITY_ORDER:
        raise OptkgError(f"invalid_on: expected one of {', '.join(SEVERITY_ORDER)}, found {invalid_on!r}")
    vals = base.values()
    axes: dict[str, list[Any]] = {
        "tp_size": list(tp_sizes or [int(vals.get("tp_size") or 1)]),
        "pp_size": list(pp_sizes or [int(vals.get("pp_size") or 1)]),
        "dcp_size": list(dcp_sizes or [int(vals.get("dcp_size") or 1)]),
        "kv_cache_dtype": list(kv_cache_dtypes or [str(vals.get("kv_cache_dtype") or "auto").lower()]),
    }
    _check_dtypes(axes["kv_cache_dtype"], base.model)
    n = len(axes["tp_size"]) * len(axes["pp_size"]) * len(axes["dcp_size"]) * len(axes["kv_cache_dtype"])
    if n > MAX_COMBINATIONS:
        raise OptkgError(f"{n} combinations is over the limit of {MAX_COMBINATIONS}; narrow --tp/--dcp/--pp/--kv-cache-dtype")
    applier = _Applier(base, catalog)
    for name, default in (("tp_size", 1), ("pp_size", 1), ("dcp_size", 1), ("kv_cache_dtype", "auto")):
        applier.check_supported(name, axes[name], default)
    threshold = SEVERITY_ORDER[invalid_on]
    dp = int(vals.get("dp_size") or 1)
    combos: list[Combination] = []
    default_mml = None
    for tp, pp, dcp, kvdt in itertools.product(axes["tp_size"], axes["pp_size"], axes["dcp_size"], axes["kv_cache_dtype"]):
        st = _copy_stack(base)
        applier.apply(st, "tp_size", tp)
        applier.apply(st, "pp_size", pp)
        applier.apply(st, "dcp_size", dcp)
        applier.apply(st, "kv_cache_dtype", kvdt)
        rep = check_stack(st, catalog, rules)
        d = rep.derived
        default_mml = default_mml or d.get("max_model_len_effective")
        findings = [{"rule_id": f.rule_id, "severity": f.severity} for f in rep.findings]
        blocking = [f.rule_id for f in rep.findings if SEVERITY_ORDER.get(f.severity, 0) >= threshold]
        # SGLang DP attention splits the TP group into dp attention groups (ServerArgs._handle_data_parallelism,
        # layers/dp_attention.py: attn_tp = tp / dp), so it runs on tp x pp GPUs, as check's gpus_required
        dp_attn = st.engine == "sglang" and "dp-attention" in st.techniques
        gpus = tp * pp * (1 if dp_attn else dp)
        fit_reasons = []
        if base.gpu_count is not None and gpus > base.gpu_count:
            how = f"tp {tp} x pp {pp}" + (f", dp {dp} attention groups inside TP" if dp_attn else f" x dp {dp}")
            fit_reasons.append(f"needs {gpus} GPUs ({how}); the stack has {base.gpu_count}")
        if d.get("kv_budget_bytes_per_gpu") == 0:
            fit_reasons.append("no KV-cache memory left per GPU (estimated weights fill the budget)"
                               if str(d.get("kv_budget_source", "")).startswith("estimated") else "the KV budget is 0")
        elif d.get("kv_tokens_per_gpu") == 0:
            fit_reasons.append("the KV budget per GPU holds less than one KV block")
        elif d.get("max_concurrency") is not None and d["max_concurrency"] < 1:
            # vLLM refuses to start when one max_model_len request does not fit in the KV cache
            fit_reasons.append(f"one request of max_model_len {vals.get('max_model_len')} tokens does not fit in "
                               f"the KV cache (max concurrency {d['max_concurrency']})")
        fits = not fit_reasons
        # a combination the rules already refuse says so through its rules (which may state the same fact)
        reasons = [f"rule {r}" for r in blocking] or fit_reasons
        kv = {k: d.get(k) for k in ("kv_bytes_per_token_per_gpu", "kv_replication", "kv_budget_bytes_per_gpu",
                                    "kv_budget_source", "kv_budget_error_bytes", "kv_tokens_per_gpu", "kv_tokens_total",
                                    "max_concurrency")}
        # SGLang --dp without DP attention: the dp replicas' pools (in kv_tokens_total) sit on tp x pp x dp GPUs
        pool_gpus = tp * pp * (dp if st.engine == "sglang" and "dp-attention" not in st.techniques else 1)
        kv["unique_kv_tokens_per_gpu"] = (int(d["kv_tokens_total"] // pool_gpus)
                                          if d.get("kv_tokens_total") is not None else None)
        combos.append(Combination(tp, pp, dcp, kvdt, gpus, not blocking, fits, reasons, findings, kv))
    order = {name: {v: i for i, v in enumerate(values)} for name, values in axes.items()}

    def key(c: Combination):
        return (not (c.valid and c.fits), not c.valid, -(c.kv["unique_kv_tokens_per_gpu"] or 0), len(c.findings),
                c.gpus_needed, order["tp_size"][c.tp_size], order["pp_size"][c.pp_size],
                order["dcp_size"][c.dcp_size], order["kv_cache_dtype"][c.kv_cache_dtype])

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
    return SweepResult(describe_stack(base), axes, combos, base.gpu_count, budget_source, notes)


# ---------------------------------------------------------------------------------------------
# renderers (input: SweepResult.to_dict())

CSV_COLUMNS = ("rank", "tp_size", "pp_size", "dcp_size", "kv_cache_dtype", "gpus_needed", "valid", "fits",
               "kv_bytes_per_token_per_gpu", "kv_replication", "kv_budget_bytes_per_gpu", "kv_tokens_per_gpu",
               "kv_tokens_total", "unique_kv_tokens_per_gpu", "max_concurrency", "findings", "reasons")


def render_text(d: dict[str, Any]) -> str:
    """A table (tabulate), best first, with a header naming the base stack and a summary line."""
    from tabulate import tabulate
    b = d["base"]
    out = [f"optkg sweep: {b['name']}",
           f"  model: {b['model']} ({b['attention']})   engine: {b['engine'] or '-'}   hardware: {b['hardware'] or '-'}"
           f"{' x' + str(d['gpu_count']) if d.get('gpu_count') else ''}"
           f"   KV budget: {d.get('kv_budget_source') or 'unknown'}", ""]
    rows = []
    for c in d["combinations"]:
        verdict = "ok" if c["valid"] and c["fits"] else ("invalid" if not c["valid"] else "does not fit")
        others = [f["rule_id"] for f in c["findings"]]
        rows.append([c["rank"], c["tp_size"], c["pp_size"], c["dcp_size"], c["kv_cache_dtype"], c["gpus_needed"],
                     fmt_num(c["kv_bytes_per_token_per_gpu"], SWEEP), fmt_num(c["kv_tokens_per_gpu"], SWEEP), fmt_num(c["unique_kv_tokens_per_gpu"], SWEEP),
                     fmt_num(c["max_concurrency"], SWEEP), verdict, ", ".join(others) or "-"])
    out.append(tabulate(rows, headers=["#", "tp", "pp", "dcp", "kv dtype", "GPUs", "KV B/token/GPU", "KV tokens/GPU",
                                       "unique tokens/GPU", "max conc.", "verdict", "findings"],
                        tablefmt="simple", disable_numparse=True, colalign=("right",) * 4 + ("left",) + ("right",) * 5
                        + ("left", "left")))
    s = d["summary"]
    out.append("")
    reasons = sorted({r for c in d["combinations"] for r in c["reasons"] if not r.startswith("rule ")})
    for r in reasons[:5]:
        out.append(f"does not fit: {r}")
    for n in d.get("notes") or []:
        out.append(f"note: {n}")
    best = s["best"]
    out.append(f"{s['combinations']} combination(s): {s['valid']} valid by the rules, {s['valid_and_fit']} valid and fit"
               + (f"; best: tp {best['tp_size']} pp {best['pp_size']} dcp {best['dcp_size']} kv {best['kv_cache_dtype']}"
                  if best else "; none runs"))
    return "\n".join(out) + "\n"


def render_csv(d: dict[str, Any]) -> str:
    """One row per combination, columns ``CSV_COLUMNS``; lists joined with ';'; whole-number byte/token
    counts written as integers (max_concurrency, a ratio, keeps its decimals)."""
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for c in d["combinations"]:
        row = []
        for k in CSV_COLUMNS:
            v = c.get(k)
            if k == "findings":
                v = ";".join(f"{f['rule_id']}:{f['severity']}" for f in v)
            elif k == "reasons":
                v = ";".join(v)
            elif isinstance(v, bool):
                v = "true" if v else "false"
            elif v is None:
                v = ""
            elif isinstance(v, float) and v.is_integer() and k != "max_concurrency":
                v = int(v)  # byte and token counts are whole numbers: 24064, not 24064.0
            row.append(v)
        w.writerow(row)
    return buf.getvalue()
