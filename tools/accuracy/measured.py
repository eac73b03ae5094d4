"""What each measured row of aiconfigurator-core's ``silicon_sample.csv`` really ran: the layout, the
clients one engine served, the request lengths the benchmark drew and the engine's launch flags.

The CSV merges dumps of two origins (its ``silicon_data_source`` column):
- **InferenceX** (SemiAnalysisAI/InferenceX, the public single-node serving benchmark): rows whose source is
  ``db-dump/...`` (InferenceX DB records, ``config_id`` / ``workflow_run_id``), ``source_file=2026-04-06.csv``
  or ``source_file=2026-03-25.csv`` (ids ``<date>_<model>_<gpu>_<engine>_<precision>_agg_<isl>x<osl>_c<conc>_
  tp<N>_ep<M>_<n>``). Their launch commands are public (``benchmarks/**/<model>_<precision>_<gpu>[_<engine>].sh``,
  read per release in tools/accuracy/launches.yaml) and so is the client (below).
- **NVIDIA gap analysis** (``source_file=/Users/.../aic-auto-gap-analysis/...``) and two ``*-gap-analysis.csv``
  files: engine flags not published; the engines' defaults are assumed.

Corrections, each counted in docs/speed-accuracy.md with its evidence:
- ``tp x ep`` layouts. The 2026-04-06 dump and the DB dump record an InferenceX ``tp N, ep M`` run (N GPUs) as
  N x M GPUs: SGLang / TensorRT-LLM ``tp_size`` (or ``attention_dp_size``) = N x M with ``moe_tp = moe_ep = M``,
  vLLM ``tp = attention_dp = N`` with ``moe_ep`` = N x M, and ``batch_size`` divided by the inflated DP size.
  The same measurements (equal TTFT and TPOT) appear in the 2026-03-25 dump with the N-GPU layout, and every
  2026-04-06 row whose id names ``tp<N>_ep<M>`` with a recorded world size != N has this signature and no
  other row does (``signature_correction``; tests/test_speed_accuracy_data.py holds it).
- Disaggregated runs recorded as one aggregated engine: the 2026-04-06 dump's GB200 DeepSeek-R1 rows
  (``tp12`` ... ``tp72``, ``ep1``): N = all GPUs of a prefill + decode deployment (e.g. 4 + 32 = 36); most have a
  disaggregated twin with the same concurrency, TTFT and TPOT. Not evaluable as one engine.

Concurrency: ``batch_size`` is the clients per scheduler (per attention-DP rank, per worker when a Dynamo
deployment runs several workers); one engine (the optkg stack) serves ``batch_size x attention_dp`` clients.

Request lengths: InferenceX's client draws every input and output length uniformly from
``[int(0.8 L), L]`` (utils/bench_serving/benchmark_serving.py ``sample_uniform``, ``RANDOM_RANGE_RATIO: 0.8`` in
.github/workflows/benchmark-tmpl.yml; the earlier runs cloned kimbochen/bench_serving, the same sampler), so a
request holds ``(int(0.8 L) + L) / 2`` tokens on average; other sources: the nominal lengths.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAUNCHES = HERE / "launches.yaml"

INFERENCEX = "inferencex"
RANGE_RATIO = 0.8  # InferenceX RANDOM_RANGE_RATIO (see module doc)
PARALLEL = ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def source_of(row: dict) -> str:
    s = row.get("silicon_data_source") or ""
    if s.startswith("db-dump/") or s.startswith("source_file=2026-04-06.csv") or s.startswith("source_file=2026-03-25.csv"):
        return INFERENCEX
    if "aic-auto-gap-analysis" in s:
        return "nvidia-gap-analysis"
    return "other"


def _int(v) -> int:
    try:
        return max(1, int(v or 1))
    except ValueError:
        return 1


def concurrency_of(row: dict) -> int | None:
    m = re.search(r"silicon_concurrency=(\d+)", row.get("silicon_data_source") or "")
    return int(m.group(1)) if m else None


def clients_unrecorded(row: dict) -> str | None:
    """Why an aggregated NVIDIA gap-analysis row that records no client count is not evaluable, or None.

    Its id names no ``c<N>`` (``..._4000x1000_c_tp2_...``) and its source no ``silicon_concurrency``: the 12
    aggregated rows of Dynamo job 23364591 (vLLM 0.12.0 / TensorRT-LLM 1.2.0rc6.post1, H100 and GB200). Their
    ``batch_size`` (24-384) is the deployment's planned batch, not the clients the benchmark ran, and the job's
    train rows show another load: on H100 the three TRT-LLM rows measure 0.61-0.73x the estimated TPOT at that
    batch (the cell's train TPOT error is 5.4 %) and the vLLM TP-8 row 0.73x; on GB200 the two rows' TTFT is 20 and
    54 s (requests queued for waves), not a closed loop of that batch."""
    if row.get("mode") != "agg" or source_of(row) != "nvidia-gap-analysis":
        return None
    if concurrency_of(row) is not None or re.search(r"_c\d+_", row.get("id") or ""):
        return None
    return ("the row records no client count (no c<N> in its id, no silicon_concurrency): its batch_size is the "
            "Dynamo deployment's planned batch, not the load the benchmark ran (NVIDIA gap-analysis job 23364591)")


def signature_correction(row: dict) -> tuple[int, int, int, int] | None:
    """(tp, attention_dp, moe_tp, moe_ep) of an InferenceX ``tp N, ep M`` run recorded as N x M GPUs (see the
    module doc), or None when the row does not carry that signature."""
    if row.get("mode") != "agg" or source_of(row) != INFERENCEX:
        return None
    tp, adp, mtp, mep = (_int(row.get(k)) for k in ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"))
    world = tp * adp
    if row.get("backend") in ("sglang", "trtllm") and mtp == mep > 1 and world == mtp * mep:
        n = mtp
        return (1, n, 1, n) if adp > 1 else (n, 1, 1, n)
    if row.get("backend") == "vllm" and mtp == 1 and tp == adp > 1 and mep == world:
        return (tp, 1, 1, tp)
    return None


def attention_dp_correction(row: dict, is_moe: bool) -> int | None:
    """The attention-DP size of a MoE row whose expert group (moe_tp x moe_ep) is larger than its attention group
    (tp x attention_dp, the latter left empty): the estimator requires the two to be equal (sdk/config.py
    ModelConfig: moe_tp_size * moe_ep_size == tp_size * attention_dp_size), and the only layout with a TP-1 or
    TP-2 attention group over a larger expert group is data-parallel attention (vLLM ``-dp N``: each engine core
    runs its own attention, the experts span the dp x tp ranks). None when the row is consistent."""
    if not is_moe or row.get("mode") != "agg":
        return None
    tp, adp, mtp, mep = (_int(row.get(k)) for k in ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"))
    world, experts = tp * adp, mtp * mep
    if experts > world and experts % world == 0 and adp == 1:
        return experts // tp
    return None


def disaggregated_as_aggregated(row: dict) -> bool:
    """The 2026-04-06 dump's GB200 DeepSeek-R1 'agg' rows (see the module doc)."""
    return (row.get("mode") == "agg" and row.get("system") == "gb200"
            and (row.get("silicon_data_source") or "").startswith("source_file=2026-04-06.csv")
            and "DeepSeek" in (row.get("model_path") or ""))


# Final releases by the day their first file reached PyPI (https://pypi.org/pypi/<package>/json, the earliest
# ``upload_time`` of the release's files; read 2026-12-07), over the months the nightly images ran.
PYPI_RELEASES = {
    "sglang": (("2025-11-06", "0.5.5"), ("2025-12-03", "0.5.6"), ("2026-01-01", "0.5.7"), ("2026-01-23", "0.5.8"),
               ("2026-02-23", "0.5.9"), ("2026-04-05", "0.5.10"), ("2026-05-05", "0.5.11")),
    "vllm": (("2026-02-26", "0.16.0"), ("2026-03-07", "0.17.0"), ("2026-03-11", "0.17.1"), ("2026-03-20", "0.18.0"),
             ("2026-03-31", "0.18.1"), ("2026-04-03", "0.19.0"), ("2026-04-18", "0.19.1")),
}


def nightly_release(row: dict) -> str | None:
    """The release a nightly image (``backend_version`` ``nightly...``) is read as: the newest final release
    published before the image's day (the date in its tag, ``nightly-dev-YYYYMMDD-<sha>``, else the row's
    measurement day): a nightly carries every option of the releases before it. None when the row names no
    nightly or no day."""
    v = row.get("backend_version") or ""
    if not v.startswith("nightly"):
        return None
    m = re.search(r"(\d{4})(\d\d)(\d\d)", v)
    day = f"{m.group(1)}-{m.group(2)}-{m.group(3)}" if m else _measured(row)
    if not day:
        return None
    before = [rel for published, rel in PYPI_RELEASES.get(row.get("backend") or "", ()) if published < day]
    return before[-1] if before else None


def mean_length(nominal: int, source: str) -> int:
    """Mean tokens the benchmark's client drew for a nominal length (see the module doc)."""
    if source != INFERENCEX:
        return nominal
    return (int(nominal * RANGE_RATIO) + nominal + 1) // 2  # the mean of the integers lo..L, rounded half up


@dataclass
class Run:
    """One measured row as the run it was: corrected layout, clients per engine, lengths, launch flags."""

    row: dict
    source: str
    tp: int
    pp: int
    adp: int
    moe_tp: int
    moe_ep: int
    batch_per_rank: int          # clients per scheduler (the estimator's batch_size)
    concurrency: int             # clients one engine (the optkg stack) serves
    isl: int                     # mean tokens in / out the client drew
    osl: int
    corrections: list[str] = field(default_factory=list)
    not_evaluable: str | None = None
    flags: str = ""              # engine flags of the benchmark's launch command (launches.yaml)
    env: dict = field(default_factory=dict)  # environment variables the launch script exports (launches.yaml)
    settings: dict = field(default_factory=dict)  # settings optkg's launch reader cannot take as a flag
    release: str | None = None   # engine release of the image when the row records none (or a nightly)
    launch_evidence: str | None = None
    outside_sweep: str | None = None  # the InferenceX sweep config the row lies outside of (its flags unknown)
    speculative: str | None = None    # why the row's run used speculative decoding (launches.yaml speculative)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.adp


def run_of(row: dict, is_moe: bool = True) -> Run:
    source = source_of(row)
    tp, pp, adp, mtp, mep = (_int(row.get(k)) for k in PARALLEL)
    batch = _int(row.get("batch_size"))
    corrections: list[str] = []
    dp = attention_dp_correction(row, is_moe)
    if dp is not None:
        corrections.append(f"layout: moe_tp {mtp} x moe_ep {mep} over tp {tp}: attention data parallel {dp} "
                           f"(the expert group spans {mtp * mep} GPUs)")
        adp = dp
        batch = max(1, math.ceil(batch / dp))
    fixed = signature_correction(row)
    if fixed is not None:
        conc = concurrency_of(row) or batch * adp
        tp, adp, mtp, mep = fixed
        corrections.append(f"layout: recorded tp {row['tp_size']} x attention_dp {row['attention_dp_size'] or 1}, "
                           f"moe_tp {row['moe_tp_size']} x moe_ep {row['moe_ep_size']} is an InferenceX tp {tp * adp}, "
                           f"ep {mep} run on {tp * adp} GPUs")
        batch = max(1, math.ceil(conc / adp))
    run = Run(row=row, source=source, tp=tp, pp=pp, adp=adp, moe_tp=mtp, moe_ep=mep, batch_per_rank=batch,
              concurrency=batch * adp, isl=mean_length(int(row["isl"]), source),
              osl=max(2, mean_length(int(row["osl"]), source)), corrections=corrections)
    if disaggregated_as_aggregated(row):
        run.not_evaluable = (f"recorded as one aggregated TP-{row['tp_size']} engine, but the measurement is an "
                             "InferenceX GB200 disaggregated run (prefill + decode workers on all its GPUs)")
    if source == INFERENCEX and row.get("mode") == "agg":
        apply_launch(run)
        run.speculative = speculative_reason(run)
        run.not_evaluable = run.not_evaluable or run.speculative or misrecorded_reason(run)
    run.not_evaluable = run.not_evaluable or clients_unrecorded(row)
    run.release = run.release or nightly_release(row)
    return run


# ---------------------------------------------------------------------------------------------------------
# InferenceX launch flags (tools/accuracy/launches.yaml)

@lru_cache(maxsize=1)
def launches() -> list[dict]:
    import yaml
    return yaml.safe_load(LAUNCHES.read_text(encoding="utf-8"))["launches"]


_ALLOWED = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.Compare, ast.Name, ast.Load,
            ast.Constant, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Tuple,
            ast.BinOp, ast.Mult, ast.Add, ast.FloorDiv, ast.Call)


def evaluate(text: str, env: dict):
    """A ``when:`` condition or a ``{...}`` value of launches.yaml: arithmetic (+, *, //) and comparisons of
    conc / isl / osl / tp / ep / dp_attn joined by and / or / not (nothing else parses: a data file, never code)."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise ValueError(f"launches.yaml: {text!r}: {type(node).__name__} is not allowed in a condition")

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Call):
            if not (isinstance(n.func, ast.Name) and n.func.id in ("max", "min")) or n.keywords:
                raise ValueError(f"launches.yaml: {text!r}: only max(...) / min(...) may be called")
            vals = [ev(a) for a in n.args]
            return max(vals) if n.func.id == "max" else min(vals)
        if isinstance(n, ast.Name):
            if n.id in ("max", "min"):
                return n.id
            if n.id not in env:
                raise ValueError(f"launches.yaml: {text!r}: unknown name {n.id}")
            return env[n.id]
        if isinstance(n, ast.Tuple):
            return tuple(ev(e) for e in n.elts)
        if isinstance(n, ast.UnaryOp):
            return not ev(n.operand)
        if isinstance(n, ast.BoolOp):
            vals = [ev(v) for v in n.values]
            return all(vals) if isinstance(n.op, ast.And) else any(vals)
        if isinstance(n, ast.BinOp):
            a, b = ev(n.left), ev(n.right)
            return a * b if isinstance(n.op, ast.Mult) else a + b if isinstance(n.op, ast.Add) else a // b
        left = ev(n.left)
        for op, right in zip(n.ops, n.comparators):
            r = ev(right)
            ok = {ast.Eq: left == r, ast.NotEq: left != r, ast.Lt: left < r, ast.LtE: left <= r, ast.Gt: left > r,
                  ast.GtE: left >= r, ast.In: left in r if isinstance(r, tuple) else False,
                  ast.NotIn: left not in r if isinstance(r, tuple) else True}[type(op)]
            if not ok:
                return False
            left = r
        return True
    return ev(tree)


def condition(text: str, env: dict) -> bool:
    return bool(evaluate(text, env))


def expand(template: str, env: dict) -> str:
    """``template`` with every ``{expression}`` replaced by its value (``evaluate``)."""
    return re.sub(r"\{([^{}]+)\}", lambda m: str(evaluate(m.group(1), env)), template)


def _env(run: Run) -> dict:
    r = run.row
    conc = concurrency_of(r) or run.concurrency
    ep = run.moe_ep
    return {"conc": conc, "isl": int(r["isl"]), "osl": int(r["osl"]), "tp": run.tp * run.adp, "ep": ep,
            "dp_attn": run.adp > 1}


def _measured(row: dict) -> str:
    m = re.search(r"measured=(\d{4}-\d\d-\d\d)", row.get("silicon_data_source") or "")
    return m.group(1) if m else ""


def _matches(entry: dict, run: Run) -> bool:
    r = run.row
    m = entry["match"]
    if r["model_path"] not in m["model"] or r["backend"] != m["backend"] or r["system"] not in m["system"]:
        return False
    if "precision" in m and r.get("precision") not in m["precision"]:
        return False
    if "versions" in m and (r.get("backend_version") or "") not in m["versions"]:
        return False
    d = _measured(r)
    if "days" in m and d not in m["days"]:
        return False
    return not (("from" in m and d < m["from"]) or ("until" in m and d > m["until"]))


def speculative_twins(rows: list[dict], is_moe) -> dict[tuple, str]:
    """(GPU, ISL, OSL, TTFT, TPOT) -> reason, for every aggregated row a speculative sweep measured
    (``speculative_reason``): a row of another source or dump with the same GPU, lengths, TTFT and TPOT
    (to 0.01 ms) is the same run (NVIDIA's qwen3.5-397b-gap-analysis.csv repeats 21 of the 2026-03-20 Qwen3.5 MTP runs)."""
    out: dict[tuple, str] = {}
    for row in rows:
        if row.get("mode") == "agg" and source_of(row) == INFERENCEX:
            run = run_of(row, is_moe(row["model_path"]))
            if run.speculative:
                out.setdefault(measurement_of(row), f"the same measurement (GPU, lengths, TTFT, TPOT) as InferenceX row "
                                                    f"{row['id']}: {run.speculative}")
    return out


def measurement_of(row: dict) -> tuple:
    """GPU, lengths, TTFT and TPOT to 0.01 ms (NVIDIA's gap-analysis files hold two decimals)."""
    return (row["system"], row["isl"], row["osl"], round(float(row["silicon_ttft_ms"]), 2),
            round(float(row["silicon_tpot_ms"]), 2))


@lru_cache(maxsize=1)
def speculative_sweeps() -> list[dict]:
    """launches.yaml ``speculative``: the InferenceX measurement days whose runs used speculative decoding."""
    import yaml
    return yaml.safe_load(LAUNCHES.read_text(encoding="utf-8")).get("speculative") or []


@lru_cache(maxsize=1)
def misrecorded() -> list[dict]:
    """launches.yaml ``misrecorded``: InferenceX runs whose recorded concurrency is not the one the engine served."""
    import yaml
    return yaml.safe_load(LAUNCHES.read_text(encoding="utf-8")).get("misrecorded") or []


def misrecorded_reason(run: Run) -> str | None:
    """Why a row of a run its script misrecorded (launches.yaml ``misrecorded``) is not evaluable, or None."""
    return next((" ".join(e["reason"].split()) for e in misrecorded() if _matches(e, run)), None)


def speculative_reason(run: Run) -> str | None:
    """Why an InferenceX row measured by a speculative-decoding sweep (launches.yaml ``speculative``) is not
    evaluable, or None: the estimate times the stack without speculation (kg.speed.serving.untimed_speculation)."""
    for e in speculative_sweeps():
        if not _matches(e, run):
            continue
        day = _measured(run.row)
        if e.get("with_base"):
            return (f"speculative decoding or not: on {day} InferenceX ran both {e['config']} ({e['decoding']}) and "
                    f"{e['with_base']}, and the row does not say which; the estimate does not time speculation")
        return (f"speculative decoding ({e['decoding']}): InferenceX's {e['config']} sweep on {day}; the estimate "
                "does not time it")
    return None


def in_sweep(entry: dict, env: dict) -> bool:
    """Is the row's point (isl, osl, GPUs, expert-parallel size, concurrency) one the entry's ``search_space`` swept
    (InferenceX's .github/configs/nvidia-master.yaml on the measurement days)? True when the entry lists none."""
    space = entry.get("search_space")
    if space is None:
        return True
    return any(p["isl"] == env["isl"] and p["osl"] == env["osl"] and p["tp"] == env["tp"] and p["ep"] == env["ep"]
               and p["conc"][0] <= env["conc"] <= p["conc"][1] for p in space["points"])


def apply_launch(run: Run) -> None:
    """Set ``run.flags`` / ``run.settings`` from the first launches.yaml entry matching the row. A row outside the
    entry's ``search_space`` was not run by that sweep (another one, whose flags are not published): it keeps the
    engine's defaults, as the rows of the other sources do, and ``run.outside_sweep`` names the config."""
    env = _env(run)
    for entry in launches():
        if not _matches(entry, run):
            continue
        if not in_sweep(entry, env):
            run.outside_sweep = entry["search_space"]["evidence"]
            return
        flags: list[str] = []
        settings: dict = {}
        for item in entry.get("flags") or []:
            if "when" in item and not condition(item["when"], env):
                continue
            if "args" in item:
                flags.append(expand(str(item["args"]), env))
            settings.update(item.get("settings") or {})
            run.env.update({k: str(v) for k, v in (item.get("env") or {}).items()})
        run.flags = " ".join(f for f in flags if f)
        run.settings = settings
        run.release = entry.get("release")
        run.launch_evidence = entry["evidence"]
        return
