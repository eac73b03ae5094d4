"""``optkg diagnose``, step 1: a metrics ``Snapshot`` -> facts and the flat namespace the wall rules read
(``snapshot_namespace``), with the collection checklist (what was read, what is missing or invalid, and
how to collect it) and whether the inputs belong together. Names and units: see kg.analyses.diagnose.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kg.core.errors import OptkgError
from kg.engines import get
from kg.inputs.metrics.snapshot import Histogram, Snapshot


WORKLOADS = ("serving", "training", "generate")

COMPUTE_LABEL = {"sm_active": "SM activity", "time_based": "time-based utilisation",
                 "tensor_active": "tensor-pipe activity"}
BANDWIDTH_LABEL = {"dram_active": "DRAM activity", "mem_copy_util": "memory utilisation (coarse proxy)"}


# ---------------------------------------------------------------------------------------------
# collection checklist (method 001 §3): group -> items; each item says how it is read and what to collect

@dataclass(frozen=True)
class Item:
    """One item of the collection checklist: what to collect, how it is read (``hint``), where it applies."""

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
    if stack is not None and get(stack.engine).preallocates_kv_memory:
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
    if fin and get(eng.name).finished_counter_counts_aborts:  # vLLM: every finished_reason, abort included
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
    served = (stack.settings or {}).get("served_model_name") if stack is not None else None  # the option table's
    names += [served] if isinstance(served, str) else list(served or [])
    for w in (stack.ignored if stack is not None else []):  # releases whose table lacks the option
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
