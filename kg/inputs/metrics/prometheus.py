"""Prometheus text exposition of vLLM, SGLang, dcgm-exporter and nvidia_gpu_exporter, mapped to
canonical readings through ``PROM_METRICS`` (parsed with ``prometheus_client``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from kg.inputs.metrics.snapshot import (DEVICE_SOURCE_RANK, Device, Engine, Histogram, InvalidReading, MIB,
                                        Source, _Part, _err, invalid_reason)


# ---------------------------------------------------------------------------------------------
# mapping tables (one row per metric; tables, not if-chains)

@dataclass(frozen=True)
class Spec:
    """How one metric becomes a canonical reading.

    origin: vllm | sglang | dcgm | nvidia-gpu-exporter; entity: engine | device | info;
    reading: canonical name; kind: gauge | counter | histogram | config; agg: how series with
    different labels combine (sum | max); scale: multiply the value (e.g. 0.01 for %, 1/MiB for
    bytes); priority: when two metrics give the same reading, the lower wins (current names 0,
    deprecated names 1); select/exclude: label filters.
    """

    origin: str
    entity: str
    reading: str
    kind: str = "gauge"
    agg: str = "sum"
    scale: float = 1.0
    priority: int = 0
    select: tuple[tuple[str, str], ...] = ()
    exclude: tuple[tuple[str, str], ...] = ()


def _v(reading: str, kind: str = "gauge", agg: str = "sum", priority: int = 0, **kw: Any) -> Spec:
    return Spec("vllm", "engine", reading, kind, agg, priority=priority, **kw)


def _s(reading: str, kind: str = "gauge", agg: str = "max", **kw: Any) -> Spec:
    return Spec("sglang", "engine", reading, kind, agg, **kw)


def _d(reading: str, scale: float = 1.0, priority: int = 0) -> Spec:
    return Spec("dcgm", "device", reading, "gauge", "max", scale, priority)


def _x(reading: str, scale: float = 1.0, priority: int = 0) -> Spec:
    return Spec("nvidia-gpu-exporter", "device", reading, "gauge", "max", scale, priority)


PROM_METRICS: dict[str, tuple[Spec, ...]] = {
    # vLLM V1 names, then deprecated V0 / early-V1 names (priority 1). [VD], [VF], [VL] in METRIC_NAMES.md
    "vllm:num_requests_running": (_v("requests_running"),),
    "vllm:num_requests_waiting": (_v("requests_waiting"),),
    "vllm:kv_cache_usage_perc": (_v("kv_cache_usage", agg="max"),),
    "vllm:gpu_cache_usage_perc": (_v("kv_cache_usage", agg="max", priority=1),),
    "vllm:num_preemptions_total": (_v("preemptions_total", "counter"),),
    "vllm:prompt_tokens_total": (_v("prompt_tokens_total", "counter"),),
    "vllm:generation_tokens_total": (_v("generation_tokens_total", "counter"),),
    "vllm:prefix_cache_queries_total": (_v("prefix_cache_queries_total", "counter"),),
    "vllm:prefix_cache_hits_total": (_v("prefix_cache_hits_total", "counter"),),
    "vllm:gpu_prefix_cache_queries_total": (_v("prefix_cache_queries_total", "counter", priority=1),),
    "vllm:gpu_prefix_cache_hits_total": (_v("prefix_cache_hits_total", "counter", priority=1),),
    "vllm:gpu_prefix_cache_queries": (_v("prefix_cache_queries_total", "counter", priority=1),),
    "vllm:gpu_prefix_cache_hits": (_v("prefix_cache_hits_total", "counter", priority=1),),
    "vllm:request_success_total": (_v("requests_finished_total", "counter"),
                                   _v("requests_aborted_total", "counter", select=(("finished_reason", "abort"),))),
    "vllm:time_to_first_token_seconds": (_v("ttft_seconds", "histogram"),),
    "vllm:inter_token_latency_seconds": (_v("itl_seconds", "histogram"),),
    "vllm:time_per_output_token_seconds": (_v("itl_seconds", "histogram", priority=1),),
    "vllm:e2e_request_latency_seconds": (_v("e2e_latency_seconds", "histogram"),),
    "vllm:request_queue_time_seconds": (_v("queue_time_seconds", "histogram"),),
    "vllm:request_prompt_tokens": (_v("prompt_length_tokens", "histogram"),),
    "vllm:request_generation_tokens": (_v("generation_length_tokens", "histogram"),),
    "vllm:avg_generation_throughput_toks_per_s": (_v("generation_tokens_per_s", priority=1),),
    "vllm:avg_prompt_throughput_toks_per_s": (_v("prompt_tokens_per_s", priority=1),),
    "vllm:cache_config_info": (_v("config", "config"),),
    # SGLang (--enable-metrics); series per tp_rank report the same scheduler, so they are maxed. [SF]
    "sglang:num_running_reqs": (_s("requests_running"),),
    "sglang:num_queue_reqs": (_s("requests_waiting"),),
    "sglang:token_usage": (_s("kv_cache_usage"),),
    "sglang:num_used_tokens": (_s("kv_used_tokens"),),
    "sglang:max_total_num_tokens": (_s("kv_capacity_tokens"),),
    "sglang:cache_hit_rate": (_s("prefix_cache_hit_rate"),),
    "sglang:gen_throughput": (_s("generation_tokens_per_s"),),
    "sglang:num_retracted_reqs": (_s("retracted_requests"),),
    "sglang:utilization": (_s("engine_utilization"),),
    "sglang:is_cuda_graph": (_s("cuda_graph"),),
    "sglang:prompt_tokens_total": (_s("prompt_tokens_total", "counter"),),
    "sglang:generation_tokens_total": (_s("generation_tokens_total", "counter"),),
    "sglang:cached_tokens_total": (_s("cached_tokens_total", "counter"),),
    "sglang:num_requests_total": (_s("requests_finished_total", "counter"),),
    "sglang:time_to_first_token_seconds": (_s("ttft_seconds", "histogram"),),
    "sglang:inter_token_latency_seconds": (_s("itl_seconds", "histogram"),),
    "sglang:e2e_request_latency_seconds": (_s("e2e_latency_seconds", "histogram"),),
    "sglang:queue_time_seconds": (_s("queue_time_seconds", "histogram"),),
    "sglang:prompt_tokens_histogram": (_s("prompt_length_tokens", "histogram"),),
    "sglang:generation_tokens_histogram": (_s("generation_length_tokens", "histogram"),),
    # dcgm-exporter: device fields in % or MiB or W, profiling fields as ratios 0-1. [DE], [DF]
    "DCGM_FI_DEV_GPU_UTIL": (_d("gpu_util", 0.01),),
    "DCGM_FI_DEV_MEM_COPY_UTIL": (_d("mem_copy_util", 0.01),),
    "DCGM_FI_DEV_ENC_UTIL": (_d("encoder_util", 0.01),),
    "DCGM_FI_DEV_DEC_UTIL": (_d("decoder_util", 0.01),),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (_d("gr_engine_active"),),
    "DCGM_FI_PROF_SM_ACTIVE": (_d("sm_active"),),
    "DCGM_FI_PROF_SM_OCCUPANCY": (_d("sm_occupancy"),),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (_d("tensor_active"),),
    "DCGM_FI_PROF_DRAM_ACTIVE": (_d("dram_active"),),
    "DCGM_FI_DEV_FB_USED": (_d("fb_used_mib"),),
    "DCGM_FI_DEV_FB_FREE": (_d("fb_free_mib"),),
    "DCGM_FI_DEV_FB_TOTAL": (_d("fb_total_mib"),),
    "DCGM_FI_DEV_FB_RESERVED": (_d("fb_reserved_mib"),),
    "DCGM_FI_DEV_POWER_USAGE": (_d("power_w"),),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": (_d("power_limit_w"),),
    "DCGM_FI_DEV_SM_CLOCK": (_d("sm_clock_mhz"),),
    # utkuozdemir/nvidia_gpu_exporter: nvidia-smi fields, ratios 0-1, bytes, watts
    "nvidia_smi_utilization_gpu_ratio": (_x("gpu_util"),),
    "nvidia_smi_utilization_memory_ratio": (_x("mem_copy_util"),),
    "nvidia_smi_utilization_encoder_ratio": (_x("encoder_util"),),
    "nvidia_smi_utilization_decoder_ratio": (_x("decoder_util"),),
    "nvidia_smi_memory_used_bytes": (_x("fb_used_mib", 1 / MIB),),
    "nvidia_smi_memory_free_bytes": (_x("fb_free_mib", 1 / MIB),),
    "nvidia_smi_memory_total_bytes": (_x("fb_total_mib", 1 / MIB),),
    "nvidia_smi_memory_reserved_bytes": (_x("fb_reserved_mib", 1 / MIB),),
    "nvidia_smi_power_draw_watts": (_x("power_w"),),
    "nvidia_smi_power_draw_average_watts": (_x("power_w", priority=1),),
    "nvidia_smi_enforced_power_limit_watts": (_x("power_limit_w"),),
    "nvidia_smi_power_limit_watts": (_x("power_limit_w", priority=1),),
    "nvidia_smi_clocks_current_sm_clock_hz": (_x("sm_clock_mhz", 1e-6),),
    "nvidia_smi_gpu_info": (Spec("nvidia-gpu-exporter", "info", "gpu_info"),),
}

ORIGIN_PREFIXES = (("vllm:", "vllm"), ("ray_vllm:", "vllm"), ("sglang:", "sglang"), ("DCGM_", "dcgm"),
                   ("nvidia_smi_", "nvidia-gpu-exporter"))


# ---------------------------------------------------------------------------------------------
# Prometheus text

def _prom_families(text: str, path: str, line_offset: int = 0) -> list[Any]:
    """The parsed metric families of ``text``; OptkgError naming the first bad line.

    One pass: the parser reads lines from a counting iterator, so the line it failed on is known
    without re-parsing prefixes (a binary search over prefixes took minutes on a 20 MB file with a
    bad last line). The error may surface a few lines after the culprit (a family is checked when
    the next one starts), so the bad line is then pinned down inside that family only.
    """
    from prometheus_client.parser import text_fd_to_metric_families
    if text.startswith("\ufeff"):  # a UTF-8 byte-order mark (Windows editors): not part of the first name
        text = text[1:]
    lines = text.splitlines(keepends=True)
    seen = [0]

    def counting(chunk: list[str]):
        for ln in chunk:
            seen[0] += 1
            yield ln

    errors = (ValueError, TypeError, IndexError, KeyError)
    try:
        return list(text_fd_to_metric_families(counting(lines)))
    except errors as e:
        first_err = e
    k = max(1, min(seen[0], len(lines)))
    start = k - 1

    def fails(end: int) -> bool:
        try:
            list(text_fd_to_metric_families(iter(lines[start:end])))
            return False
        except errors:
            return True
    if fails(k):  # the line being read is bad on its own: the usual case, one tiny parse
        lo = hi = k
    else:  # the error surfaced later (a family is checked when the next starts): search its family only
        while start > 0 and start > k - 10_000 and not lines[start].startswith(("# HELP", "# TYPE")):
            start -= 1
        lo, hi = start + 1, k
    if lo < hi and fails(hi):
        while lo < hi:  # smallest failing prefix of this family: O(family size x log)
            mid = (lo + hi) // 2
            if fails(mid):
                hi = mid
            else:
                lo = mid + 1
        k = lo
    bad = lines[k - 1].strip()
    shown = bad if len(bad) <= 80 else bad[:77] + "..."
    raise _err(path, k + line_offset, f"not valid Prometheus text: {first_err} (line: {shown!r})") from None


def _origin(name: str) -> str | None:
    for prefix, origin in ORIGIN_PREFIXES:
        if name.startswith(prefix):
            return origin
    return None


def _device_key(labels: dict[str, str]) -> str:
    gpu = labels.get("gpu")
    if gpu is None:
        gpu = labels.get("UUID") or labels.get("uuid") or "unlabelled"
    mig = labels.get("GPU_I_ID")
    return f"{gpu}/mig{mig}" if mig not in (None, "") else str(gpu)


def _lookup(name: str) -> tuple[str, tuple[Spec, ...]] | None:
    if name.startswith("ray_vllm:"):
        name = name[4:]
    specs = PROM_METRICS.get(name)
    return (name, specs) if specs else None


def _parse_prometheus(text: str, path: str) -> _Part:
    fams = _prom_families(text, path)
    part = _Part(Source(path, "prometheus", []))
    # (entity kind, entity, reading) -> list of (priority, metric, values)
    values: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    hists: dict[tuple[str, str], dict[str, dict[tuple, dict[str, Any]]]] = {}
    prio: dict[tuple[str, str, str], dict[str, int]] = {}
    spec_of: dict[tuple[str, str, str, str], Spec] = {}
    exporter_ids: dict[str, tuple[str, str | None]] = {}  # uuid -> (index, name)
    origins: set[str] = set()
    stamps: list[float] = []
    model_names: dict[str, set[str]] = {}  # engine origin -> model_name label values
    n = 0
    for fam in fams:
        if fam.type in ("histogram", "gaugehistogram"):
            found = _lookup(fam.name)
            if not found:
                part.unknown.add(fam.name)
                continue
            metric, specs = found
            for sp in specs:
                origins.add(sp.origin)
                key = (sp.origin, sp.reading)
                per = hists.setdefault(key, {})
                series = per.setdefault(metric, {})
                for s in fam.samples:
                    n += 1
                    if s.timestamp is not None:
                        stamps.append(float(s.timestamp))
                    if s.labels.get("model_name"):
                        model_names.setdefault(sp.origin, set()).add(s.labels["model_name"])
                    lab = {k: v for k, v in s.labels.items() if k != "le"}
                    slot = series.setdefault(tuple(sorted(lab.items())), {"buckets": {}, "sum": None, "count": None})
                    if s.name.endswith("_bucket"):
                        le = _bucket_bound(s.labels.get("le"), path, s.name)
                        slot["buckets"][le] = s.value
                    elif s.name.endswith("_sum"):
                        slot["sum"] = s.value
                    elif s.name.endswith("_count"):
                        slot["count"] = s.value
                prio.setdefault(("engine", sp.origin, sp.reading), {})[metric] = sp.priority
            continue
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            n += 1
            if s.timestamp is not None:
                stamps.append(float(s.timestamp))
            found = _lookup(s.name)
            if not found:
                part.unknown.add(s.name)
                continue
            metric, specs = found
            for sp in specs:
                if any(s.labels.get(k) != v for k, v in sp.select) or any(s.labels.get(k) == v for k, v in sp.exclude):
                    continue
                origins.add(sp.origin)
                if sp.entity == "engine" and s.labels.get("model_name"):
                    model_names.setdefault(sp.origin, set()).add(s.labels["model_name"])
                if s.labels.get("Hostname"):
                    part.hosts.add(s.labels["Hostname"])
                if sp.entity == "info":
                    uuid = s.labels.get("uuid", "")
                    exporter_ids[uuid] = (s.labels.get("index", uuid), s.labels.get("name"))
                    continue
                if sp.kind == "config":
                    eng = part.engines.setdefault(sp.origin, Engine(sp.origin, file=path))
                    eng.config.update(_config_labels(s.labels))
                    eng.where["config"] = f"{metric} ({path})"
                    continue
                ent = sp.origin if sp.entity == "engine" else _device_key(s.labels)
                key = (sp.entity, ent, sp.reading)
                values.setdefault(key, {}).setdefault(metric, []).append(s.value * sp.scale)
                prio.setdefault(key, {})[metric] = sp.priority
                spec_of[(sp.entity, ent, sp.reading, metric)] = sp
                if sp.entity == "device" and sp.origin == "dcgm":
                    dev = part.devices.setdefault(ent, Device(ent))
                    dev.name = dev.name or s.labels.get("modelName") or s.labels.get("DCGM_FI_DEV_NAME")
                    if dev.name and s.labels.get("modelName") and s.labels["modelName"] not in dev.name:
                        part.notes.append(f"{path}: device {ent} is labelled both '{dev.name}' and "
                                          f"'{s.labels['modelName']}'; its readings were merged")
                        dev.name = f"{dev.name} / {s.labels['modelName']}"
                elif sp.entity == "device":
                    part.devices.setdefault(ent, Device(ent))
    # pick one metric per reading (lowest priority), aggregate its series
    for key, by_metric in values.items():
        kind, ent, reading = key
        metric = min(by_metric, key=lambda m: (prio[key][m], m))
        sp = spec_of[(kind, ent, reading, metric)]
        vals = by_metric[metric]
        bad = [(x, invalid_reason(reading, x)) for x in vals]
        bad = [(x, why) for x, why in bad if why]
        if bad:
            # one impossible series makes the sum (or max) meaningless: the reading is left out, and said so
            who = ent if kind == "engine" else f"GPU {ent}"
            for x, why in bad:
                part.invalid.append(InvalidReading(path, metric, who, reading, x, why))
                if why.startswith("outside the 0-1"):
                    # DCGM is known to emit such values now and then (NVIDIA/DCGM issues 152, 199): drop, do not fail
                    part.notes.append(f"{path}: {metric} for {who} reads {x:g} as a fraction, outside "
                                      "0-1 (profiling ratios are 0-1, device utilisations 0-100 %); the reading is ignored")
                else:
                    part.notes.append(f"{path}: {metric} for {who} reads {x:g} ({why}); the reading is ignored")
            if kind == "device":
                part.devices.setdefault(ent, Device(ent))
            else:
                part.engines.setdefault(ent, Engine(ent, file=path))
            continue
        v = sum(vals) if sp.agg == "sum" else max(vals)
        where = f"{metric} ({path})"
        if len(by_metric) > 1:
            others = sorted(m for m in by_metric if m != metric)
            part.notes.append(f"{path}: {reading} read from {metric}; also present: {', '.join(others)}")
        if kind == "engine":
            eng = part.engines.setdefault(ent, Engine(ent, file=path))
            (eng.counters if sp.kind == "counter" else eng.gauges)[reading] = v
            eng.where[reading] = where
        else:
            dev = part.devices.setdefault(ent, Device(ent))
            dev.readings[reading] = v
            dev.where[reading] = where
            dev.rank[reading] = DEVICE_SOURCE_RANK.get(sp.origin, 9)
    for (origin, reading), by_metric in hists.items():
        metric = min(by_metric, key=lambda m: (prio[("engine", origin, reading)][m], m))
        series = by_metric[metric]
        h = _sum_histograms(series.values(), path, metric)
        eng = part.engines.setdefault(origin, Engine(origin, file=path))
        why = h.invalid()
        if why:
            bad = next((c for _, c in h.buckets if not math.isfinite(c) or c < 0), None)
            if bad is None:
                bad = next((x for x in (h.sum, h.count) if x is not None and (not math.isfinite(x) or x < 0)), float("nan"))
            part.invalid.append(InvalidReading(path, metric, origin, reading, bad, why))
            part.notes.append(f"{path}: histogram {metric}: {why}; the histogram is ignored")
            continue
        eng.histograms[reading] = h
        eng.where[reading] = f"{metric} ({path})"
    # nvidia_gpu_exporter labels devices by uuid; map them to the nvidia-smi index
    if exporter_ids:
        renamed: dict[str, Device] = {}
        for k, d in part.devices.items():
            idx, name = exporter_ids.get(k, (k, None))
            d.key, d.name = str(idx), d.name or name
            renamed[str(idx)] = d
        part.devices = renamed
    for name, eng in part.engines.items():
        eng.timestamp_s = max(stamps) if stamps else None
        eng.model_names = sorted(model_names.get(name, ()))
    if exporter_ids:
        for inv in part.invalid:  # report the nvidia-smi index, as the readings are keyed
            if inv.entity.startswith("GPU ") and inv.entity[4:] in exporter_ids:
                inv.entity = f"GPU {exporter_ids[inv.entity[4:]][0]}"
    part.source.origins = sorted(origins)
    part.source.samples = n
    part.source.timestamp_s = max(stamps) if stamps else None
    return part


def _bucket_bound(le: str | None, path: str, metric: str) -> float:
    """A histogram bucket's upper bound (its ``le`` label); OptkgError naming the series when it is not a number."""
    if le in ("+Inf", "Inf", "inf", "+inf"):
        return float("inf")
    try:
        v = float(le) if le is not None and len(le) <= 40 else float("nan")
    except ValueError:
        v = float("nan")
    if math.isnan(v):
        raise _err(path, None, f"histogram bucket {metric} has le=\"{str(le)[:40]}\", which is not a number")
    return v


def _config_labels(labels: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in labels.items():
        if k in ("model_name", "engine"):
            continue
        if v in ("None", ""):
            out[k] = None
        elif v in ("True", "False"):
            out[k] = v == "True"
        elif re.fullmatch(r"-?[0-9]{1,30}", v):  # ASCII digits, at most 30 (a 5,000-digit label stays text)
            out[k] = int(v)
        elif re.fullmatch(r"-?[0-9]{1,30}\.[0-9]{0,30}(e-?[0-9]{1,3})?", v) and math.isfinite(float(v)):
            out[k] = float(v)
        else:
            out[k] = v
    return out


def _sum_histograms(series: Iterable[dict[str, Any]], path: str, metric: str) -> Histogram:
    buckets: dict[float, float] = {}
    s_total: float | None = None
    c_total: float | None = None
    for slot in series:
        for le, c in slot["buckets"].items():
            buckets[le] = buckets.get(le, 0.0) + c
        if slot["sum"] is not None:
            s_total = (s_total or 0.0) + slot["sum"]
        if slot["count"] is not None:
            c_total = (c_total or 0.0) + slot["count"]
    bl = sorted(buckets.items())
    if bl and not math.isinf(bl[-1][0]):
        raise _err(path, None, f"histogram {metric} has no le=\"+Inf\" bucket")
    return Histogram(bl, s_total, c_total)
