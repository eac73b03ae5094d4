"""Serving speed of a checked stack: the estimator's timings composed with what only optkg knows.

Input: the Stack, its ``check`` report as a dict (``Report.to_dict()``: findings, ``derived`` KV facts,
effective configuration) and a ``Workload`` (``isl`` / ``osl`` tokens per request, ``concurrency``:
requests the clients keep in flight, as a closed-loop benchmark does).

Composition (each step says so in the result's ``notes``):
1. Only a stack that starts gets a speed: an ERROR finding, estimated weights above the GPU memory
   or a KV budget without one block make it ``infeasible`` with the reasons.
2. The GPU, engine and weight/KV quantisation are mapped through kg/speed/tables.yaml and
   kg.speed.mapping; the engine release to the nearest database release (kg.speed.estimator.
   database_release). Anything outside the estimator's coverage is ``not_evaluable`` with the reason.
3. Running requests are capped by optkg's exact KV capacity: per scheduler, ``kv_tokens`` /
   (``isl + osl`` rounded up to the KV block), and by the engine's running-request cap
   (``max_num_seqs``...). Requests beyond the cap queue: in a closed loop of C clients with R < C
   running, each request waits ``W = L x (C / R - 1)`` before it starts (Little's law: R requests
   complete per engine request latency L), and TTFT = the engine's TTFT at R + W.
4. The estimator (kg.speed.estimator.run_point) times the running batch as its authors calibrate its
   in-flight-batching model: one request's prompt per engine step (``ctx_tokens`` = ISL, as aiconfigurator's
   ``cli_estimate`` defaults and its silicon comparison uses; vLLM's backend models exactly one partial prefill
   per step), chunked at the engine's prefill budget when the prompt is longer. Its answer is cached on disk
   (kg.core.cache, keyed by every input and the estimator's release), so a repeated check reads JSON.

Output: ``speed_for_stack`` returns plain data (see ``SpeedResult`` keys in the function doc).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kg.speed.estimator import (NotEvaluable, Point, database_release, estimator_version, run_point, tables,
                                tidy_reason)
from kg.speed.mapping import ENGINES, kv_tokens_per_request

DEFAULT_ISL = 1024
DEFAULT_OSL = 1024
DEFAULT_CONCURRENCY = 64


@dataclass(frozen=True)
class Workload:
    """Tokens in (``isl``) and out (``osl``) per request; ``concurrency``: requests kept in flight."""

    isl: int = DEFAULT_ISL
    osl: int = DEFAULT_OSL
    concurrency: int = DEFAULT_CONCURRENCY

    def to_dict(self) -> dict[str, int]:
        return {"isl": self.isl, "osl": self.osl, "concurrency": self.concurrency}


CALIBRATION = Path(__file__).with_name("calibration.yaml")
ACCURACY = Path(__file__).with_name("accuracy.yaml")  # held-out MAPE per engine x GPU (tools/accuracy/run.py)


def accuracy_note(backend: str, system: str) -> str:
    """What the held-out measured rows say of estimates for this engine x GPU (kg/speed/accuracy.yaml, written
    with docs/speed-accuracy.md by `make accuracy`): an estimate is printed with its measured error, or with the
    fact that none is measured."""
    from kg.core.cache import built_from

    def build():
        import yaml
        return (yaml.safe_load(ACCURACY.read_text(encoding="utf-8")) or {}).get("cells") or {}
    acc = (built_from("speed-accuracy", [ACCURACY], build) if ACCURACY.is_file() else {}).get(f"{backend}/{system}")
    if not acc:
        return f"accuracy not measured: no held-out measured rows for {backend} on {system} (docs/speed-accuracy.md)"
    return (f"measured accuracy for {backend} on {system}: mean error TTFT {acc['ttft_mape']:.1f} %, TPOT "
            f"{acc['tpot_mape']:.1f} % over {acc['rows']:,} held-out rows (docs/speed-accuracy.md)")


def calibration() -> dict[str, dict[str, float]]:
    """``"<backend>/<system>"`` -> ``{"ttft": k, "tpot": k, "train_rows": n}`` from kg/speed/calibration.yaml
    (fitted on the train split by tools/accuracy/run.py --fit; served from the content-keyed cache); {} when
    absent."""
    if not CALIBRATION.is_file():
        return {}
    from kg.core.cache import built_from

    def build():
        import yaml
        return (yaml.safe_load(CALIBRATION.read_text(encoding="utf-8")) or {}).get("cells") or {}
    return built_from("speed-calibration", [CALIBRATION], build)


def within_fit(cell: dict[str, Any], wl: Workload) -> Workload:
    """``wl`` with concurrency, ISL and OSL moved into the ranges the cell's calibration was fitted on (its
    ``concurrency`` / ``isl`` / ``osl`` [min, max]): the correction is not extrapolated beyond the measured runs."""
    def clamp(v: int, span) -> int:
        return min(max(v, span[0]), span[1]) if span else v
    return Workload(clamp(wl.isl, cell.get("isl")), clamp(wl.osl, cell.get("osl")),
                    clamp(wl.concurrency, cell.get("concurrency")))


# config.json keys that fix a network's shapes: two checkpoints equal on all of them are one model to the estimator
# (a ModelOpt FP8 / NVFP4 release of a model, DeepSeek-R1 and -V3), whatever their quantisation and metadata
SHAPE_KEYS = ("architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "intermediate_size", "moe_intermediate_size", "n_routed_experts",
              "num_experts", "num_local_experts", "num_experts_per_tok", "n_shared_experts", "kv_lora_rank",
              "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "vocab_size", "layer_types")


def model_signature(config_json: bytes) -> str:
    """A short digest of the shape keys (``SHAPE_KEYS``) of a config.json (``text_config`` first, for multimodal
    wrappers): the model identity a calibration's coverage is recorded by (kg/speed/calibration.yaml ``models``)."""
    import hashlib
    import json
    cfg = json.loads(config_json)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    shapes = {k: text.get(k, cfg.get(k)) for k in SHAPE_KEYS}
    return hashlib.sha256(json.dumps(shapes, sort_keys=True).encode()).hexdigest()[:12]


def calibrated(kf: dict[str, Any], metric: str, signature: str, system: str,
               release: str | None = None, cell: str = "the cell") -> tuple[list[float] | None, str | None]:
    """The cell's ``[a, b, c]`` for ``metric`` (``ttft`` / ``tpot``) when the model is inside the calibration's
    coverage, else (None, why). Inside: the model's own rows were in the fit (``models``), or leave-one-model-out
    on the train split showed the cell's factor lowers the error of a model it was not fitted on
    (``transfers``), and not where the factor raised the error of the model's own train rows (``worse_for``). A
    ``<engine>/*`` fallback on a GPU it did not see (``systems``) must also have carried over to
    a left-out GPU (``transfers_gpu``). An engine ``release`` the cell's train rows do not hold (``releases``) is
    inside only where leave-one-release-out on the train split lowered the error (``transfers_release``)."""
    coef = kf.get(metric)
    if not coef:
        return None, None
    if system not in kf.get("systems", [system]) and not (kf.get("transfers_gpu") or {}).get(metric):
        return None, (f"{metric.upper()} not calibrated: on the train split the engine-wide factor did not lower the "
                      "error of a GPU it was not fitted on (leave-one-GPU-out)")
    if signature in ((kf.get("worse_for") or {}).get(metric) or {}):
        return None, (f"{metric.upper()} not calibrated: the cell's factor raised the error of this model's own measured "
                      "train rows (kg/speed/calibration.yaml worse_for)")
    if signature in (kf.get("models") or {}) or (kf.get("transfers") or {}).get(metric):
        rels = kf.get("releases") or {}
        carries = (kf.get("transfers_release") or {}).get(metric)
        if rels and release not in rels and not carries:
            why = ("its train rows hold one release, so nothing shows it carries to another" if carries is None else
                   "on the train split it did not lower the error of a release it was not fitted on "
                   "(leave-one-release-out)")
            return None, (f"{metric.upper()} not calibrated: {cell}'s factor was fitted on rows of {fitted_on(kf)}, "
                          f"not on {release or 'this release'}; {why}")
        return coef, None
    return None, (f"{metric.upper()} not calibrated: no measured train rows of this model for this engine x GPU, and "
                  "on the train split the factor did not lower the error of a model it was not fitted on "
                  "(leave-one-model-out)")


def fitted_on(kf: dict[str, Any]) -> str:
    """The rows a cell's factor was fitted on, for a note: its engine releases and models (kg/speed/calibration.yaml
    ``releases``, ``models``), a long list shortened to its ends and its count."""
    from kg.core.relcmp import Release

    def key(r: str) -> tuple:
        try:
            return (0, Release(r), "")
        except ValueError:  # a build label (nightly-dev, glm5-hopper): after the releases
            return (1, 0, r)
    rels = sorted((r for r in (kf.get("releases") or {}) if r != "unrecorded"), key=key)
    unrec = (kf.get("releases") or {}).get("unrecorded")
    rs = ", ".join(rels) if len(rels) <= 3 else f"{rels[0]} ... {rels[-1]} ({len(rels)} releases)"
    rs = f"release{'s' if len(rels) > 1 else ''} {rs}" if rels else "no recorded release"  # "5 models at ..."
    if unrec and rels:
        rs += f" (+{unrec} rows of no recorded release)"
    # the models' shape signatures (a per_model key "<signature>/<gemm mode>" names one of them again)
    models = sorted({v for k, v in (kf.get("models") or {}).items() if "/" not in k})
    ms = " and ".join(models) if len(models) <= 2 else f"{len(models)} models"
    return f"{ms or '?'} at {rs}"


def calibration_factor(coef: list[float] | None, wl: Workload) -> float:
    """``exp(a + b log2(concurrency) + c log2(isl) [+ d log2(osl)])`` for a cell's ``[a, b, c(, t0(, d))]`` (1.0
    without one): the estimator's error grows with concurrency (its TTFT queuing model) and varies with the prompt
    length and, where the train rows showed it (tools/accuracy/run.py FORMS), the output length."""
    if not coef:
        return 1.0
    a, b, c = coef[:3]
    d = coef[4] if len(coef) > 4 else 0.0
    return math.exp(a + b * math.log2(wl.concurrency) + c * math.log2(wl.isl) + d * math.log2(max(1, wl.osl)))


def calibration_overhead_ms(coef: list[float] | None) -> float:
    """The fixed time ``t0`` (ms) of a cell's ``[a, b, c, t0(, d)]`` added after the factor (0 without one): a cost per
    request (TTFT) or per engine step (TPOT) outside the per-op kernel timings the estimator sums."""
    return float(coef[3]) if coef and len(coef) > 3 else 0.0


def per_model_key(signature: str, gemm_quant_mode: str | None, expert_parallel: bool = False) -> str:
    """The key of a model's own factor (kg/speed/calibration.yaml ``per_model``): its shapes (``model_signature``), the
    GEMM mode the estimator timed it in and whether its experts run expert-parallel: the estimator's error is per op,
    and it times other ops for each (an FP8 run's GEMMs are not a BF16 run's; with moe_ep_size > 1 the MoE layer is
    all-to-all dispatch and combine around whole experts per rank, not tensor-parallel expert shards and an
    allreduce: aiconfigurator-core's MoE and communication tables are keyed by moe_tp_size / moe_ep_size)."""
    return f"{signature}/{gemm_quant_mode or 'checkpoint'}" + ("/ep" if expert_parallel else "")


def _factors(backend: str, system: str, signature: str, wl: Workload, notes: list[str],
             gemm_quant_mode: str | None = None,
             expert_parallel: bool = False,
             release: str | None = None) -> tuple[tuple[float, float], tuple[float, float]]:
    """((TTFT factor, fixed ms), (TPOT factor, fixed ms)) of kg/speed/calibration.yaml for the engine x GPU cell at
    ``wl`` (the running batch), each inside its coverage (``calibrated``); a model with its own factor in the cell
    (``per_model``: kept where leave-one-group-out on its train rows beat the cell's) takes that one, inside its own
    ranges; a cell whose train rows hold one configuration only (no evidence either way, ``fallback``) takes the
    engine-wide ``<engine>/*`` factor. Appends what was done to ``notes``."""
    cal = calibration()
    own = f"{backend}/{system}"
    ks = []
    for metric in ("ttft", "tpot"):
        cell = own if own in cal and not (cal[own].get("fallback") or {}).get(metric) else f"{backend}/*"
        kf = cal.get(cell) or {}
        pm = ((cal.get(own) or {}).get("per_model") or {}).get(per_model_key(signature, gemm_quant_mode, expert_parallel)) or {}
        rels = (cal.get(own) or {}).get("releases") or {}
        # a model's own factor holds for the releases of the cell's rows, or where the cell's factor carried over
        pm_release_ok = not rels or release in rels or ((cal.get(own) or {}).get("transfers_release") or {}).get(metric)
        if pm.get(metric) and pm_release_ok:  # the model's own factor, where its own train rows showed it beats the cell's
            kf, coef, why, cell = {**pm, "releases": rels, "models": {"": pm.get("model", "?")}}, pm[metric], None, \
                f"{own}, this model's own factor"
        else:
            coef, why = calibrated(kf, metric, signature, system, release, cell)
        notes.extend([why] if why else [])
        at = within_fit(kf, wl)
        ks.append((calibration_factor(coef, at), calibration_overhead_ms(coef)))
        if coef:
            plus = f" + {ks[-1][1]:,.1f} ms" if ks[-1][1] else ""
            rels = kf.get("releases") or {}
            outside = f"; applied to {release}, outside them: leave-one-release-out on the train split lowered the " \
                      "error" if rels and release not in rels else ""
            notes.append(f"{metric.upper()} calibrated x {ks[-1][0]:.2f}{plus} ({cell}, {kf.get('train_rows', '?')} "
                         f"measured train rows, kg/speed/calibration.yaml) at {wl.concurrency:,} running requests and "
                         f"this ISL{' and OSL' if len(coef) > 4 else ''}; fitted on rows of {fitted_on(kf)}{outside}")
            osl_used = len(coef) > 4
            if (at.concurrency, at.isl) != (wl.concurrency, wl.isl) or (osl_used and at.osl != wl.osl):
                o = kf.get("osl") or [at.osl, at.osl]
                span = f", OSL {o[0]:,}-{o[1]:,}" if osl_used else ""
                edge = f", OSL {at.osl:,}" if osl_used else ""
                notes.append(f"outside the calibration's measured runs ({cell}: concurrency {kf['concurrency'][0]:,}-"
                             f"{kf['concurrency'][1]:,}, ISL {kf['isl'][0]:,}-{kf['isl'][1]:,}{span}): its factor is "
                             f"taken at the nearest edge (concurrency {at.concurrency:,}, ISL {at.isl:,}{edge}), not "
                             "extrapolated")
    return ks[0], ks[1]


def auto_kv_cache_mode(backend: str, model: Any, hardware: Any, derived: dict[str, Any]) -> tuple[str, str]:
    """The estimator's ``kvcache_quant_mode`` for a KV cache left at ``auto`` after optkg's engine reading, and why:
    the backend's ``auto_kv`` (kg.speed.mapping). Passed explicitly: left unset, aiconfigurator-core 0.12.0 times an
    FP8 KV cache for every FP8 / FP8-block / NVFP4 checkpoint (sdk/models/helpers.py:657-661
    ``_infer_quant_modes_from_raw_config``), which the engines do not store."""
    return ENGINES[backend].auto_kv(model, hardware, derived)


def _env_int_set(env: dict[str, str], var: str) -> bool:
    """An integer environment variable the engine reads as ``bool(int(os.getenv(var, "0")))`` is set non-zero."""
    try:
        return int(str(env.get(var, "0")).strip() or "0") != 0
    except ValueError:
        return False


def execution_mode(t: dict[str, Any], backend: str, system: str, weight_quant: str,
                   values: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, str | None] | None:
    """The estimator's ``{"gemm", "moe"}`` modes for a checkpoint quantisation the engine runs in another mode than
    its label on this GPU (kg/speed/tables.yaml ``execution_modes``: unless a setting says otherwise, or only when
    an environment variable of the launch, ``when_env``, is set), or None."""
    for e in t.get("execution_modes") or []:
        if (e["backend"], e["weight_quant"]) == (backend, weight_quant) and system in e["systems"] and not any(
                values.get(k) in v for k, v in (e.get("unless") or {}).items()) and all(
                _env_int_set(env or {}, var) for var in e.get("when_env") or []):
            return {"gemm": e.get("gemm"), "moe": e.get("moe")}
    return None


def _cache_root() -> Path:
    from kg.core.cache import cache_dir
    return cache_dir()


def cached(kind: str, key: str, build):
    """``build()`` (plain data) through the content-keyed cache (kg.core.cache); a NotEvaluable outcome
    is cached too, as ``{"not_evaluable": reason}``, so a warm check never imports the estimator."""
    from kg.core.cache import cache_file, read_data, write_data
    path = cache_file(f"{kind}-{key[:32]}.json")
    data = read_data(path, kind, key)
    if data is None:
        try:
            data = build()
        except NotEvaluable as e:
            data = {"not_evaluable": str(e)}
        write_data(path, kind, key, data)
    return data


def _release(system: str, backend: str, engine_release: str | None) -> dict[str, Any]:
    import hashlib
    import json
    key = hashlib.sha256(json.dumps([system, backend, engine_release, estimator_version()]).encode()).hexdigest()
    return cached("speed-release", key, lambda: dict(zip(("release", "note"),
                                                         database_release(system, backend, engine_release))))


def config_files(model) -> dict[str, bytes]:
    """config.json (+ hf_quant_config.json beside it) of the stack's model, read from where optkg read it."""
    src = str(getattr(model, "source", "") or "")
    if "(Hugging Face cache: " in src:
        src = src.split("(Hugging Face cache: ", 1)[1].rstrip(")")
    p = Path(src)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise NotEvaluable(f"the model's config.json is not on disk ({src or 'no source'})")
    files = {"config.json": p.read_bytes()}
    hq = p.parent / "hf_quant_config.json"
    if hq.is_file():
        files["hf_quant_config.json"] = hq.read_bytes()
    return files


def _setting(report: dict[str, Any], values: dict[str, Any], name: str) -> Any:
    for e in report.get("effective_config") or []:
        if e.get("setting") == name and e.get("value") is not None:
            return e["value"]
    return values.get(name, report.get("derived", {}).get(name))


def _starts_but_wrong(f: dict[str, Any]) -> bool:
    """A runtime failure whose outcome is wrong output: the engine starts and serves at its usual speed."""
    return f.get("kind") == "runtime-failure" and (f.get("failure") or {}).get("outcome") == "wrong-output"


def infeasible_reasons(report: dict[str, Any]) -> list[str]:
    """Why the engine would not start or serve (rules at ERROR, weights over memory, no KV block); [] when it
    would. A wrong-output runtime failure does not stop it (``output_caveats``)."""
    out = [f"rule {f['rule_id']}: {f['title']}" for f in report.get("findings") or []
           if f.get("severity") == "error" and not _starts_but_wrong(f)]
    d = report.get("derived") or {}
    if d.get("weights_exceed_gpu_memory") and not out:
        out.append("the estimated weights per GPU exceed the GPU memory the engine may use")
    if d.get("kv_budget_bytes_per_gpu") == 0 or d.get("kv_tokens_per_gpu") == 0:
        out.append("no KV-cache memory left per GPU (the weights fill the budget)")
    return out


def _attention_dp_rank_pool(model: Any, d: dict[str, Any], tp: int, n_sched: int) -> int:
    """One attention-DP rank's KV tokens from ``kv_tokens_total``, which optkg sizes for the whole TP group
    (``kv_heads_per_rank`` KV heads per GPU). Under attention DP each rank runs attention at TP ``tp / n_sched``:
    an MLA latent is whole on every GPU either way; GQA heads split over fewer GPUs, so each GPU holds
    ``heads(tp / n_sched) / heads(tp)`` times the bytes per token and that many times fewer tokens."""
    total = int(d["kv_tokens_total"])
    if n_sched <= 1 or getattr(model, "is_mla", False):
        return total
    h = int(getattr(model, "num_key_value_heads", 0) or 0)
    if h < 1:
        raise NotEvaluable("the model's KV heads are unknown: the KV pool of one attention-DP rank cannot be sized")
    heads = lambda t: max(1, h // t)  # noqa: E731  KV heads per GPU at TP t (replicated below one head)
    at_tp = int(d.get("kv_heads_per_rank") or heads(tp))
    return int(total * at_tp / heads(max(1, tp // n_sched)))


def speed_for_stack(stack, report: dict[str, Any], workload: Workload,
                    quant: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Serving speed of ``stack`` (see module doc). Keys: ``status`` (``ok`` / ``infeasible`` /
    ``not_evaluable``), ``reasons`` (why not ok), ``workload``, ``estimator`` (package, release, system,
    backend, database_release), ``parallel``, ``running`` / ``queued`` requests, ``cap`` (kv_requests,
    running_setting, binding), ``ttft_ms`` (seen by a request, queue wait included), ``engine_ttft_ms``,
    ``queue_wait_ms``, ``itl_ms`` (= TPOT), ``tokens_per_s_per_gpu``, ``tokens_per_s_per_request``,
    ``output_tokens_per_s``, ``request_latency_ms``, ``gpus``, ``notes``. ``quant``: the estimator's
    ``{"gemm": ..., "moe": ...}`` modes when known better than the stack's weight quantisation (the
    accuracy harness passes the measured run's)."""
    out: dict[str, Any] = {"status": "not_evaluable", "reasons": [], "workload": workload.to_dict(), "notes": []}
    bad = infeasible_reasons(report)
    if bad:
        return {**out, "status": "infeasible", "reasons": bad}
    long = too_long(stack, report, workload)
    if long:  # the engine starts, but refuses every request of this workload
        return {**out, "status": "infeasible", "reasons": long, "refuses_requests": True}
    out["notes"] += [f"rule {f['rule_id']} ({f['title']}): the engine starts and serves at this speed, but its "
                     "output is wrong" for f in report.get("findings") or []
                     if f.get("severity") == "error" and _starts_but_wrong(f)]
    offloaded = (report.get("derived") or {}).get("weight_bytes_offloaded_per_gpu")
    if offloaded:
        return {**out, "reasons": [
            f"{offloaded / 2**30:,.2f} GiB of weights per GPU are read from host memory in every forward pass "
            "(--cpu-offload-gb); the estimator times GPU-resident weights only"]}
    spec = untimed_speculation(stack)
    if spec:
        out["notes"].append(spec)
    try:
        return _compose(stack, report, workload, out, quant)
    except NotEvaluable as e:
        return {**out, "reasons": [str(e)]}


def too_long(stack, report: dict[str, Any], wl: Workload) -> list[str]:
    """The reason a request of ``wl`` cannot be served at all, or []: its prompt plus the output it asks for is
    longer than max_model_len, which the engines refuse at admission before any prefill (vLLM 0.34.0
    entrypoints/openai/engine/serving.py ``_validate_input``: "This model's maximum context length is N tokens";
    SGLang 0.5.23 managers/tokenizer_manager.py ``_validate_one_request``: "Requested token count exceeds the
    model's maximum context length"), so there is no TTFT to estimate."""
    mml = _setting(report, stack.values(), "max_model_len")
    if not isinstance(mml, int) or isinstance(mml, bool) or wl.isl + wl.osl <= mml:
        return []
    return [f"a request of {wl.isl:,} prompt + {wl.osl:,} output tokens = {wl.isl + wl.osl:,} is longer than "
            f"max_model_len {mml:,}: the engine refuses it at admission (HTTP 400, maximum context length), so "
            "it is never timed (lower --isl / --osl, or raise the context length if the model allows it)"]


def untimed_speculation(stack) -> str | None:
    """The note for a stack with speculative decoding on, which the estimate leaves out, or None. aiconfigurator-core
    0.12.0 has no draft-model (EAGLE, draft model, n-gram) timing, and its MTP (``nextn``) scales the step's compute
    only, the accepted tokens being applied above it (sdk/engine.py:75-76, :406-408): it needs an acceptance rate
    optkg does not know, so every speculative stack is timed as the same stack without speculation."""
    values = stack.values()
    tech = (stack.techniques or {}).get("speculative-decoding")
    method = values.get("speculative_method") or (tech or {}).get("speculative_method")
    if tech is None and not method:
        return None
    n = values.get("num_speculative_tokens") or (tech or {}).get("num_speculative_tokens")
    what = ", ".join(str(x) for x in (method, f"{n} draft token{'s' if str(n) != '1' else ''} per step" if n else None) if x)
    return (f"speculative decoding{f' ({what})' if what else ''} is not timed: these are the numbers of the same "
            "stack without it (the estimator has no draft-model timing, and its MTP timing needs an acceptance "
            "rate optkg does not know)")


def _compose(stack, report: dict[str, Any], wl: Workload, out: dict[str, Any],
             quant: dict[str, str | None] | None) -> dict[str, Any]:
    from kg.speed.estimator import model_dir, require_estimator
    notes: list[str] = out["notes"]
    est_release = require_estimator()
    t = tables()
    hw = getattr(stack.hardware, "get", lambda k: None)("id") if stack.hardware else None
    if hw is None:
        raise NotEvaluable("no GPU given (--gpu): the estimator times a named GPU")
    system = (t["systems"].get(hw) or {}).get("system")
    if system is None:
        raise NotEvaluable(f"GPU {hw} is not in the estimator's database (it has: {', '.join(t['systems'])})")
    from kg.engines import of as engine_of
    from kg.engines.base import SpeedBackend
    engine = stack.engine or "unknown"
    sb = engine_of(stack).speed_backend(stack)  # the engine package names the estimator's backend
    mapping = ENGINES.get(sb.backend) if isinstance(sb, SpeedBackend) else None
    if mapping is None:
        raise NotEvaluable(getattr(sb, "reason", None) or f"engine {engine} has no estimator backend")
    backend = sb.backend
    if stack.model is None:
        raise NotEvaluable("the stack names no model")
    d = report.get("derived") or {}
    values = stack.values()
    wq = str(d.get("weight_quant") or "none")
    if quant is None and wq not in t["weight_quant"]:
        raise NotEvaluable(f"weight quantisation {wq} has no estimator mode (it has: {', '.join(t['weight_quant'])})")
    if str(values.get("dtype") or "auto").lower() in ("float32", "float"):  # GEMMs, attention and an 'auto' KV cache
        raise NotEvaluable("--dtype float32: the estimator times 16-bit and narrower kernels only")
    kvd = str(d.get("kv_cache_dtype") or values.get("kv_cache_dtype") or "auto").lower()
    if kvd not in t["kv_cache_dtype"]:
        raise NotEvaluable(f"KV-cache dtype {kvd} has no estimator mode (it has: {', '.join(t['kv_cache_dtype'])})")
    par = mapping.parallel(values, set(stack.techniques), bool(stack.model.is_moe))
    shown = report.get("stack") or {}
    release = shown.get("engine_version") or stack.engine_version
    rel = _release(system, backend, release)
    if "not_evaluable" in rel:
        raise NotEvaluable(rel["not_evaluable"])
    if rel.get("note"):
        notes.append(rel["note"])
    if shown.get("engine_version_assumed"):
        notes.append(f"{engine} release {release} assumed (the latest optkg knows); pass --engine-version")
    ctx = _setting(report, values, mapping.ctx_setting)
    if not isinstance(ctx, int) or ctx < 1:
        picked = mapping.ctx_from_stack(stack, par) if mapping.ctx_from_stack else None
        ctx, why = picked or (mapping.ctx_default,
                              f"{mapping.ctx_setting} not known: {mapping.ctx_default:,} prefill tokens per step assumed")
        notes.append(why)
    # running-request cap per scheduler: the engine's setting and optkg's KV capacity
    per_req = kv_tokens_per_request(mapping.admission, wl.isl, wl.osl)
    block = int(d.get("kv_block_size") or 1)
    per_req_tokens = math.ceil(per_req / block) * block
    n_sched = par.attention_dp_size
    pool_all = d.get("kv_tokens_all_dp_engines")
    if pool_all is None and isinstance(d.get("kv_tokens_total"), (int, float)):
        # kv_tokens_total counts every scheduler's pool where the engine says so (SGLang --dp); otherwise it is one
        # scheduler's pool (TensorRT-LLM attention DP: every rank keeps the KV of its own requests)
        pool_all = d["kv_tokens_total"] if engine_of(stack).total_counts_every_dp_pool else \
            _attention_dp_rank_pool(stack.model, d, par.tp_size * n_sched, n_sched) * n_sched
    caps: dict[str, Any] = {"tokens_per_request": per_req_tokens}
    run_cap = None
    if isinstance(pool_all, (int, float)) and pool_all > 0:
        kv_req = int((pool_all / n_sched) // per_req_tokens)
        caps["kv_tokens_per_scheduler"] = int(pool_all / n_sched)
        caps["kv_requests_per_scheduler"] = kv_req
        if pool_all / n_sched < math.ceil((wl.isl + wl.osl) / block) * block:
            return {**out, "status": "infeasible",
                    "reasons": [f"one request of {wl.isl + wl.osl:,} tokens (isl + osl) does not fit in the KV cache "
                                f"({int(pool_all / n_sched):,} tokens per scheduler)"]}
        run_cap = kv_req
    else:
        notes.append("KV capacity unknown (no budget): running requests not capped by the KV cache")
    seqs = _setting(report, values, mapping.running_setting)
    if isinstance(seqs, int) and seqs > 0 and mapping.running_per_scheduler:
        seqs, why = mapping.running_per_scheduler(seqs, par, stack.techniques)
        notes.extend([why] if why else [])
    if isinstance(seqs, int) and seqs > 0:
        caps[mapping.running_setting] = seqs
        if run_cap is None or seqs < run_cap:
            run_cap = seqs
            caps["limit"] = mapping.running_setting
        else:
            caps["limit"] = "kv_cache"
    elif run_cap is not None:
        caps["limit"] = "kv_cache"
    lanes = n_sched * par.pp_size  # batches the estimator's batch_size counts per
    want = max(1, math.ceil(wl.concurrency / lanes))
    per_lane_cap = None if run_cap is None else max(1, run_cap // par.pp_size)
    b = want if per_lane_cap is None else min(want, per_lane_cap)
    running = min(wl.concurrency, b * lanes)
    runs_as = None if quant else execution_mode(t, backend, system, wq, values, getattr(stack, "native_env", None))
    gq = quant or runs_as or (d.get("weight_is_fp8_block") and t["weight_quant_block"].get(wq)) or t["weight_quant"][wq]
    kv_mode = t["kv_cache_dtype"][kvd]
    if kv_mode is None:
        kv_mode, why = auto_kv_cache_mode(backend, stack.model, stack.hardware, d)
        notes.append(why)
    point = Point(model=stack.model.name, config_digest="", system=system, backend=backend, release=rel["release"],
                  tp_size=par.tp_size, pp_size=par.pp_size, attention_dp_size=par.attention_dp_size,
                  moe_tp_size=par.moe_tp_size, moe_ep_size=par.moe_ep_size, gemm_quant_mode=gq["gemm"],
                  moe_quant_mode=gq["moe"] if stack.model.is_moe else None,
                  kvcache_quant_mode=kv_mode, batch_size=b, isl=wl.isl, osl=wl.osl,
                  ctx_tokens=min(ctx, wl.isl))
    files = config_files(stack.model)
    folder, digest = model_dir(files, _cache_root())
    point = Point(**{**point.__dict__, "config_digest": digest})
    r = cached("speed-point", point.key(), lambda: run_point(point, str(folder)))
    if "not_evaluable" in r:
        why = tidy_reason(r["not_evaluable"], point)
        if runs_as:  # say which engine setting made the mode (kg/speed/tables.yaml execution_modes)
            why = f"{engine} runs these {wq} experts as {runs_as['moe']} here (speed tables: execution_modes); {why}"
        raise NotEvaluable(why)
    isl_max = int(t.get("context_attention_isl_max") or 0)  # kg/speed/tables.yaml: the measured prompts' longest
    if isl_max and wl.isl > isl_max and not stack.model.is_mla:
        # a number outside the data's coverage is not evaluable: the prefill attention would be extrapolated
        raise NotEvaluable(f"ISL {wl.isl:,} is past the longest prompt the estimator's context-attention tables "
                           f"measure ({isl_max:,} tokens): its prefill attention time would be an extrapolation, "
                           "not a measurement")
    # a scheduler that holds prompts back (kg.speed.mapping context_hold): the held decode steps, timed at the engine's
    # TPOT, are added to the TTFT after the calibration, which is fitted to what the estimator's own TTFT misses
    hold, why = mapping.context_hold(values, par, b, wl.osl) if mapping.context_hold else (0.0, "")
    notes.extend([why] if hold else [])
    # the factor is fitted on runs where every client was running: evaluate it at the batch the engine runs
    notes.append(accuracy_note(backend, system))
    (k_ttft, t_ttft), (k_tpot, t_tpot) = _factors(backend, system, model_signature(files["config.json"]),
                                                  Workload(wl.isl, wl.osl, running), notes, point.gemm_quant_mode,
                                                  point.moe_ep_size > 1, release)
    queued = max(0, wl.concurrency - running)
    raw_engine = r["ttft_ms"] + hold * r["tpot_ms"]
    raw_wait = (raw_engine + r["tpot_ms"] * (wl.osl - 1)) * (wl.concurrency / running - 1) if queued else 0.0
    raw = {"ttft_ms": raw_engine + raw_wait, "itl_ms": r["tpot_ms"], "engine_ttft_ms": raw_engine}
    tpot = r["tpot_ms"] * k_tpot + t_tpot
    r = dict(r, ttft_ms=r["ttft_ms"] * k_ttft + t_ttft + hold * tpot, tpot_ms=tpot,
             output_tokens_per_s=r["output_tokens_per_s"] * r["tpot_ms"] / tpot)
    r["request_latency_ms"] = r["ttft_ms"] + r["tpot_ms"] * (wl.osl - 1)
    wait = r["request_latency_ms"] * (wl.concurrency / running - 1) if queued else 0.0
    if queued:
        notes.append(f"{queued:,} of {wl.concurrency:,} requests queue: the {caps.get('limit', 'running-request')} "
                     f"cap allows {running:,} running; each waits ~{wait:,.0f} ms first (closed loop, Little's law)")
    out.update(status="ok", estimator={"package": "aiconfigurator-core", "release": est_release, "system": system,
                                       "backend": backend, "database_release": r["release"],
                                       "gemm_quant_mode": point.gemm_quant_mode},
               parallel=par.__dict__, running=running, queued=queued, cap=caps, batch_per_rank=b,
               prefill_tokens_per_step=point.ctx_tokens,
               ttft_ms=r["ttft_ms"] + wait, engine_ttft_ms=r["ttft_ms"], queue_wait_ms=wait, itl_ms=r["tpot_ms"],
               tokens_per_s_per_gpu=r["output_tokens_per_s"] * running / max(running, b * lanes) / par.gpus,
               tokens_per_s_per_request=1000.0 / r["tpot_ms"], output_tokens_per_s=r["output_tokens_per_s"],
               request_latency_ms=r["request_latency_ms"] + wait, gpus=par.gpus,
               estimator_memory_gib=r["memory_gib"], uncalibrated=raw, context_hold_steps=hold)
    return out
