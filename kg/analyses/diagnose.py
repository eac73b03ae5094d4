"""``optkg diagnose``: which wall am I on (memory, compute, bandwidth, or neither), from real metrics.

Flow (one way): ``kg.inputs.metrics.Snapshot`` -> ``snapshot_namespace`` (facts + flat namespace) ->
``evaluate_rules(load_ruleset('diagnose'), ...)`` over ``rules/walls.yaml`` -> verdict, walls,
operator-layer gate, collection checklist -> catalog techniques for each wall (and, with a stack,
which of them collide with the user's techniques, via ``kg.analyses.check.check_stack``) -> a report dict
(``schema_version``, ``kind: diagnose``) rendered as text, JSON or markdown.

Which metric stands for which reading (shared/reference/existing_tools.md §3):

- memory occupancy: for a serving engine that preallocates (vLLM ``gpu_memory_utilization``,
  SGLang ``mem_fraction_static``) it is KV-pool pressure (``kv_cache_usage`` read together with
  waiting requests, preemptions in the window, or SGLang retractions); raw device memory
  (``fb_used / fb_total``) counts only for stacks that do not preallocate.
- compute utilisation: ``DCGM_FI_PROF_SM_ACTIVE`` (``compute_metric = 'sm_active'``); else time-based
  utilisation (``DCGM_FI_DEV_GPU_UTIL``, nvidia-smi ``utilization.gpu``, dmon ``sm``,
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``: ``'time_based'``, low confidence when high); else tensor-pipe
  activity (``'tensor_active'``).
- bandwidth: ``DCGM_FI_PROF_DRAM_ACTIVE`` (``'dram_active'``); else the coarser
  ``utilization.memory`` / ``DCGM_FI_DEV_MEM_COPY_UTIL`` (``'mem_copy_util'``).
Across GPUs the worst (highest) device counts; per-device readings are kept in the report.

Facts given to the engine: ``{kind: snapshot, workload}``, ``{kind: serving, engine}`` when engine
metrics are present, ``{kind: gpu, compute_metric, bandwidth_metric}`` when GPU metrics are present.

Namespace names rules read (fractions 0-1 unless a unit is in the name). Always present:
``workload`` (serving|training|generate|unknown), ``serving``, ``preallocated``, ``engine``,
``has_compute``, ``has_bandwidth``, ``has_tensor``, ``has_device_memory``, ``has_power_ratio``,
``has_video``, ``has_retracted``, ``has_scrape_window``, ``has_memory_occupancy``,
``throughput_known`` (measured throughput and a target both known), ``throughput_short``,
``compute_metric``, ``bandwidth_metric``, ``kpis_missing_count``, ``resources_missing_count``,
``context_missing_count``, ``context_present_count`` and display strings (``*_text``, ``*_label``,
``*_caveat``, ``compute_claim``). Present only when read: ``kv_cache_usage``, ``requests_waiting``,
``requests_running``, ``preemptions_total``, ``preemptions_new`` (window), ``retracted_requests``,
``compute_util``, ``bandwidth_util``, ``tensor_active``, ``device_memory_used_fraction``,
``power_w``, ``power_limit_w``, ``power_ratio``, ``video_engine_util``, ``memory_occupancy``,
``throughput_tokens_per_s`` (output tokens/s), ``target_throughput_tokens_per_s``,
``throughput_shortfall`` (1 - measured/target), ``prefix_cache_hit_rate``,
``window_generation_tokens`` (output tokens generated between two scrapes). Thresholds from
``rules/walls.yaml`` (or ``--thresholds``) are added by the rule evaluator under their names.

Whether the inputs belong together (always present): ``invalid_readings_count`` (readings that
parsed but cannot be true, kg.inputs.metrics ``Snapshot.invalid``), ``gpu_model_count`` and
``host_count`` (distinct GPU model names / host names over all inputs), ``model_mismatch`` (the
served model in the engine metrics, label ``model_name``, is not the model of --stack/--vllm/
--sglang; False when either is unknown), with ``*_text`` strings naming files and values.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kg.core.errors import OptkgError
from kg.inputs.metrics import Histogram, Snapshot, load_snapshot
from kg.engine.rules import SEVERITY_ORDER, Firing, RuleSet, evaluate_rules

SCHEMA_VERSION = "1.0"
WORKLOADS = ("serving", "training", "generate")
PREALLOCATING_ENGINES = ("vllm", "sglang")
WALL_RULES = (("memory", "memory-wall"), ("compute", "compute-wall"), ("bandwidth", "bandwidth-wall"))
INPUT_TAG = "input-consistency"  # rules that say whether the inputs belong together (shown first)
FAIL_ON = ("low", "moderate", "severe", "critical", "never")

COMPUTE_LABEL = {"sm_active": "SM activity", "time_based": "time-based utilisation",
                 "tensor_active": "tensor-pipe activity"}
BANDWIDTH_LABEL = {"dram_active": "DRAM activity", "mem_copy_util": "memory utilisation (coarse proxy)"}


# ---------------------------------------------------------------------------------------------
# collection checklist (method 001 §3): group -> items; each item says how it is read and what to collect

@dataclass(frozen=True)
class Item:
    id: str
    label: str
    hint: str
    serving_only: bool = False
    kv_config: bool = False


CHECKLIST: tuple[tuple[str, str, tuple[Item, ...]], ...] = (
    ("kpis", "performance KPIs", (
        Item("throughput", "throughput", "two scrapes of the engine's /metrics (--before/--after with --window), "
             "or SGLang sglang:gen_throughput"),
        Item("ttft_distribution", "TTFT distribution", "vllm:time_to_first_token_seconds or "
             "sglang:time_to_first_token_seconds histogram with observations"),
        Item("itl_distribution", "inter-token-latency distribution", "vllm:inter_token_latency_seconds or "
             "sglang:inter_token_latency_seconds histogram with observations"),
        Item("success_rate", "success rate", "vllm:request_success_total{finished_reason=...}"),
    )),
    ("resources", "resource levels", (
        Item("memory", "memory", "vllm:kv_cache_usage_perc / sglang:token_usage for a server; "
             "DCGM_FI_DEV_FB_USED or nvidia-smi memory.used otherwise"),
        Item("compute", "compute", "DCGM_FI_PROF_SM_ACTIVE (dcgm-exporter: uncomment it in dcp-metrics-included.csv)"),
        Item("bandwidth", "memory bandwidth", "DCGM_FI_PROF_DRAM_ACTIVE (nvidia-smi utilization.memory is a coarse proxy)"),
        Item("queue_depth", "queue depth", "vllm:num_requests_waiting or sglang:num_queue_reqs", serving_only=True),
    )),
    ("context", "load and configuration context", (
        Item("request_length_distribution", "request-length distribution",
             "vllm:request_prompt_tokens or sglang:prompt_tokens_histogram", serving_only=True),
        Item("concurrency", "concurrency", "vllm:num_requests_running or sglang:num_running_reqs", serving_only=True),
        Item("tp_size", "tensor-parallel size", "--stack / --vllm / --sglang with the serving command"),
        Item("block_size", "KV block size", "vllm:cache_config_info, or --stack / --vllm", kv_config=True),
        Item("kv_cache_dtype", "KV-cache dtype", "vllm:cache_config_info (cache_dtype), or --stack / --vllm", kv_config=True),
        Item("max_model_len", "max model length", "--stack / --vllm (--max-model-len)", kv_config=True),
    )),
)


# canonical readings (kg.inputs.metrics) behind each checklist item: an item whose reading was read but
# invalid is reported as "invalid", not "missing"
ITEM_READINGS: dict[str, tuple[str, ...]] = {
    "throughput": ("generation_tokens_total", "generation_tokens_per_s"),
    "ttft_distribution": ("ttft_seconds",), "itl_distribution": ("itl_seconds",),
    "success_rate": ("requests_finished_total", "requests_aborted_total"),
    "memory": ("kv_cache_usage", "fb_used_mib", "fb_total_mib", "fb_free_mib"),
    "compute": ("sm_active", "gpu_util", "gr_engine_active", "tensor_active"),
    "bandwidth": ("dram_active", "mem_copy_util"),
    "queue_depth": ("requests_waiting",), "request_length_distribution": ("prompt_length_tokens",),
    "concurrency": ("requests_running",),
}


# ---------------------------------------------------------------------------------------------
# snapshot -> facts + namespace

@dataclass
class Derived:
    """What the namespace was built from, for the report."""

    readings: dict[str, Any] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    checklist: dict[str, Any] = field(default_factory=dict)
    serving: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    invalid_by_reading: dict[str, list[str]] = field(default_factory=dict)

    def invalid_for(self, item: str) -> list[str]:
        """Invalid readings behind checklist item ``item`` (texts), empty when none."""
        return [t for r in ITEM_READINGS.get(item, ()) for t in self.invalid_by_reading.get(r, [])]


def _metric_name(where: str | None) -> str:
    return (where or "").split(" (")[0]


def _pct(v: float | None, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v * 100:.{digits}f} %"


def _device_max(snap: Snapshot, pick) -> tuple[float | None, str | None, str | None]:
    """Max over devices of ``pick(device) -> (value, where) | None``; returns (value, where, device key)."""
    best: tuple[float | None, str | None, str | None] = (None, None, None)
    for key in sorted(snap.devices):
        got = pick(snap.devices[key])
        if got is None or got[0] is None:
            continue
        if best[0] is None or got[0] > best[0]:
            best = (got[0], got[1], key)
    return best


def _reading(name: str):
    def pick(d):
        return (d.readings[name], d.where.get(name)) if name in d.readings else None
    return pick


def _time_based(d):
    for r in ("gpu_util", "gr_engine_active"):
        if r in d.readings:
            return d.readings[r], d.where.get(r)
    return None


def _mem_total(d) -> float | None:
    """Device memory in MiB: the reported total, else used + free + reserved."""
    total = d.readings.get("fb_total_mib")
    if total is None and "fb_used_mib" in d.readings and "fb_free_mib" in d.readings:
        total = d.readings["fb_used_mib"] + d.readings["fb_free_mib"] + d.readings.get("fb_reserved_mib", 0.0)
    return total or None


def _mem_fraction(d):
    used, total = d.readings.get("fb_used_mib"), _mem_total(d)
    if used is None or not total:
        return None
    return used / total, d.where.get("fb_used_mib")


def _hist_ok(h: Histogram | None) -> bool:
    return h is not None and h.total > 0


def _infer_workload(snap: Snapshot, stack, workload: str | None) -> str:
    if workload:
        if workload not in WORKLOADS:
            raise OptkgError(f"--workload: expected one of {', '.join(WORKLOADS)}, found {workload!r}")
        return workload
    if snap.engines:
        return "serving"
    if stack is not None and (stack.engine or "") in PREALLOCATING_ENGINES:
        return "serving"
    return "unknown"


def snapshot_namespace(snap: Snapshot, stack=None, target_throughput: float | None = None,
                       workload: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any], Derived]:
    """Facts and namespace for the diagnose rules (names in the module doc), plus what they came from."""
    if target_throughput is not None and not (target_throughput > 0):
        raise OptkgError(f"--target-throughput: expected a positive number of output tokens/s, found {target_throughput}")
    der = Derived()
    ns: dict[str, Any] = {}
    wl = _infer_workload(snap, stack, workload)
    engines = sorted(snap.engines)
    eng_name = engines[0] if engines else None
    eng = snap.engines.get(eng_name) if eng_name else None
    ns.update(workload=wl, serving=eng is not None, preallocated=wl == "serving", engine=eng_name or "none")
    facts: list[dict[str, Any]] = [{"kind": "snapshot", "workload": wl}]
    if eng is not None:
        facts.append({"kind": "serving", "engine": eng_name})
    hists = _serving_namespace(snap, eng, ns, der)
    gpu_fact = _gpu_namespace(snap, ns, der)  # sets the has_* flags even without GPU metrics
    if snap.devices:
        facts.append(gpu_fact)
    # memory occupancy as the wall and the gate read it: the KV pool for a preallocating server
    if ns["preallocated"] and "kv_cache_usage" in ns:
        ns["memory_occupancy"], der.where["memory_occupancy"] = ns["kv_cache_usage"], der.where["kv_cache_usage"]
    elif not ns["preallocated"] and "device_memory_used_fraction" in ns:
        ns["memory_occupancy"] = ns["device_memory_used_fraction"]
        der.where["memory_occupancy"] = der.where["device_memory_used_fraction"]
    ns["has_memory_occupancy"] = "memory_occupancy" in ns
    # throughput against the target
    if target_throughput is not None:
        ns["target_throughput_tokens_per_s"] = float(target_throughput)
    known = "throughput_tokens_per_s" in ns and target_throughput is not None
    ns["throughput_known"] = known
    ns["throughput_short"] = bool(known and ns["throughput_tokens_per_s"] < target_throughput)
    if known:
        ns["throughput_shortfall"] = max(0.0, 1.0 - ns["throughput_tokens_per_s"] / float(target_throughput))
    ctx = _context(stack, eng)
    for k, v in ctx.items():
        ns.setdefault(k, v)
    _consistency(snap, stack, eng, ns, der)
    _checklist(snap, eng, hists, ctx, ns, der)
    _texts(ns, der)
    der.readings = {k: ns[k] for k in sorted(ns) if not k.endswith(("_text", "_label", "_caveat", "_claim"))
                    and not isinstance(ns[k], (list, dict))}
    return facts, ns, der


def _serving_namespace(snap: Snapshot, eng, ns: dict[str, Any], der: Derived) -> dict[str, Histogram]:
    """Serving readings, window increases and rates into ``ns``; returns the (window) histograms."""
    deltas = snap.deltas(eng.name) if eng is not None else {}
    window = snap.window_s if deltas else None
    ns["has_scrape_window"] = bool(deltas)
    ns["has_retracted"] = False
    if eng is None:
        return {}
    g, c = eng.gauges, eng.counters
    for r in ("kv_cache_usage", "requests_waiting", "requests_running"):
        if r in g:
            ns[r] = g[r]
            der.where[r] = eng.where[r]
    if "retracted_requests" in g:
        ns["retracted_requests"], ns["has_retracted"] = g["retracted_requests"], True
        der.where["retracted_requests"] = eng.where["retracted_requests"]
    if "preemptions_total" in c:
        ns["preemptions_total"] = c["preemptions_total"]
        der.where["preemptions_total"] = eng.where["preemptions_total"]
    if "generation_tokens_total" in deltas:
        ns["window_generation_tokens"] = deltas["generation_tokens_total"]
    if "preemptions_total" in deltas:
        ns["preemptions_new"] = deltas["preemptions_total"]
        if window:
            ns["preemption_rate_per_s"] = deltas["preemptions_total"] / window
    counts = deltas if deltas else c  # window increases when there are two scrapes, else totals since start
    span = " over the window" if deltas else " since start"
    # prefix cache hit rate: hits / queries, else the engine's own gauge (SGLang)
    q, h = counts.get("prefix_cache_queries_total"), counts.get("prefix_cache_hits_total")
    if q:
        ns["prefix_cache_hit_rate"] = (h or 0.0) / q
        der.where["prefix_cache_hit_rate"] = (f"{_metric_name(eng.where.get('prefix_cache_hits_total'))} / "
                                              f"{_metric_name(eng.where.get('prefix_cache_queries_total'))}{span}")
    elif "prefix_cache_hit_rate" in g:
        ns["prefix_cache_hit_rate"] = g["prefix_cache_hit_rate"]
        der.where["prefix_cache_hit_rate"] = eng.where["prefix_cache_hit_rate"]
    # throughput in output tokens/s: generation-token increase over the window, else the engine's gauge
    if window and "generation_tokens_total" in deltas:
        ns["throughput_tokens_per_s"] = deltas["generation_tokens_total"] / window
        der.where["throughput_tokens_per_s"] = (f"increase of {_metric_name(eng.where['generation_tokens_total'])}"
                                                f" / {window:g} s window ({snap.window_source})")
    elif "generation_tokens_per_s" in g:
        ns["throughput_tokens_per_s"] = g["generation_tokens_per_s"]
        der.where["throughput_tokens_per_s"] = eng.where["generation_tokens_per_s"]
    fin = counts.get("requests_finished_total")
    if fin and eng.name == "vllm":  # vllm:request_success_total counts every finished_reason, abort included
        ns["success_rate"] = (fin - (counts.get("requests_aborted_total") or 0.0)) / fin
        der.where["success_rate"] = _metric_name(eng.where.get("requests_finished_total")) + f" (stop + length) / all{span}"
    hists = snap.window_histograms(eng.name)
    blocks, bsize = eng.config.get("num_gpu_blocks"), eng.config.get("block_size")
    der.serving = {
        "engine": eng.name, "file": eng.file, "gauges": dict(sorted(g.items())), "counters": dict(sorted(c.items())),
        "window_deltas": dict(sorted(deltas.items())), "window_s": window,
        "window_source": snap.window_source if deltas else None,
        "latency": {k: hh.summary() for k, hh in sorted(hists.items())},
        "config": dict(sorted(eng.config.items())),
        "kv_capacity_tokens": blocks * bsize if isinstance(blocks, int) and isinstance(bsize, int)
        else g.get("kv_capacity_tokens"),
        "where": dict(sorted(eng.where.items())),
    }
    return hists


def _gpu_namespace(snap: Snapshot, ns: dict[str, Any], der: Derived) -> dict[str, Any]:
    """GPU readings (worst device) into ``ns``; returns the ``gpu`` fact."""
    sm = _device_max(snap, _reading("sm_active"))
    tb = _device_max(snap, _time_based)
    te = _device_max(snap, _reading("tensor_active"))
    none = (None, None, None)
    comp, metric = next(((x, m) for x, m in ((sm, "sm_active"), (tb, "time_based"), (te, "tensor_active"))
                         if x[0] is not None), (none, "none"))
    dram = _device_max(snap, _reading("dram_active"))
    mcu = _device_max(snap, _reading("mem_copy_util"))
    bw, bmetric = next(((x, m) for x, m in ((dram, "dram_active"), (mcu, "mem_copy_util")) if x[0] is not None),
                       (none, "none"))
    mem = _device_max(snap, _mem_fraction)
    video = _device_max(snap, lambda d: max(((d.readings[r], d.where.get(r)) for r in ("encoder_util", "decoder_util")
                                             if r in d.readings), default=None, key=lambda x: x[0]))
    ns.update(compute_metric=metric, bandwidth_metric=bmetric, has_compute=comp[0] is not None,
              has_bandwidth=bw[0] is not None, has_tensor=te[0] is not None, has_device_memory=mem[0] is not None,
              has_video=video[0] is not None)
    for name, got in (("compute_util", comp), ("tensor_active", te), ("bandwidth_util", bw),
                      ("device_memory_used_fraction", mem), ("video_engine_util", video)):
        if got[0] is not None:
            ns[name] = got[0]
            der.where[name] = f"{got[1]}, GPU {got[2]}"
    if mem[0] is not None:
        d = snap.devices[mem[2]]
        ns["device_memory_used_mib"], ns["device_memory_total_mib"] = d.readings["fb_used_mib"], _mem_total(d)
    # power on the device that sets the compute reading, else the device with the highest ratio
    pdev = snap.devices.get(comp[2]) if comp[2] else None
    if pdev is None or "power_w" not in pdev.readings or not pdev.readings.get("power_limit_w"):
        pr = _device_max(snap, lambda d: (d.readings["power_w"] / d.readings["power_limit_w"], d.where["power_w"])
                         if d.readings.get("power_limit_w") and "power_w" in d.readings else None)
        pdev = snap.devices.get(pr[2]) if pr[2] else None
    ns["has_power_ratio"] = pdev is not None
    if pdev is not None:
        ns["power_w"], ns["power_limit_w"] = pdev.readings["power_w"], pdev.readings["power_limit_w"]
        ns["power_ratio"] = ns["power_w"] / ns["power_limit_w"]
        der.where["power_ratio"] = f"{pdev.where['power_w']} / {pdev.where['power_limit_w']}, GPU {pdev.key}"
    return {"kind": "gpu", "compute_metric": metric, "bandwidth_metric": bmetric}


def _stack_model_names(stack) -> list[str]:
    """Names the stack's model goes by: the resolved model name and any --served-model-name."""
    names = []
    if stack is not None and stack.model is not None and stack.model.name:
        names.append(stack.model.name)
    if getattr(stack, "unresolved_model", None):  # a model diagnose could not resolve (not bundled): its name only
        names.append(stack.unresolved_model)
    for w in (stack.ignored if stack is not None else []):
        head, _, rest = w.partition("=") if w.startswith("--served-model-name=") else w.partition(" ")
        if head == "--served-model-name" and rest.strip():
            names += rest.split()
    return names


SPREAD_READINGS = ("sm_active", "gpu_util", "gr_engine_active", "tensor_active", "dram_active", "mem_copy_util")


def gpu_matches(hw: dict[str, Any], metrics_name: str) -> bool:
    """Whether a catalog hardware entry (``--gpu``) is the GPU model a metrics input names.

    Compares the family token of the catalog id and aliases (``H100`` of ``H100-SXM``, ``L40S``) with
    the words of the reported name (nvidia-smi ``name`` / DCGM ``modelName``, e.g. 'NVIDIA H100 80GB HBM3').
    """
    words = set(re.findall(r"[a-z0-9]+", metrics_name.lower()))
    ids = [str(hw.get("id") or "")] + [str(a) for a in hw.get("aliases") or []]
    return any(re.split(r"[-_ ]", i.lower())[0] in words for i in ids if i)


def same_model(a: str, b: str) -> bool:
    """Whether two model names mean the same model: equal ignoring case, or the same last path part
    (``/models/Qwen3-8B`` and ``Qwen/Qwen3-8B``)."""
    x, y = a.strip().rstrip("/").lower(), b.strip().rstrip("/").lower()
    return x == y or x.rsplit("/", 1)[-1] == y.rsplit("/", 1)[-1]


def _consistency(snap: Snapshot, stack, eng, ns: dict[str, Any], der: Derived) -> None:
    """Whether the inputs belong together: invalid readings, several GPU models or hosts, the served model."""
    inv = snap.invalid
    ns["invalid_readings_count"] = len(inv)
    ns["invalid_readings_text"] = "; ".join(i.text() for i in inv[:6]) + (f"; and {len(inv) - 6} more (--verbose)"
                                                                          if len(inv) > 6 else "")
    models, hosts = snap.gpu_models(), snap.hosts()
    ns["gpu_model_count"], ns["host_count"] = len(models), len(hosts)

    def named(d: dict[str, list[str]]) -> str:
        return "; ".join(f"{k} ({', '.join(v)})" for k, v in d.items())
    ns["gpu_models_text"], ns["hosts_text"] = named(models), named(hosts)
    ns["machines_text"] = "; ".join(x for x in ((f"GPU models: {named(models)}" if models else ""),
                                                 (f"hosts: {named(hosts)}" if hosts else "")) if x)
    # one GPU read differently by two inputs: the largest gap of a utilisation reading (fraction 0-1)
    gaps = [(dg["values"][-1] - dg["values"][0], dg) for dg in snap.disagreements if dg["reading"] in SPREAD_READINGS]
    ns["gpu_reading_spread"] = max((g for g, _ in gaps), default=0.0)
    ns["gpu_readings_disagree_text"] = "; ".join(
        f"GPU {dg['gpu']} {dg['reading']} {dg['values'][0]:.0%} ({dg['where'][0]}) vs {dg['values'][-1]:.0%} "
        f"({dg['where'][-1]})" for _, dg in sorted(gaps, key=lambda x: (-x[0], x[1]["gpu"], x[1]["reading"]))[:4])
    # several serving engines among the inputs: one is diagnosed, the other is named
    engines = sorted(snap.engines)
    ns["engine_count"] = len(engines)
    ns["engines_text"] = ", ".join(f"{n} ({snap.engines[n].file})" for n in engines)
    # the --gpu / stack hardware against the GPU model the metrics name
    hw = getattr(stack, "hardware", None) if stack is not None else None
    ns["stack_gpu_text"] = (f"{hw.get('id')} ({hw.get('name')})" if hw else "none")
    ns["metrics_gpu_text"] = ", ".join(models) or "none"
    ns["gpu_mismatch"] = bool(hw and models and not any(gpu_matches(hw, m) for m in models))
    metrics_models = list(eng.model_names) if eng is not None else []
    stack_models = _stack_model_names(stack)
    ns["metrics_model_text"] = ", ".join(metrics_models) or "none"
    ns["stack_model_text"] = ", ".join(stack_models) or "none"
    ns["model_mismatch"] = bool(metrics_models and stack_models and not any(
        same_model(a, b) for a in metrics_models for b in stack_models))
    if eng is not None and len(metrics_models) > 1:
        der.notes.append(f"{eng.name} metrics carry several model_name labels ({', '.join(metrics_models)}); "
                         "series of all of them are summed")
    by_reading: dict[str, list[str]] = {}
    for i in inv:
        by_reading.setdefault(i.reading, []).append(f"{i.metric} for {i.entity} reads {i.value:g} ({i.why})")
    der.invalid_by_reading = by_reading


def _context(stack, eng) -> dict[str, Any]:
    """Key configuration from the stack (--stack/--vllm/--sglang) and vllm:cache_config_info."""
    ctx: dict[str, Any] = {}
    if stack is not None:
        vals = stack.values()
        for k in ("tp_size", "pp_size", "dcp_size", "max_model_len", "kv_cache_dtype", "block_size", "gpu_memory_utilization"):
            if vals.get(k) is not None and (k in stack.settings or any(k in p for p in stack.techniques.values())):
                ctx[k] = vals[k]
        ctx.setdefault("tp_size", vals.get("tp_size", 1))  # a stack without tensor parallelism runs TP 1
    if eng is not None:
        if "block_size" not in ctx and isinstance(eng.config.get("block_size"), int):
            ctx["block_size"] = eng.config["block_size"]
        if "kv_cache_dtype" not in ctx and eng.config.get("cache_dtype"):
            ctx["kv_cache_dtype"] = eng.config["cache_dtype"]
    return ctx


COLLECTOR_FIELDS = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
                    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE")


def _checklist(snap: Snapshot, eng, hists: dict[str, Histogram], ctx: dict[str, Any], ns: dict[str, Any],
               der: Derived) -> None:
    """The collection checklist (method 001 §3) into ``der.checklist`` and its counts into ``ns``."""
    wl, metric, bmetric = ns["workload"], ns["compute_metric"], ns["bandwidth_metric"]

    def hist_via(name: str) -> str:
        return _metric_name(eng.where.get(name)) if eng is not None else ""
    present: dict[str, tuple[bool, str]] = {
        "throughput": ("throughput_tokens_per_s" in ns, der.where.get("throughput_tokens_per_s", "")),
        "ttft_distribution": (_hist_ok(hists.get("ttft_seconds")), hist_via("ttft_seconds")),
        "itl_distribution": (_hist_ok(hists.get("itl_seconds")), hist_via("itl_seconds")),
        "success_rate": ("success_rate" in ns, der.where.get("success_rate", "")),
        "memory": ("memory_occupancy" in ns, der.where.get("memory_occupancy", "")),
        "compute": (ns["has_compute"], der.where.get("compute_util", "")),
        "bandwidth": (ns["has_bandwidth"], der.where.get("bandwidth_util", "")),
        "queue_depth": ("requests_waiting" in ns, der.where.get("requests_waiting", "")),
        "request_length_distribution": (_hist_ok(hists.get("prompt_length_tokens")), hist_via("prompt_length_tokens")),
        "concurrency": ("requests_running" in ns, der.where.get("requests_running", "")),
        "tp_size": ("tp_size" in ctx, "stack" if "tp_size" in ctx else ""),
        "block_size": ("block_size" in ctx, "stack or vllm:cache_config_info" if "block_size" in ctx else ""),
        "kv_cache_dtype": ("kv_cache_dtype" in ctx, "stack or vllm:cache_config_info" if "kv_cache_dtype" in ctx else ""),
        "max_model_len": ("max_model_len" in ctx, "stack" if "max_model_len" in ctx else ""),
    }
    groups = []
    counts: dict[str, tuple[int, list[str]]] = {}
    for gid, glabel, items in CHECKLIST:
        rows, missing, n_present = [], [], 0
        for it in items:
            ok, via = present[it.id]
            status = "present" if ok else "missing"
            bad = der.invalid_for(it.id) if not ok else []
            if not ok and ((it.serving_only and wl in ("training", "generate")) or (it.kv_config and wl == "training")):
                status = "n/a"
            elif bad:
                status = "invalid"
            quality, hint = None, it.hint
            if status == "invalid":
                hint = "read but invalid, so not used: " + "; ".join(bad) + ". Collect " + it.hint
            if it.id == "compute" and ok and metric != "sm_active":
                quality, hint = "coarse", "time-based or tensor-pipe only; " + it.hint
            if it.id == "bandwidth" and ok and bmetric != "dram_active":
                quality = "coarse"
            if it.id in ("compute", "bandwidth") and snap.collector_fields and (status != "present" or quality):
                fld = "DCGM_FI_PROF_SM_ACTIVE" if it.id == "compute" else "DCGM_FI_PROF_DRAM_ACTIVE"
                lists = ", ".join(x.path for x in snap.sources if x.format == "dcgm-fields") or "the field list"
                enabled = snap.collector_fields.get(fld)  # None: the field list does not mention it
                if enabled:
                    hint = f"{fld} is enabled in {lists}; scrape the exporter (GET /metrics) and pass that file"
                elif enabled is not None:
                    hint = f"{fld} is commented out in {lists}: uncomment it, restart the exporter and scrape it"
            if status == "present":
                n_present += 1
            elif status == "missing":
                missing.append(f"{it.label} [{hint}]")
            rows.append({"id": it.id, "label": it.label, "status": status, "via": via or None,
                         "quality": quality, "hint": None if status == "present" and not quality else hint})
        groups.append({"id": gid, "label": glabel, "items": rows, "present": n_present,
                       "applicable": sum(1 for r in rows if r["status"] != "n/a"),
                       "invalid": sum(1 for r in rows if r["status"] == "invalid")})
        counts[gid] = (n_present, missing)
    for gid in ("kpis", "resources", "context"):
        ns[f"{gid}_missing_count"] = len(counts[gid][1])
        ns[f"{gid}_missing_text"] = "; ".join(counts[gid][1])
    ns["context_present_count"] = counts["context"][0]
    for item in ("memory", "compute", "bandwidth"):
        if der.invalid_for(item):
            ns[f"{item}_invalid_text"] = "; ".join(der.invalid_for(item))
    der.checklist = {"groups": groups, "comparable": ns["context_missing_count"] == 0,
                     "collector_fields": {k: v for k, v in sorted(snap.collector_fields.items()) if k in COLLECTOR_FIELDS}}


def _texts(ns: dict[str, Any], der: Derived) -> None:
    metric, bmetric = ns["compute_metric"], ns["bandwidth_metric"]
    cname = _metric_name(der.where.get("compute_util"))
    bname = _metric_name(der.where.get("bandwidth_util"))
    ns["compute_label"] = f"{COMPUTE_LABEL[metric]} ({cname})" if metric in COMPUTE_LABEL else "compute (not measured)"
    ns["bandwidth_label"] = f"{BANDWIDTH_LABEL[bmetric]} ({bname})" if bmetric in BANDWIDTH_LABEL else "bandwidth (not measured)"
    ns["compute_text"] = f"{_pct(ns['compute_util'])} ({ns['compute_label']})" if ns["has_compute"] else "not measured"
    ns["bandwidth_text"] = f"{_pct(ns['bandwidth_util'])} ({ns['bandwidth_label']})" if ns["has_bandwidth"] else "not measured"
    ns["compute_caveat"] = {
        "time_based": "; only time-based utilisation is present, which reads 100 % whenever a kernel is resident: "
                      "collect DCGM_FI_PROF_SM_ACTIVE",
        "tensor_active": "; SM activity was not collected, tensor-pipe activity stands in: collect DCGM_FI_PROF_SM_ACTIVE",
    }.get(metric, "")
    ns["bandwidth_caveat"] = ("; utilization.memory / DCGM_FI_DEV_MEM_COPY_UTIL is the share of time memory was "
                              "read or written, a coarser proxy than DCGM_FI_PROF_DRAM_ACTIVE"
                              if bmetric == "mem_copy_util" else "")
    short = ns["throughput_short"]
    ns["compute_claim"] = "confirmed" if metric == "sm_active" and short else "likely"
    m, t = ns.get("throughput_tokens_per_s"), ns.get("target_throughput_tokens_per_s")
    if m is not None and t is not None:
        ns["throughput_text"] = (f"throughput {m:,.0f} tokens/s is {ns['throughput_shortfall']:.0%} below the target {t:,.0f}"
                                 if short else f"throughput {m:,.0f} tokens/s meets the target {t:,.0f}")
    elif m is not None:
        ns["throughput_text"] = f"throughput {m:,.0f} tokens/s; no --target-throughput, so short of target cannot be judged"
    elif t is not None:
        ns["throughput_text"] = ("throughput not measured (needs two scrapes with --window, or SGLang gen_throughput), "
                                 "so short of target cannot be judged")
    else:
        ns["throughput_text"] = "no throughput target given (--target-throughput), so saturation cannot be told from a wall"
    w = ns.get("requests_waiting")
    ns["requests_waiting_text"] = "" if w is None else (" and none waiting" if w == 0 else f" and {w:,.0f} waiting")
    if ns["preallocated"] and "kv_cache_usage" in ns:
        parts = [f"KV-cache usage {_pct(ns['kv_cache_usage'])} ({_metric_name(der.where.get('kv_cache_usage'))})"]
        if "requests_waiting" in ns:
            parts.append(f"{ns['requests_waiting']:,.0f} requests waiting")
        if ns.get("preemptions_new"):
            parts.append(f"{ns['preemptions_new']:,.0f} preemptions in the window")
        if ns.get("retracted_requests"):
            parts.append(f"{ns['retracted_requests']:,.0f} requests retracted")
        ns["memory_text"] = ", ".join(parts)
    elif ns["has_device_memory"]:
        ns["memory_text"] = (f"device memory {_pct(ns['device_memory_used_fraction'], 1)} "
                             f"({ns['device_memory_used_mib']:,.0f} of {ns['device_memory_total_mib']:,.0f} MiB)")
    else:
        ns["memory_text"] = "memory not measured"
    ns["memory_caveat"] = ("; raw device memory counts only when the stack does not preallocate: a vLLM/SGLang server "
                           "sits near 90 % by design (give --workload, the engine metrics or --stack)"
                           if not ns["preallocated"] and ns["workload"] == "unknown" else "")


# ---------------------------------------------------------------------------------------------
# thresholds

def load_thresholds(path: Path | str, ruleset: RuleSet) -> tuple[dict[str, float], dict[str, str]]:
    """Read a thresholds override file: ``{name: value}`` or ``{thresholds: {name: value | {value: ...}}}``.

    Returns (name -> value, name -> 'file:line'). Raises OptkgError naming file:line for unknown
    names, non-numbers, and fractions outside 0-1.
    """
    from kg.core.yamlio import load_yaml
    doc = load_yaml(path)
    d = doc.data
    if doc.duplicate_keys:
        key, line, _, first = doc.duplicate_keys[0]
        raise OptkgError(f"{path}:{line}: threshold '{key[-1]}' is given twice (first at line {first}); keep one")
    if not isinstance(d, dict):
        raise OptkgError(f"{path}:1: a thresholds file is a mapping {{threshold_name: value}}")
    base: tuple = ()
    if "thresholds" in d:
        extra = sorted(set(d) - {"thresholds", "description"})
        if extra or not isinstance(d["thresholds"], dict):
            line, _ = doc.where((extra[0],) if extra else ("thresholds",))
            raise OptkgError(f"{path}:{line}: expected `thresholds: {{name: value}}` (and an optional description)")
        d, base = d["thresholds"], ("thresholds",)
    out: dict[str, float] = {}
    where: dict[str, str] = {}
    known = ruleset.thresholds
    for name, v in d.items():
        line, _ = doc.where(base + (name,))
        if name not in known:
            from difflib import get_close_matches
            near = get_close_matches(str(name), list(known), n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise OptkgError(f"{path}:{line}: unknown threshold '{name}'{hint} (known: {', '.join(sorted(known))})")
        if isinstance(v, dict):
            v = v.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OptkgError(f"{path}:{line}: {name}: expected a number, found {v!r}")
        if known[name].get("unit") == "fraction" and not 0.0 <= float(v) <= 1.0:
            raise OptkgError(f"{path}:{line}: {name}: expected a fraction 0-1 (0.9 means 90 %), found {v}")
        out[str(name)], where[str(name)] = float(v), f"{path}:{line}"
    # pairs the rules read as ordered (low < high); checked on the merged values (overrides over defaults)
    merged = {k: float(t["value"]) for k, t in known.items()} | out
    for low, high in THRESHOLD_ORDER:
        if low in merged and high in merged and (low in out or high in out) and not merged[low] < merged[high]:
            at = where.get(low) or where.get(high)
            raise OptkgError(f"{at}: {low} ({merged[low]:g}) must be below {high} ({merged[high]:g})"
                             f"{'' if low in out and high in out else ' (the other is the default)'}")
    return out, where


# threshold pairs the rules need ordered (first < second): idle below low activity, a disguised-memory-wall
# reading below the compute wall, idle below the engine-idle busy reading, the severe shortfall below the critical
THRESHOLD_ORDER = (("idle_util", "neither_wall_util"), ("compute_disguise_util", "compute_wall_util"),
                   ("idle_util", "engine_idle_gpu_busy_util"), ("shortfall_severe", "shortfall_critical"))


def thresholds_used(ruleset: RuleSet, overrides: dict[str, float] | None, where: dict[str, str] | None) -> dict[str, Any]:
    out = {}
    for name, t in sorted(ruleset.thresholds.items()):
        o = (overrides or {}).get(name)
        out[name] = {"value": o if o is not None else t["value"], "default": t["value"], "unit": t.get("unit"),
                     "source": f"override ({(where or {}).get(name, 'given')})" if o is not None else "default",
                     "provenance": t["provenance"], "note": t.get("note", "")}
    return out


# ---------------------------------------------------------------------------------------------
# catalog links and the user's stack

def _stage(workload: str, stack) -> str | None:
    if workload in ("serving", "generate"):
        return "inference"
    if workload == "training":
        return "training"
    if stack is not None and stack.engine:
        return "inference"
    return None


def wall_techniques(catalog, dimension: str, stage: str | None, keywords: Iterable[str],
                    named: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Catalog techniques with a benefit in ``dimension`` (and ``stage`` if given), with their costs.

    ``named``: the ids the wall rule names as its direction (its ``fixes``); they are listed even
    when their benefit lies in another dimension, and ranked first in the rule's order. The rest
    are ranked by how many of the wall's keywords (the rule's ``benefit:`` tags) their benefit
    text mentions, then by id.
    """
    kws = [k.lower() for k in keywords]
    order = {catalog.resolve(n) or n: i for i, n in enumerate(named)}
    out = []
    for tid, t in sorted(catalog.techniques.items()):
        if t.get("status") == "deprecated":
            continue
        coords = t.get("coordinates") or {}
        if stage and stage not in (coords.get("stages") or []):
            continue
        bens = [b for b in t.get("benefits") or [] if b.get("dimension") == dimension]
        if not bens and tid in order:
            bens = list(t.get("benefits") or [])[:1]
        if not bens:
            continue
        text = " ".join(f"{b.get('what', '')} {b.get('who', '')}" for b in bens).lower()
        out.append({
            "technique": tid, "name": t.get("name", tid),
            "benefits": [b.get("what", "") for b in bens],
            "costs": [{"dimension": c.get("dimension"), "what": c.get("what", "")} for c in t.get("costs") or []],
            "coordinates": {"stages": coords.get("stages", []), "layers": coords.get("layers", []),
                            "dimension": coords.get("dimension")},
            "keyword_hits": sorted({k for k in kws if k in text}),
            "named_by_rule": tid in order,
        })
    out.sort(key=lambda x: (order.get(x["technique"], len(order)), -len(x["keyword_hits"]), x["technique"]))
    return out


def _clone_stack(stack):
    return copy.deepcopy(stack)


def _declared_conflicts(catalog, tid: str, st2) -> list[dict[str, Any]]:
    from kg.analyses.check import stack_facts
    from kg.engine.expr import ExprError, ExprTypeError, MissingFact, evaluate
    _, ns = stack_facts(st2)
    fns = {"has": lambda t: t in st2.techniques}
    pairs = [(tid, cp) for cp in catalog.techniques[tid].get("couplings") or []]
    pairs += [(o, cp) for o in sorted(st2.techniques) if o != tid and o in catalog.techniques
              for cp in catalog.techniques[o].get("couplings") or []]
    out = []
    for owner, cp in pairs:
        if cp.get("kind") != "conflicts_with" or not cp.get("target"):
            continue
        target = catalog.resolve(cp["target"]) or cp["target"]
        if owner == tid:
            if target not in st2.techniques or target == tid:
                continue
            partner = target
        elif target == tid:
            partner = owner
        else:
            continue
        engines = cp.get("engines")
        if engines and st2.engine and st2.engine not in engines:
            continue
        holds: bool | None = True
        if cp.get("condition"):
            try:
                holds = bool(evaluate(cp["condition"], ns, fns))
            except (MissingFact, ExprTypeError, ExprError, ZeroDivisionError, TypeError, ValueError):
                holds = None
        out.append({"with": partner, "condition": cp.get("condition"), "holds_now": holds,
                    "severity": cp.get("severity"), "mechanism": cp.get("mechanism", ""), "engines": engines})
    return out


def stack_links(stack, catalog, check_rules: RuleSet, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """With the user's stack: check findings to fix first, and per candidate whether it is in the stack,
    what adding it (default parameters) newly triggers in ``optkg check``, and declared conflicts."""
    from kg.analyses.check import check_stack
    from kg.inputs.stack import add_technique
    base = check_stack(stack, catalog, check_rules)
    base_fp = {f.fingerprint for f in base.findings}
    ids = {c["technique"] for c in candidates}
    first = []
    for f in base.findings:
        fx = [x["technique"] for x in f.fixes if x["technique"] in ids]
        if fx:
            first.append({"rule_id": f.rule_id, "severity": f.severity, "message": f.message, "fix": f.fix, "fixes": fx,
                          "cost_dimension": f.cost_dimension})
    for c in candidates:
        tid = c["technique"]
        c["in_stack"] = tid in stack.techniques
        c["do_first_because"] = [x["rule_id"] for x in first if tid in x["fixes"]]
        c["collides"], c["declared_conflicts"] = [], []
        if c["in_stack"]:
            continue
        st2 = _clone_stack(stack)
        defaults = {p["name"]: p["default"] for p in catalog.techniques[tid].get("parameters") or []
                    if p.get("default") is not None}
        try:
            add_technique(st2, catalog, tid, defaults, "diagnose")
            rep = check_stack(st2, catalog, check_rules)
        except OptkgError as e:
            c["collides"].append({"rule_id": None, "severity": "error", "message": str(e)})
            continue
        c["collides"] = [{"rule_id": f.rule_id, "severity": f.severity, "message": f.message, "fingerprint": f.fingerprint}
                         for f in rep.findings if f.fingerprint not in base_fp]
        c["declared_conflicts"] = _declared_conflicts(catalog, tid, st2)
    rank = {c["technique"]: i for i, c in enumerate(candidates)}
    candidates.sort(key=lambda x: (not x["do_first_because"], x["in_stack"], rank[x["technique"]]))
    return {"first": first, "checked_with": "each candidate added to your stack with its catalog default parameters"}


# ---------------------------------------------------------------------------------------------
# the whole diagnosis

def _finding(f: Firing) -> dict[str, Any]:
    r = f.rule
    return {"rule_id": r.id, "title": r.title, "severity": f.severity, "message": " ".join(f.message.split()),
            "numbers": f.numbers, "tags": r.tags, "parent": r.parent, "cost_dimension": r.cost_dimension,
            "mechanism": " ".join(r.mechanism.split()), "fix": " ".join(r.fix.split()), "fixes": r.fixes,
            "sources": r.sources, "rule_file": r.file, "rule_line": r.line}


def _wall_status(wall: str, ns: dict[str, Any], th: dict[str, float]) -> str:
    """One line: why a wall did not fire, in readings rather than the rule's condition text."""
    t = th.__getitem__
    if wall == "memory":
        if ns["preallocated"]:
            if "kv_cache_usage" not in ns and ns.get("memory_invalid_text"):
                return f"reading invalid: {ns['memory_invalid_text']}"
            if "kv_cache_usage" not in ns:
                return "not measured: a preallocating server needs its KV-cache usage (engine /metrics)"
            return (f"{ns['memory_text']}: the wall needs KV usage above {t('memory_wall_kv_usage'):.0%} together with "
                    "waiting requests, preemptions or retractions")
        if not ns["has_device_memory"]:
            return "not measured"
        return f"{ns['memory_text']}, not above {t('memory_wall_occupancy'):.0%}"
    if wall == "compute":
        if not ns["has_compute"] and ns.get("compute_invalid_text"):
            return f"reading invalid: {ns['compute_invalid_text']}"
        if not ns["has_compute"]:
            return "not measured (no GPU utilisation metrics)"
        if ns["compute_util"] <= t("compute_wall_util"):
            return f"{ns['compute_text']}, not above {t('compute_wall_util'):.0%}"
        if ns["throughput_known"] and not ns["throughput_short"]:
            return f"{ns['compute_text']} but {ns['throughput_text']}: saturated, not a wall"
        return f"{ns['compute_text']}, contradicted by power ({ns.get('power_ratio', 0):.0%} of the limit)"
    if not ns["has_bandwidth"] and ns.get("bandwidth_invalid_text"):
        return f"reading invalid: {ns['bandwidth_invalid_text']}"
    if not ns["has_bandwidth"]:
        return "not measured (no DRAM activity or memory utilisation metrics)"
    return f"{ns['bandwidth_text']}, not above {t('bandwidth_wall_util'):.0%}"


def _verdict(by_id: dict[str, Firing], ns: dict[str, Any], comparable: bool, context_missing: str) -> dict[str, Any]:
    fired = lambda rid: rid in by_id and by_id[rid].fired  # noqa: E731
    walls = [(w, rid) for w, rid in WALL_RULES if fired(rid)]
    v: dict[str, Any]
    disagree = next((r for r in ("metrics-disagree", "gpu-readings-disagree") if fired(r)), None)
    if disagree:
        f = by_id[disagree]
        v = {"kind": "inconsistent", "state": "metrics-disagree",
             "label": "metrics disagree: not from the same run", "severity": f.severity,
             "confidence": None, "rule_id": disagree, "message": " ".join(f.message.split()),
             "also": [], "walls_read_separately": [w for w, _ in walls]}
    elif walls:
        order = {w: i for i, (w, _) in enumerate(WALL_RULES)}
        walls.sort(key=lambda x: (-SEVERITY_ORDER.get(by_id[x[1]].severity or "", 0), order[x[0]]))
        wall, rid = walls[0]
        f = by_id[rid]
        state = f"{wall}-wall"
        label = {"memory": "memory wall", "bandwidth": "memory-bandwidth wall",
                 "compute": "compute wall" if ns.get("compute_claim") == "confirmed" else "compute saturation likely"}[wall]
        if wall == "memory" and fired("memory-wall-idle-compute"):
            state, label = "memory-wall-looks-like-idle-compute", "memory wall that looks like idle compute: fix memory first"
        v = {"kind": wall, "state": state, "label": label, "severity": f.severity,
             "confidence": f.numbers.get("confidence"), "rule_id": rid, "message": " ".join(f.message.split()),
             "also": [w for w, _ in walls[1:]]}
    elif fired("neither-wall"):
        f = by_id["neither-wall"]
        for rid, state, label in (("neither-wall-not-loaded", "not-loaded", "not loaded"),
                                  ("neither-wall-idle", "idle", "idle"),
                                  ("neither-wall-video-engines", "video-engines", "video engines busy, SMs idle"),
                                  ("neither-wall-latency-bound", "latency-bound", "latency-, host- or launch-bound")):
            if fired(rid):
                sub = by_id[rid]
                break
        else:
            sub, state, label = f, "neither-wall", "neither wall"
        v = {"kind": "neither", "state": state, "label": f"{label} (neither wall)", "severity": sub.severity,
             "confidence": f.numbers.get("confidence"), "rule_id": sub.rule.id, "message": " ".join(sub.message.split()),
             "also": []}
    elif fired("queue-without-kv-pressure"):
        f = by_id["queue-without-kv-pressure"]
        v = {"kind": "neither", "state": "scheduler-limited", "label": "requests queue with room in the KV pool (scheduler-limited)",
             "severity": f.severity, "confidence": "medium", "rule_id": f.rule.id, "message": " ".join(f.message.split()),
             "also": []}
    else:
        need = [n for n, ok in (("compute", ns["has_compute"]), ("bandwidth", ns["has_bandwidth"]),
                                ("memory", ns["has_memory_occupancy"])) if not ok]
        why = "no wall threshold is crossed and the readings are between the walls"
        if fired("time-util-contradicted"):
            why = "time-based utilisation is high but power contradicts it: " + " ".join(by_id["time-util-contradicted"].message.split())
        elif need:
            bad = [n for n in need if ns.get(f"{n}_invalid_text")]
            miss = [n for n in need if n not in bad]
            parts = ([f"{', '.join(bad)} read but invalid ({'; '.join(ns[f'{n}_invalid_text'] for n in bad)})"] if bad else []) + \
                ([f"missing {', '.join(miss)}"] if miss else [])
            why = "not enough readings: " + "; ".join(parts)
        v = {"kind": "inconclusive", "state": "inconclusive", "label": "inconclusive", "severity": "info",
             "confidence": None, "rule_id": None, "message": why, "also": []}
    v["comparable"] = comparable
    if not comparable:
        v["comparability"] = f"cannot be compared with another run: missing context ({context_missing})"
    return v


def diagnose(snap: Snapshot, ruleset: RuleSet, catalog=None, stack=None, target_throughput: float | None = None,
             workload: str | None = None, thresholds: dict[str, float] | None = None,
             thresholds_where: dict[str, str] | None = None, check_rules: RuleSet | None = None) -> dict[str, Any]:
    """Diagnose ``snap``; returns the report dict (``schema_version``, ``kind: diagnose``; see module doc).

    ``catalog``: a Catalog, or a zero-argument callable returning one (called only when a wall
    fires and its techniques are linked), or None for no technique links.
    """
    facts, ns, der = snapshot_namespace(snap, stack, target_throughput, workload)
    firings = evaluate_rules(ruleset, facts, ns, thresholds=thresholds)
    th = {k: float(v["value"]) for k, v in thresholds_used(ruleset, thresholds, thresholds_where).items()}
    by_id = {f.rule.id: f for f in firings}
    findings = [_finding(f) for f in firings if f.fired]
    findings.sort(key=lambda x: (-SEVERITY_ORDER.get(x["severity"], 0), x["rule_id"]))
    ctx_missing = ", ".join(i["label"] for g in der.checklist["groups"] if g["id"] == "context"
                            for i in g["items"] if i["status"] == "missing")
    verdict = _verdict(by_id, ns, der.checklist["comparable"], ctx_missing)
    stage = _stage(ns["workload"], stack)
    walls: dict[str, Any] = {}
    links_first: list[dict[str, Any]] = []
    for wall, rid in WALL_RULES:
        f = by_id.get(rid)
        if f is None:
            continue
        entry: dict[str, Any] = {"rule_id": rid, "fired": f.fired, "severity": f.severity,
                                 "confidence": f.numbers.get("confidence") if f.fired else None,
                                 "message": " ".join(f.message.split()) if f.fired else None,
                                 "reason": None if f.fired else f.reason, "numbers": f.numbers,
                                 "dimension": f.rule.cost_dimension, "direction": " ".join(f.rule.fix.split()),
                                 "details": [_finding(c) for c in firings if c.fired and c.rule.parent == rid]}
        if f.fired and catalog is not None and f.rule.cost_dimension:
            if not hasattr(catalog, "techniques"):
                catalog = catalog()
            kws = [t.split(":", 1)[1] for t in f.rule.tags if t.startswith("benefit:")]
            cands = wall_techniques(catalog, f.rule.cost_dimension, stage, kws, f.rule.fixes)
            if stack is not None and check_rules is not None:
                entry["stack"] = stack_links(stack, catalog, check_rules, cands)
                links_first += entry["stack"]["first"]
            entry["techniques"] = cands
        walls[wall] = entry
    for wall, entry in walls.items():
        entry["status"] = entry["message"] if entry["fired"] else _wall_status(wall, ns, th)
    nf = by_id.get("neither-wall")
    if nf is not None:
        walls["neither"] = {"rule_id": "neither-wall", "fired": nf.fired, "severity": nf.severity,
                            "confidence": nf.numbers.get("confidence") if nf.fired else None,
                            "message": " ".join(nf.message.split()) if nf.fired else None,
                            "reason": None if nf.fired else nf.reason,
                            "details": [_finding(c) for c in firings if c.fired and c.rule.parent == "neither-wall"],
                            "status": " ".join(nf.message.split()) if nf.fired else
                            "a wall binds, something is queued, or the readings do not show both compute and "
                            "bandwidth low"}
    gate_open, gate_closed = by_id.get("operator-gate-open"), by_id.get("operator-gate-closed")
    if gate_open is not None and gate_open.fired:
        gate = {"state": "open", "justified": True, "message": " ".join(gate_open.message.split())}
    elif gate_closed is not None and gate_closed.fired:
        gate = {"state": "closed", "justified": False, "message": " ".join(gate_closed.message.split())}
    else:
        need = [n for n, ok in (("a compute reading", ns["has_compute"]), ("a memory reading", ns["has_memory_occupancy"]),
                                ("measured throughput", "throughput_tokens_per_s" in ns),
                                ("--target-throughput", "target_throughput_tokens_per_s" in ns)) if not ok]
        if need:
            gate = {"state": "undecided", "justified": None, "message": "needs " + ", ".join(need)}
        elif not ns["throughput_short"]:
            gate = {"state": "not-needed", "justified": False, "message": "throughput meets the target"}
        else:
            hi, lo = (("compute", "memory") if ns["compute_util"] >= th["operator_gate_compute"] else ("memory", "compute"))
            gate = {"state": "wall-first", "justified": None,
                    "message": f"{hi} is at its limit and {lo} is not: the gate (both below, or both at, their limits) "
                               f"does not decide; follow the {hi} wall's direction"}
    d: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "kind": "diagnose",
        "inputs": [s.to_dict() for s in snap.sources],
        "workload": ns["workload"], "engine": None if ns["engine"] == "none" else ns["engine"],
        "verdict": verdict, "walls": walls, "operator_gate": gate, "checklist": der.checklist,
        "findings": findings,
        "not_fired": [{"rule": f.rule.id, "reason": f.reason} for f in firings if not f.fired],
        "readings": der.readings, "reading_sources": dict(sorted(der.where.items())), "serving": der.serving,
        "devices": [{"key": k, "name": dv.name, "readings": dict(sorted(dv.readings.items())),
                     "where": dict(sorted(dv.where.items()))} for k, dv in sorted(snap.devices.items())],
        "thresholds": thresholds_used(ruleset, thresholds, thresholds_where),
        "unknown_metrics": snap.unknown_metrics,
        "invalid_readings": [i.to_dict() for i in snap.invalid],
        "input_warnings": [x for x in findings if INPUT_TAG in x["tags"]],
        "machines": snap.machines,
        "notes": snap.notes + der.notes,
        "stack": None,
    }
    if stack is not None:
        from kg.analyses.check import describe_stack
        d["stack"] = describe_stack(stack)
    return d


def fail_code(d: dict[str, Any], fail_on: str) -> int:
    """1 when a wall (memory, compute, bandwidth) fired at or above ``fail_on``; 'never' disables."""
    if fail_on == "never":
        return 0
    if fail_on not in SEVERITY_ORDER:
        raise OptkgError(f"--fail-on: expected one of {', '.join(FAIL_ON)}, found {fail_on!r}")
    limit = SEVERITY_ORDER[fail_on]
    for wall, _ in WALL_RULES:
        w = d["walls"].get(wall)
        if w and w["fired"] and SEVERITY_ORDER.get(w["severity"] or "", 0) >= limit:
            return 1
    return 0


# ---------------------------------------------------------------------------------------------
# fixture runner (kg/engine/fixtures.py RUNNERS['diagnose'])

FIXTURE_KEYS = {"files", "before", "text", "window_s", "phase", "target_throughput", "workload", "thresholds", "stack"}


def run_fixture(data: dict[str, Any], catalog, rules: RuleSet, base_dir) -> list[Firing]:
    """Fixture runner for the ``diagnose`` ruleset.

    ``data`` keys: ``files`` (metric files, relative to the fixture file), ``before`` (earlier
    scrapes), ``text`` (inline metrics text, any supported format), ``window_s``, ``phase``,
    ``target_throughput`` (output tokens/s), ``workload``, ``thresholds`` ({name: value}),
    ``stack`` (a stack mapping, stack-file shape).
    """
    if not isinstance(data, dict):
        raise OptkgError(f"{base_dir}: a diagnose fixture input is a mapping with keys {', '.join(sorted(FIXTURE_KEYS))}")
    bad = sorted(set(data) - FIXTURE_KEYS)
    if bad:
        raise OptkgError(f"{base_dir}: unknown diagnose fixture key(s) {', '.join(bad)} (keys: {', '.join(sorted(FIXTURE_KEYS))})")
    base = Path(base_dir)

    def paths(key: str) -> list[Path]:
        v = data.get(key) or []
        return [base / p for p in ([v] if isinstance(v, str) else v)]
    texts = data.get("text") or []
    texts = [texts] if isinstance(texts, str) else texts
    snap = load_snapshot(paths("files"), before=paths("before"), window_s=data.get("window_s"),
                         phase=data.get("phase", "load"), texts=[(f"<inline text {i}>", t) for i, t in enumerate(texts)])
    stack = None
    if data.get("stack") is not None:
        from kg.inputs.stack import stack_from_doc
        from kg.core.yamlio import YamlDoc
        stack = stack_from_doc(YamlDoc(str(base), data["stack"], {}), catalog, base)
    facts, ns, _ = snapshot_namespace(snap, stack, data.get("target_throughput"), data.get("workload"))
    return evaluate_rules(rules, facts, ns, thresholds=data.get("thresholds"))


# ---------------------------------------------------------------------------------------------
# rendering

def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v.is_integer() and abs(v) >= 1:
            return f"{v:,.0f}"
        return f"{v:,.4g}"
    return str(v)


READING_ROWS = (
    ("kv_cache_usage", "KV-cache usage", "pct"), ("requests_running", "requests running", "num"),
    ("requests_waiting", "requests waiting", "num"), ("preemptions_total", "preemptions since start", "num"),
    ("preemptions_new", "preemptions in the window", "num"), ("retracted_requests", "retracted requests", "num"),
    ("prefix_cache_hit_rate", "prefix-cache hit rate", "pct"), ("throughput_tokens_per_s", "throughput, output tokens/s", "num"),
    ("target_throughput_tokens_per_s", "target throughput, tokens/s", "num"), ("success_rate", "success rate", "pct"),
    ("compute_util", "compute", "pct"), ("tensor_active", "tensor-pipe activity", "pct"),
    ("bandwidth_util", "memory bandwidth", "pct"), ("device_memory_used_fraction", "device memory used", "pct"),
    ("power_w", "power draw, W", "num"), ("power_limit_w", "power limit, W", "num"), ("power_ratio", "power / limit", "pct"),
    ("video_engine_util", "video engines (enc/dec)", "pct"),
)


def _q(s: dict[str, Any], key: str) -> str:
    """A quantile cell: '=' exact (one observation), '<=' an upper bound from _sum/_count (see Histogram.summary)."""
    v = _fmt(s.get(key))
    if s.get(key) is None:
        return v
    if s.get("estimate") == "exact":
        return f"={v}"
    if key in (s.get("capped") or []):
        return f"<={v}"
    return v


QUANTILE_NOTE = ("quantiles are PromQL histogram_quantile estimates: linear interpolation inside the bucket "
                 "that holds the rank, the lowest bucket starting at 0, a rank in the +Inf bucket giving the "
                 "highest finite bound; so they cannot be finer than the buckets. '=' marks one observation "
                 "(every quantile is that observation, the _sum); '<=' marks an upper bound: the q-quantile of n "
                 "non-negative observations is at most _sum / (n - ceil(q x n) + 1), and the interpolated "
                 "estimate was above it")


def _quantile_notes(latency: dict[str, Any]) -> list[str]:
    """One line per histogram whose interpolated quantiles were replaced (what PromQL gave, and why)."""
    out = []
    for k, sm in latency.items():
        prom = sm.get("promql") or {}
        if sm.get("estimate") == "exact":
            out.append(f"{k}: one observation of {_fmt(sm['mean'])}; PromQL would interpolate p50 "
                       f"{_fmt(prom.get('p50'))}, p99 {_fmt(prom.get('p99'))} inside its bucket")
        elif sm.get("estimate") == "capped":
            got = ", ".join(f"{q} {_fmt(prom.get(q))}" for q in sm["capped"])
            out.append(f"{k}: PromQL interpolates {got}, but {_fmt(sm['count'])} observations with mean "
                       f"{_fmt(sm['mean'])} cannot have quantiles that high: shown as upper bounds")
    return out


def _reading_rows(d: dict[str, Any], short=lambda t: t) -> list[list[str]]:
    r, src = d["readings"], {k: short(v) for k, v in d["reading_sources"].items()}
    rows = []
    for key, label, kind in READING_ROWS:
        if key not in r:
            continue
        val = _pct(r[key], 1) if kind == "pct" else _fmt(r[key])
        rows.append([label, val, src.get(key, "")])
    return rows


def _wall_line(name: str, w: dict[str, Any] | None) -> list[str]:
    if w is None:
        return [name, "-", ""]
    if w["fired"]:
        return [name, f"YES ({w['severity']}, {w.get('confidence') or '-'} confidence)", w["message"] or ""]
    return [name, "no", w.get("status") or w["reason"] or ""]


def render_text(d: dict[str, Any], verbose: bool = False) -> str:
    """A readable report (see ``optkg diagnose --help``)."""
    import textwrap

    from tabulate import tabulate

    def wrap(text: str, indent: str = "  ") -> str:
        return textwrap.fill(" ".join(str(text).split()), width=110, initial_indent=indent, subsequent_indent=indent + "  ")

    dirs = sorted({str(Path(s["path"]).parent) + "/" for s in d["inputs"] if "/" in s["path"]}, key=len, reverse=True)

    def short(text: str) -> str:
        for prefix in dirs:
            text = text.replace(prefix, "")
        return text

    out = []
    ins = ", ".join(f"{Path(s['path']).name} [{s['format']}{', ' + s['phase'] if s.get('phase') else ''}"
                    f"{', before' if s['role'] == 'before' else ''}]" for s in d["inputs"])
    out.append(wrap(f"optkg diagnose: {ins}", ""))
    wl = d["workload"] + (f" ({d['engine']}: engines preallocate GPU memory, so memory means KV-pool pressure)"
                          if d["workload"] == "serving" and d.get("engine") else "")
    out.append(f"  workload: {wl}")
    v = d["verdict"]
    out.append("")
    conf = f"   confidence: {v['confidence']}" if v.get("confidence") else ""
    out.append(f"VERDICT: {v['label'].upper()}   severity: {v['severity']}{conf}")
    out.append(wrap(v["message"]))
    if v.get("also"):
        out.append(wrap("also on: " + ", ".join(f"{w} wall" for w in v["also"])))
    if v.get("walls_read_separately"):
        out.append(wrap("the wall table below reads each input on its own ("
                        + ", ".join(f"{w} wall fires" for w in v["walls_read_separately"])
                        + "); with inputs that disagree it is not a verdict"))
    if not v["comparable"]:
        out.append(wrap(v["comparability"]))
    for w in d.get("input_warnings") or []:
        if w["rule_id"] != v.get("rule_id"):
            out.append(wrap(f"WARNING [{w['rule_id']}]: {w['message']}", ""))
    if d.get("invalid_readings"):
        n = len(d["invalid_readings"])
        out.append(wrap(f"note: {n} invalid reading(s) were left out (NaN, infinite, negative or out of range); "
                        "see the findings" + ("" if verbose else " and --verbose"), ""))
    out.append("")
    out.append("Walls")
    rows = [_wall_line(n, d["walls"].get(n)) for n in ("memory", "compute", "bandwidth", "neither")]
    out.append(textwrap.indent(tabulate(rows, tablefmt="plain", maxcolwidths=[None, 30, 70]), "  "))
    for n in ("memory", "compute", "bandwidth", "neither"):
        for det in (d["walls"].get(n) or {}).get("details", []):
            out.append(wrap(f"{n} detail [{det['rule_id']}]: {det['message']}"))
    rr = _reading_rows(d, short)
    if rr:
        out.append("")
        out.append("Readings (worst GPU)")
        out.append(textwrap.indent(tabulate(rr, headers=["reading", "value", "from"], tablefmt="simple",
                                            maxcolwidths=[None, None, 70]), "  "))
    sv = d.get("serving")
    if sv and sv.get("latency"):
        out.append("")
        span = f"over the {sv['window_s']:g} s window" if sv.get("window_s") else (
            "over the window" if sv.get("window_deltas") else "since the server started")
        out.append(f"Serving distributions ({sv['engine']}, {span})")
        lrows = [[k, _fmt(s["count"]), _fmt(s["mean"]), _q(s, "p50"), _q(s, "p90"), _q(s, "p99")]
                 for k, s in sv["latency"].items()]
        out.append(textwrap.indent(tabulate(lrows, headers=["histogram", "count", "mean", "p50", "p90", "p99"],
                                            tablefmt="simple", disable_numparse=True), "  "))
        qn = _quantile_notes(sv["latency"])
        if qn or verbose:
            out.append(wrap(QUANTILE_NOTE))
            for line in qn:
                out.append(wrap(line, "    "))
        if sv.get("kv_capacity_tokens"):
            out.append(f"  KV capacity: {_fmt(sv['kv_capacity_tokens'])} tokens")
    out.append("")
    g = d["operator_gate"]
    out.append(wrap(f"Operator-layer gate: {g['state']} -- {g['message']}", ""))
    out.append("")
    out.append("Collection checklist")
    for grp in d["checklist"]["groups"]:
        missing = [i for i in grp["items"] if i["status"] in ("missing", "invalid")]
        coarse = [i for i in grp["items"] if i.get("quality") == "coarse"]
        out.append(f"  {grp['label']:<32} {grp['present']}/{grp['applicable']}")
        for i in missing:
            out.append(wrap(f"{i['status']} {i['label']}: {i['hint']}", "    "))
        for i in coarse:
            out.append(wrap(f"coarse {i['label']}: {i['hint']}", "    "))
    cf = d["checklist"].get("collector_fields")
    if cf:
        out.append(wrap("dcgm-exporter field list: " + ", ".join(f"{k} {'on' if on else 'OFF'}" for k, on in cf.items()), "  "))
    for n in ("memory", "compute", "bandwidth"):
        w = d["walls"].get(n)
        if not w or not w["fired"] or "techniques" not in w:
            continue
        out.append("")
        out.append(wrap(f"Techniques for the {n} wall (benefit in {w['dimension']}); direction: {w['direction']}", ""))
        st = w.get("stack")
        if st:
            for x in st["first"]:
                out.append(wrap(f"first: {x['rule_id']} -- {x['message']} Fix: {x['fix']}", "  "))
        shown = w["techniques"][:8]
        for c in shown:
            costs = "; ".join(f"{x['dimension']}: {x['what']}" for x in c["costs"]) or "none declared"
            flags = []
            if c.get("in_stack"):
                flags.append("already in your stack")
            if c.get("do_first_because"):
                flags.append("do this first (" + ", ".join(c["do_first_because"]) + ")")
            for col in c.get("collides") or []:
                flags.append(f"collides: {col['rule_id']} ({col['severity']})")
            for dc in c.get("declared_conflicts") or []:
                if dc["holds_now"] is False:
                    continue  # the declared condition does not hold on this stack (JSON keeps it)
                cond = f" when {dc['condition']}" if dc.get("condition") and dc["holds_now"] is None else ""
                flags.append(f"{'conflicts' if dc['holds_now'] else 'may conflict'} with {dc['with']}{cond}")
            out.append(wrap(f"- {c['technique']}: {c['benefits'][0]}" + (f" [{'; '.join(flags)}]" if flags else ""), "  "))
            out.append(wrap(f"cost -- {costs}", "      "))
        if len(w["techniques"]) > len(shown):
            out.append(f"  ... and {len(w['techniques']) - len(shown)} more (--format json lists all)")
    out.append("")
    out.append("Findings")
    for f in d["findings"]:
        out.append(wrap(f"{f['severity'].upper():8} {f['rule_id']}: {f['message']}"))
    if not d["findings"]:
        out.append("  none")
    out.append("")
    out.append("Thresholds used (defaults from rules/walls.yaml are running experience: recalibrate per machine)")
    trows = [[k, _fmt(t["value"]), t["unit"] or "", t["source"] if t["source"] != "default" else "default"]
             for k, t in d["thresholds"].items()]
    out.append(textwrap.indent(tabulate(trows, headers=["threshold", "value", "unit", "source"], tablefmt="simple"), "  "))
    if verbose:
        out.append("")
        out.append("Threshold provenance")
        for k, t in d["thresholds"].items():
            out.append(wrap(f"{k}: {t['provenance']}"))
    if d["notes"]:
        out.append("")
        for n in d["notes"]:
            out.append(wrap(f"note: {n}", ""))
    unk = d.get("unknown_metrics") or {}
    nunk = sum(len(v) for v in unk.values())
    if verbose:
        out.append("")
        inv = d.get("invalid_readings") or []
        out.append(f"Invalid readings (left out): {len(inv)}")
        for i in inv:
            out.append(wrap(f"{i['path']}: {i['metric']} for {i['entity']} ({i['reading']}) = {i['value']}: {i['why']}"))
        if d.get("machines"):
            out.append("")
            out.append("GPUs and hosts per input")
            for m in d["machines"]:
                out.append(wrap(f"{m['path']}: {', '.join(m['gpu_names']) or 'GPU model not reported'}"
                                + (f"; host {', '.join(m['hosts'])}" if m["hosts"] else "")))
        out.append("")
        out.append(f"Unknown metric names (ignored): {nunk}")
        for path, names in sorted(unk.items()):
            out.append(wrap(f"{path}: {', '.join(names)}"))
        out.append("")
        out.append("Rules that did not fire")
        for nf in d["not_fired"]:
            out.append(wrap(f"{nf['rule']}: {nf['reason']}"))
    elif nunk:
        out.append(f"({nunk} unknown metric names ignored; --verbose lists them)")
    return short("\n".join(out).rstrip()) + "\n"


def render_markdown(d: dict[str, Any], verbose: bool = False) -> str:
    """GitHub-flavoured markdown: verdict, walls, readings, gate, checklist, findings, thresholds."""
    from tabulate import tabulate

    def cell(s: Any) -> str:
        return " ".join(str(s).split()).replace("|", "\\|")

    v = d["verdict"]
    out = ["<!-- optkg:diagnose -->", "## optkg diagnose", ""]
    out.append(f"**Verdict: {v['label']}** (severity {v['severity']}"
               + (f", {v['confidence']} confidence" if v.get("confidence") else "") + ")")
    out.append("")
    out.append(cell(v["message"]))
    if not v["comparable"]:
        out += ["", f"_{cell(v['comparability'])}_"]
    for w in d.get("input_warnings") or []:
        if w["rule_id"] != v.get("rule_id"):
            out += ["", f"> **Warning** ({w['rule_id']}): {cell(w['message'])}"]
    out += ["", "| wall | on it | detail |", "|---|---|---|"]
    for n in ("memory", "compute", "bandwidth", "neither"):
        w = d["walls"].get(n)
        if w:
            row = _wall_line(n, w)
            out.append(f"| {row[0]} | {cell(row[1])} | {cell(row[2])} |")
    rr = _reading_rows(d)
    if rr:
        out += ["", "### Readings", "", tabulate([[cell(c) for c in r] for r in rr], headers=["reading", "value", "from"],
                                                 tablefmt="github")]
    g = d["operator_gate"]
    out += ["", f"**Operator-layer gate:** {g['state']} -- {cell(g['message'])}", "", "### Collection checklist", ""]
    for grp in d["checklist"]["groups"]:
        out.append(f"- **{grp['label']}** {grp['present']}/{grp['applicable']}")
        for i in grp["items"]:
            if i["status"] in ("missing", "invalid"):
                out.append(f"  - {i['status']} {i['label']}: {cell(i['hint'])}")
    for n in ("memory", "compute", "bandwidth"):
        w = d["walls"].get(n)
        if w and w["fired"] and w.get("techniques"):
            out += ["", f"### Techniques for the {n} wall", ""]
            out.append(tabulate([[c["technique"], cell(c["benefits"][0]),
                                  cell("; ".join(f"{x['dimension']}: {x['what']}" for x in c["costs"]))]
                                 for c in w["techniques"][:10]], headers=["technique", "benefit", "costs"], tablefmt="github"))
    out += ["", "### Findings", ""]
    for f in d["findings"]:
        out.append(f"- `{f['severity']}` **{f['rule_id']}**: {cell(f['message'])}")
    out += ["", "### Thresholds used", "",
            tabulate([[k, _fmt(t["value"]), t["unit"] or "", cell(t["source"]), cell(t["provenance"])]
                      for k, t in d["thresholds"].items()], headers=["threshold", "value", "unit", "source", "provenance"],
                     tablefmt="github"),
            "", "_Thresholds are running experience, not physical limits: recalibrate per machine._"]
    if verbose and d.get("unknown_metrics"):
        out += ["", "### Unknown metric names (ignored)", ""]
        for path, names in sorted(d["unknown_metrics"].items()):
            out.append(f"- `{path}`: {cell(', '.join(names))}")
    return "\n".join(out).rstrip() + "\n"
