"""Read serving-engine and GPU metrics into one ``Snapshot``.

Inputs (format auto-detected from the content, never from the file name):

- Prometheus text exposition (``GET /metrics``) of vLLM (``vllm:*``, also ``ray_vllm:*``), SGLang
  (``sglang:*``), NVIDIA dcgm-exporter (``DCGM_FI_*``) and utkuozdemir/nvidia_gpu_exporter
  (``nvidia_smi_*``). Parsed with ``prometheus_client.parser.text_string_to_metric_families``.
- ``nvidia-smi --query-gpu=... --format=csv`` output (with or without ``nounits``; ``[N/A]`` is "not
  reported").
- ``nvidia-smi dmon`` output (``# gpu pwr ... sm mem ...`` header, one row per sample and GPU;
  samples are averaged).
- an nvidia_gpu_exporter capture (``internal/captures/*.txt``): its ``<phase> :: query-gpu`` and
  ``<phase> :: dmon`` sections are read for the phase asked for (``load`` or ``idle``).
- a dcgm-exporter collector field list (``etc/default-counters.csv``, ``dcp-metrics-included.csv``):
  no readings, but it tells which fields the exporter is set to collect (commented-out = off).

Every metric a parser knows is mapped through one table (``PROM_METRICS``, ``SMI_FIELDS``,
``DMON_COLUMNS``) to a canonical reading with a unit in its name; anything else is kept in
``Snapshot.unknown_metrics`` (``optkg diagnose --verbose`` lists it). Names, meanings and units
come from ``shared/data/metrics/METRIC_NAMES.md`` (vLLM docs/design/metrics.md, SGLang HELP
strings, dcgm-exporter etc/*.csv, dcgm_fields.h, ``nvidia-smi --help-query-gpu``).

Canonical readings and units:

- serving engine (one per engine, series summed or maxed over ``engine``/``tp_rank`` labels):
  ``requests_running``, ``requests_waiting`` (requests), ``kv_cache_usage`` (fraction 0-1),
  ``preemptions_total`` (count, counter), ``retracted_requests`` (requests, SGLang gauge),
  ``prompt_tokens_total``/``generation_tokens_total`` (tokens, counters),
  ``prefix_cache_queries_total``/``prefix_cache_hits_total`` (tokens, counters),
  ``prefix_cache_hit_rate`` (fraction, SGLang gauge), ``generation_tokens_per_s`` (tokens/s gauge),
  ``requests_finished_total``/``requests_aborted_total`` (requests), ``kv_capacity_tokens``,
  histograms ``ttft_seconds``, ``itl_seconds``, ``e2e_latency_seconds``, ``queue_time_seconds``,
  ``prompt_length_tokens``, ``generation_length_tokens``; ``config`` (block_size, cache_dtype,
  num_gpu_blocks, gpu_memory_utilization, enable_prefix_caching from ``vllm:cache_config_info``).
- GPU device (key ``"<index>"`` or ``"<index>/mig<GPU_I_ID>"``): ``gpu_util`` (fraction, time-based:
  a kernel was running), ``gr_engine_active``, ``sm_active``, ``sm_occupancy``, ``tensor_active``,
  ``dram_active`` (fractions, DCGM profiling), ``mem_copy_util`` (fraction, coarse bandwidth proxy),
  ``encoder_util``/``decoder_util`` (fractions), ``fb_used_mib``/``fb_free_mib``/``fb_total_mib``/
  ``fb_reserved_mib`` (MiB), ``power_w``/``power_limit_w`` (W), ``sm_clock_mhz`` (MHz).

Two scrapes of the same endpoint (``before`` and ``after``) turn counters and histograms into
window deltas (``Snapshot.deltas``); with a window length (``window_s``, or sample timestamps)
also into per-second rates.

Errors: a malformed file is one ``OptkgError`` naming the file and line (``path:line: ...``). A
reading that parses but cannot be true (NaN, infinite, negative, or a utilisation outside 0-1 after
scaling) does not fail the file: DCGM emits such values now and then (NVIDIA/DCGM issues 152 and
199). It is left out of the readings and kept in ``Snapshot.invalid`` (file, metric, entity,
value, why), so a report says "invalid" rather than "missing" (``VALID_RANGE``).

Which machine: GPU model names (``modelName`` / ``name`` columns) and host names (DCGM
``Hostname`` label) are kept per input file in ``Snapshot.machines``; served model names (the
``model_name`` label of vLLM/SGLang series) in ``Engine.model_names``.
"""
from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from kg.core.errors import OptkgError

MIB = 1024 * 1024
MAX_FILE_BYTES = 64 * MIB
FORMATS = ("prometheus", "nvidia-smi-csv", "nvidia-smi-dmon", "nvidia-smi-capture", "dcgm-fields")
PHASES = ("load", "idle")

# Device readings that are fractions 0-1 (after scaling): values outside are dropped with a note.
FRACTION_READINGS = ("gpu_util", "mem_copy_util", "sm_active", "tensor_active", "dram_active", "gr_engine_active",
                     "sm_occupancy", "encoder_util", "decoder_util")
# Engine readings that are fractions 0-1.
ENGINE_FRACTIONS = ("kv_cache_usage", "prefix_cache_hit_rate", "engine_utilization")


def invalid_reason(reading: str, value: float) -> str | None:
    """Why ``value`` cannot be a true ``reading`` (None when it can).

    Every canonical reading is a finite, non-negative number (counts, tokens, MiB, W, MHz, seconds,
    fractions); fractions (``FRACTION_READINGS``, ``ENGINE_FRACTIONS``) are at most 1 (0.5e-9 slack).
    """
    if math.isnan(value):
        return "not a number"
    if math.isinf(value):
        return "infinite"
    if value < -1e-9:
        return "negative"
    if (reading in FRACTION_READINGS or reading in ENGINE_FRACTIONS) and value > 1.0 + 1e-9:
        return "outside the 0-1 range of a fraction"
    return None


@dataclass
class InvalidReading:
    """A reading that parsed but cannot be true; it is not used (see ``invalid_reason``)."""

    path: str
    metric: str
    entity: str  # 'vllm', 'sglang' or 'GPU <key>'
    reading: str
    value: float
    why: str

    def to_dict(self) -> dict[str, Any]:
        v = self.value
        return {"path": self.path, "metric": self.metric, "entity": self.entity, "reading": self.reading,
                "value": v if math.isfinite(v) else str(v), "why": self.why}

    def text(self) -> str:
        return f"{self.metric} for {self.entity} reads {self.value:g} ({self.why}) in {self.path}"

# Which source wins when two files report the same GPU reading (lower wins).
DEVICE_SOURCE_RANK = {"dcgm": 0, "nvidia-smi": 1, "nvidia-gpu-exporter": 2, "nvidia-smi-dmon": 3}


# ---------------------------------------------------------------------------------------------
# histograms

@dataclass
class Histogram:
    """A Prometheus histogram: cumulative ``buckets`` [(upper bound, count)], sorted, last +Inf."""

    buckets: list[tuple[float, float]]
    sum: float | None = None
    count: float | None = None

    @property
    def total(self) -> float:
        if self.count is not None:
            return self.count
        return self.buckets[-1][1] if self.buckets else 0.0

    def mean(self) -> float | None:
        """sum / count, or None when empty."""
        if self.sum is None or not self.total:
            return None
        return self.sum / self.total

    def quantile(self, q: float) -> float | None:
        """Estimate of the q-quantile, as PromQL ``histogram_quantile`` does (promql/quantile.go).

        Linear interpolation inside the bucket holding rank ``q * count``; the lower bound of the
        first bucket is 0; a rank in the +Inf bucket returns the highest finite bound.
        Returns None when the histogram is empty or has no +Inf bucket.
        """
        b = self.buckets
        if len(b) < 2 or not math.isinf(b[-1][0]):
            return None
        counts = []
        for _, c in b:  # make cumulative counts monotonic (as PromQL does)
            counts.append(max(c, counts[-1]) if counts else c)
        n = counts[-1]
        if n <= 0:
            return None
        rank = q * n
        i = next(k for k, c in enumerate(counts) if c >= rank)
        if i == len(b) - 1:
            return b[-2][0]
        if i == 0 and b[0][0] <= 0:
            return b[0][0]
        start = 0.0 if i == 0 else b[i - 1][0]
        end = b[i][0]
        in_bucket = counts[i] - (counts[i - 1] if i else 0.0)
        below = counts[i - 1] if i else 0.0
        if in_bucket <= 0:
            return end
        return start + (end - start) * ((rank - below) / in_bucket)

    def minus(self, before: "Histogram") -> "Histogram":
        """Window histogram: bucket-wise ``self - before`` (a reset, i.e. a smaller count, keeps ``self``)."""
        prev = dict(before.buckets)
        if before.total > self.total:
            return self
        out = [(le, c - prev.get(le, 0.0)) for le, c in self.buckets]
        s = None if self.sum is None or before.sum is None else self.sum - before.sum
        c = None if self.count is None or before.count is None else self.count - before.count
        return Histogram(out, s, c)

    def invalid(self) -> str | None:
        """Why this histogram cannot be true (NaN/infinite/negative counts or sum), else None."""
        vals = [c for _, c in self.buckets] + [x for x in (self.sum, self.count) if x is not None]
        if any(math.isnan(v) for v in vals):
            return "a bucket, _sum or _count is NaN"
        if any(math.isinf(v) for v in vals):
            return "a bucket, _sum or _count is infinite"
        if any(c < 0 for _, c in self.buckets) or (self.count is not None and self.count < 0):
            return "a negative count"
        return None

    SUMMARY_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))

    def summary(self, nonnegative: bool = True) -> dict[str, Any]:
        """count, mean, p50, p90, p99 (in the histogram's unit), consistent with the mean.

        The quantiles start as PromQL ``histogram_quantile`` estimates (``quantile``). Two facts
        the buckets do not carry but ``_sum``/``_count`` do are then applied:

        - one observation (count 1): every quantile is that observation, i.e. ``_sum``
          (``estimate: 'exact'``);
        - observations are non-negative (durations, token counts): the q-quantile, taken as the
          ceil(q x n)-th smallest of n observations, is at most ``_sum / (n - ceil(q x n) + 1)``,
          because that many observations are at least as large. An interpolated estimate above
          this bound contradicts the mean and is replaced by the bound (``estimate: 'capped'``,
          ``capped`` lists which; ``promql`` keeps the interpolated values).
        Otherwise ``estimate`` is ``'promql'``.
        """
        n, mean = self.total, self.mean()
        out: dict[str, Any] = {"count": n, "mean": mean}
        prom = {k: self.quantile(q) for k, q in self.SUMMARY_QUANTILES}
        out.update(prom)
        out["estimate"] = "promql"
        if self.sum is None or not n:
            return out
        if n == 1:
            for k, _ in self.SUMMARY_QUANTILES:
                out[k] = self.sum
            out["estimate"], out["promql"] = "exact", prom
            return out
        if not nonnegative or self.sum < 0 or abs(n - round(n)) > 1e-9:
            return out
        n_obs = int(round(n))
        capped = []
        for k, q in self.SUMMARY_QUANTILES:
            v = prom[k]
            if v is None:
                continue
            at_least = n_obs - math.ceil(q * n_obs - 1e-9) + 1  # observations >= the q-quantile
            bound = self.sum / at_least
            if v > bound * (1 + 1e-9):
                out[k] = bound
                capped.append(k)
        if capped:
            out["estimate"], out["capped"], out["promql"] = "capped", capped, prom
        return out


# ---------------------------------------------------------------------------------------------
# the snapshot

@dataclass
class Source:
    """One input file (or one phase of a capture) and what was read from it."""

    path: str
    format: str
    origins: list[str]
    role: str = "after"  # after | before
    phase: str | None = None
    timestamp_s: float | None = None
    samples: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "origins": self.origins, "role": self.role,
                "phase": self.phase, "timestamp_s": self.timestamp_s, "samples": self.samples}


@dataclass
class Engine:
    """Readings of one serving engine (vllm or sglang). ``where`` maps reading -> 'metric (file)'."""

    name: str
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    timestamp_s: float | None = None
    file: str = ""
    model_names: list[str] = field(default_factory=list)  # model_name label values (served model names)


@dataclass
class Device:
    """Readings of one GPU (or MIG instance). ``where`` maps reading -> 'metric (file)'."""

    key: str
    name: str | None = None
    readings: dict[str, float] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    rank: dict[str, int] = field(default_factory=dict)


@dataclass
class Snapshot:
    """Everything read from the inputs, merged (see module doc)."""

    sources: list[Source] = field(default_factory=list)
    engines: dict[str, Engine] = field(default_factory=dict)
    devices: dict[str, Device] = field(default_factory=dict)
    collector_fields: dict[str, bool] = field(default_factory=dict)  # DCGM field -> enabled
    unknown_metrics: dict[str, list[str]] = field(default_factory=dict)  # file -> names
    notes: list[str] = field(default_factory=list)
    before: dict[str, Engine] = field(default_factory=dict)  # engine name -> earlier scrape
    window_s: float | None = None
    window_source: str | None = None
    invalid: list[InvalidReading] = field(default_factory=list)
    machines: list[dict[str, Any]] = field(default_factory=list)  # [{path, gpu_names, hosts}] per input with GPUs
    # readings of one GPU that two inputs give differently (beyond 2 %): [{gpu, reading, values, where}],
    # values and where sorted by value so the record does not depend on input order
    disagreements: list[dict[str, Any]] = field(default_factory=list)

    def gpu_models(self) -> dict[str, list[str]]:
        """GPU model name -> input files naming it (sorted), over every input of the snapshot."""
        out: dict[str, set[str]] = {}
        for m in self.machines:
            for name in m["gpu_names"]:
                out.setdefault(name, set()).add(m["path"])
        return {k: sorted(v) for k, v in sorted(out.items())}

    def hosts(self) -> dict[str, list[str]]:
        """Host name -> input files naming it (sorted)."""
        out: dict[str, set[str]] = {}
        for m in self.machines:
            for h in m["hosts"]:
                out.setdefault(h, set()).add(m["path"])
        return {k: sorted(v) for k, v in sorted(out.items())}

    def deltas(self, engine: str) -> dict[str, float]:
        """Counter increases between the before and after scrapes of ``engine`` ({} without a before)."""
        b, a = self.before.get(engine), self.engines.get(engine)
        if b is None or a is None:
            return {}
        out = {}
        for k, v in a.counters.items():
            if k in b.counters:
                d = v - b.counters[k]
                out[k] = v if d < 0 else d  # counter reset: the process restarted in between
        return out

    def window_histograms(self, engine: str) -> dict[str, Histogram]:
        b, a = self.before.get(engine), self.engines.get(engine)
        if a is None:
            return {}
        if b is None:
            return dict(a.histograms)
        return {k: (h.minus(b.histograms[k]) if k in b.histograms else h) for k, h in a.histograms.items()}


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

# nvidia-smi --query-gpu field -> (reading, unit the value carries, scale to the reading's unit, priority)
SMI_FIELDS: dict[str, tuple[str, str, float, int]] = {
    "utilization.gpu": ("gpu_util", "%", 0.01, 0),
    "utilization.memory": ("mem_copy_util", "%", 0.01, 0),
    "utilization.encoder": ("encoder_util", "%", 0.01, 0),
    "utilization.decoder": ("decoder_util", "%", 0.01, 0),
    "memory.used": ("fb_used_mib", "MiB", 1.0, 0),
    "memory.free": ("fb_free_mib", "MiB", 1.0, 0),
    "memory.total": ("fb_total_mib", "MiB", 1.0, 0),
    "memory.reserved": ("fb_reserved_mib", "MiB", 1.0, 0),
    "power.draw": ("power_w", "W", 1.0, 0),
    "power.draw.average": ("power_w", "W", 1.0, 1),
    "power.draw.instant": ("power_w", "W", 1.0, 2),
    "enforced.power.limit": ("power_limit_w", "W", 1.0, 0),
    "power.limit": ("power_limit_w", "W", 1.0, 1),
    "clocks.sm": ("sm_clock_mhz", "MHz", 1.0, 0),
    "clocks.current.sm": ("sm_clock_mhz", "MHz", 1.0, 0),
}
SMI_IDENTITY = ("index", "name", "uuid", "timestamp")
SMI_UNITS = {"%": 1.0, "MiB": 1.0, "GiB": 1024.0, "KiB": 1 / 1024, "W": 1.0, "MHz": 1.0, "GHz": 1000.0}

# nvidia-smi dmon column -> (reading, scale)
DMON_COLUMNS: dict[str, tuple[str, float]] = {
    "pwr": ("power_w", 1.0), "sm": ("gpu_util", 0.01), "mem": ("mem_copy_util", 0.01),
    "enc": ("encoder_util", 0.01), "dec": ("decoder_util", 0.01), "fb": ("fb_used_mib", 1.0),
    "pclk": ("sm_clock_mhz", 1.0),
}
DMON_KNOWN_OTHER = {"gpu", "gtemp", "mtemp", "jpg", "ofa", "mclk", "bar1", "ccpm", "rxpci", "txpci", "date",
                    "time", "pviol", "tviol", "sbecc", "dbecc", "pci", "fb", "id"}


# ---------------------------------------------------------------------------------------------
# a parsed file before merging

@dataclass
class _Part:
    source: Source
    engines: dict[str, Engine] = field(default_factory=dict)
    devices: dict[str, Device] = field(default_factory=dict)
    collector_fields: dict[str, bool] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    invalid: list[InvalidReading] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)


def _err(path: str, line: int | None, msg: str) -> OptkgError:
    return OptkgError(f"{path}:{line}: {msg}" if line else f"{path}: {msg}")


# ---------------------------------------------------------------------------------------------
# format detection

_PROM_LINE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*(\{|\s)")
_DCGM_FIELD_LINE = re.compile(r"^#?\s*(DCGM_[A-Z0-9_]+)\s*,\s*([a-z]+)\s*,(.*)$")


def _first_lines(text: str, n: int = 5) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()][:n]


def _is_capture(text: str) -> bool:
    return "# nvidia_gpu_exporter GPU capture" in text[:2000] or bool(
        re.search(r"^# (idle|load) :: (query-gpu|dmon)", text, re.M))


def _is_dmon(text: str) -> bool:
    lines = _first_lines(text, 1)
    return bool(lines) and bool(re.match(r"^#\s*gpu\s", lines[0])) and any(
        c in lines[0].split() for c in ("pwr", "sm", "mem"))


def _is_dcgm_fields(text: str) -> bool:
    real = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(real) and bool(_DCGM_FIELD_LINE.match(real[0].strip()))


def _is_smi_csv(text: str) -> bool:
    lines = _first_lines(text, 1)
    if not lines or "," not in lines[0] or lines[0].startswith("#"):
        return False
    head = {_smi_name(h) for h in lines[0].split(",")}
    return bool(head & (set(SMI_FIELDS) | {"index", "uuid", "name", "pci.bus_id"}))


def _is_prometheus(text: str) -> bool:
    lines = _first_lines(text, 20)
    return any(ln.startswith(("# HELP", "# TYPE")) or _PROM_LINE.match(ln) for ln in lines)


DETECTORS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("nvidia-smi-capture", _is_capture),
    ("nvidia-smi-dmon", _is_dmon),
    ("dcgm-fields", _is_dcgm_fields),
    ("nvidia-smi-csv", _is_smi_csv),
    ("prometheus", _is_prometheus),
)


def detect_format(text: str, path: str = "<input>") -> str:
    """Name of the format of ``text`` (one of FORMATS). Raises OptkgError when none fits."""
    if not text.strip():
        raise _err(path, None, "empty file (expected metrics)")
    for name, test in DETECTORS:
        if test(text):
            return name
    raise _err(path, 1, "unrecognised metrics format (expected Prometheus text from /metrics, "
                        "`nvidia-smi --query-gpu=... --format=csv`, `nvidia-smi dmon`, an nvidia_gpu_exporter "
                        "capture, or a dcgm-exporter field list)")


# ---------------------------------------------------------------------------------------------
# Prometheus text

def _prom_families(text: str, path: str, line_offset: int = 0) -> list[Any]:
    from prometheus_client.parser import text_string_to_metric_families
    try:
        return list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError) as e:
        lines = text.splitlines(keepends=True)
        lo, hi = 1, len(lines)  # smallest prefix that fails to parse: binary search

        def fails(k: int) -> bool:
            try:
                list(text_string_to_metric_families("".join(lines[:k])))
                return False
            except (ValueError, TypeError, IndexError, KeyError):
                return True
        if not fails(hi):
            raise _err(path, None, f"not valid Prometheus text ({e})") from None
        while lo < hi:
            mid = (lo + hi) // 2
            if fails(mid):
                hi = mid
            else:
                lo = mid + 1
        bad = lines[lo - 1].strip()
        shown = bad if len(bad) <= 80 else bad[:77] + "..."
        raise _err(path, lo + line_offset, f"not valid Prometheus text: {e} (line: {shown!r})") from None


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
                        le = float("inf") if s.labels.get("le") in ("+Inf", "Inf") else float(s.labels["le"])
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


def _config_labels(labels: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in labels.items():
        if k in ("model_name", "engine"):
            continue
        if v in ("None", ""):
            out[k] = None
        elif v in ("True", "False"):
            out[k] = v == "True"
        elif re.fullmatch(r"-?\d+", v):
            out[k] = int(v)
        elif re.fullmatch(r"-?\d+\.\d*(e-?\d+)?", v):
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


# ---------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu CSV

def _smi_name(header: str) -> str:
    return re.sub(r"\s*\[.*\]\s*$", "", header.strip())


def _smi_unit(header: str) -> str | None:
    m = re.search(r"\[(.*)\]\s*$", header.strip())
    return m.group(1) if m else None


_NA = re.compile(r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions|Requested functionality has been deprecated)\]?$", re.I)


def _smi_number(raw: str, unit: str, path: str, line: int, column: str) -> float | None:
    v = raw.strip()
    if not v or _NA.match(v):
        return None
    m = re.fullmatch(r"([-+]?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|nan|inf|infinity))\s*([A-Za-z%]*)", v, re.I)
    if not m:
        raise _err(path, line, f"column '{column}': expected a number in {unit}, found {v!r}")
    num, u = float(m.group(1)), m.group(2)
    if u and u != unit:
        if u not in SMI_UNITS or unit not in SMI_UNITS:
            raise _err(path, line, f"column '{column}': expected {unit}, found {v!r}")
        num = num * SMI_UNITS[u] / SMI_UNITS[unit]
    return num


def _parse_smi_csv(text: str, path: str, line_offset: int = 0, source_format: str = "nvidia-smi-csv") -> _Part:
    part = _Part(Source(path, source_format, ["nvidia-smi"]))
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    try:
        rows = list(reader)
    except csv.Error as e:  # e.g. a bare carriage return inside a field
        raise _err(path, line_offset + reader.line_num, f"not valid CSV ({e})") from None
    rows_with_line = [(i + 1 + line_offset, r) for i, r in enumerate(rows) if r and any(c.strip() for c in r)]
    if not rows_with_line:
        raise _err(path, line_offset + 1, "empty nvidia-smi CSV")
    hline, header = rows_with_line[0]
    names = [_smi_name(h) for h in header]
    units = [_smi_unit(h) for h in header]
    if "index" not in names and len(rows_with_line) > 2:
        part.notes.append(f"{path}: no 'index' column; rows are read as GPUs 0, 1, ... in order")
    samples: dict[str, dict[str, list[float]]] = {}
    for n, (line, row) in enumerate(rows_with_line[1:]):
        if len(row) != len(header):
            raise _err(path, line, f"expected {len(header)} columns as in the header (line {hline}), found {len(row)}")
        cells = dict(zip(names, (c.strip() for c in row)))
        key = cells.get("index") or str(n)
        dev = part.devices.setdefault(key, Device(key))
        if cells.get("name") and not _NA.match(cells["name"]):
            dev.name = cells["name"]
        acc = samples.setdefault(key, {})
        for col, unit_h, raw in zip(names, units, row):
            spec = SMI_FIELDS.get(col)
            if spec is None:
                continue
            reading, unit, scale, pr = spec
            v = _smi_number(raw, unit_h or unit, path, line, col)
            if v is None:
                continue
            if unit_h and unit_h != unit:
                v = v * SMI_UNITS.get(unit_h, 1.0) / SMI_UNITS.get(unit, 1.0)
            why = invalid_reason(reading, v * scale)
            if why:
                part.invalid.append(InvalidReading(f"{path}:{line}", col, f"GPU {key}", reading, v * scale, why))
                part.notes.append(f"{path}:{line}: {col} for GPU {key} reads {raw.strip()} ({why}); the sample is ignored")
                continue
            acc.setdefault(f"{pr}:{reading}:{col}", []).append(v * scale)
    for col in names:
        if col not in SMI_FIELDS and col not in SMI_IDENTITY:
            part.unknown.add(col)
    for key, acc in samples.items():
        dev = part.devices[key]
        best: dict[str, tuple[int, str, list[float]]] = {}
        for k, vals in acc.items():
            pr, reading, col = k.split(":", 2)
            if reading not in best or int(pr) < best[reading][0]:
                best[reading] = (int(pr), col, vals)
        for reading, (_, col, vals) in best.items():
            dev.readings[reading] = sum(vals) / len(vals)
            dev.where[reading] = f"{col} ({path})"
            dev.rank[reading] = DEVICE_SOURCE_RANK["nvidia-smi"]
    part.source.samples = len(rows_with_line) - 1
    return part


# ---------------------------------------------------------------------------------------------
# nvidia-smi dmon

def _parse_dmon(text: str, path: str, line_offset: int = 0) -> _Part:
    part = _Part(Source(path, "nvidia-smi-dmon", ["nvidia-smi"]))
    cols: list[str] | None = None
    acc: dict[str, dict[str, list[float]]] = {}
    nrows = 0
    for i, raw in enumerate(text.splitlines()):
        line = i + 1 + line_offset
        s = raw.strip()
        if not s:
            continue
        if s.startswith("#"):
            toks = s.lstrip("#").split()
            if toks and toks[0].lower() == "gpu":
                cols = [t.lower() for t in toks]
            continue
        if cols is None:
            raise _err(path, line, "dmon row before the '# gpu pwr ...' header")
        toks = s.split()
        if len(toks) != len(cols):
            raise _err(path, line, f"expected {len(cols)} columns ({' '.join(cols)}), found {len(toks)}")
        gpu = toks[0]
        if not gpu.isdigit():
            raise _err(path, line, f"column 'gpu': expected a GPU index, found {gpu!r}")
        nrows += 1
        part.devices.setdefault(gpu, Device(gpu))
        for c, tok in zip(cols[1:], toks[1:]):
            spec = DMON_COLUMNS.get(c)
            if spec is None:
                continue
            if tok == "-":
                continue
            try:
                v = float(tok)
            except ValueError:
                raise _err(path, line, f"column '{c}': expected a number or '-', found {tok!r}") from None
            why = invalid_reason(spec[0], v * spec[1])
            if why:
                part.invalid.append(InvalidReading(f"{path}:{line}", f"dmon {c}", f"GPU {gpu}", spec[0], v * spec[1], why))
                part.notes.append(f"{path}:{line}: dmon {c} for GPU {gpu} reads {tok} ({why}); the sample is ignored")
                continue
            acc.setdefault(gpu, {}).setdefault(spec[0], []).append(v * spec[1])
    if cols is None:
        raise _err(path, line_offset + 1, "no '# gpu pwr ...' header (expected `nvidia-smi dmon` output)")
    for c in cols:
        if c not in DMON_COLUMNS and c not in DMON_KNOWN_OTHER:
            part.unknown.add(c)
    col_of = {r: c for c, (r, _) in DMON_COLUMNS.items()}
    for gpu, readings in acc.items():
        dev = part.devices[gpu]
        for r, vals in readings.items():
            dev.readings[r] = sum(vals) / len(vals)
            dev.where[r] = f"dmon {col_of[r]}, mean of {len(vals)} samples ({path})"
            dev.rank[r] = DEVICE_SOURCE_RANK["nvidia-smi-dmon"]
    part.source.samples = nrows
    return part


# ---------------------------------------------------------------------------------------------
# nvidia_gpu_exporter capture (several nvidia-smi outputs in '# <phase> :: <what>' sections)

_SECTION = re.compile(r"^# (?P<phase>[a-z-]+) :: (?P<what>.+?)\s*$")


def _capture_sections(text: str) -> dict[tuple[str, str], tuple[int, str]]:
    """(phase, kind) -> (line offset of the body, body) for query-gpu and dmon sections."""
    lines = text.splitlines()
    heads = []
    for i, ln in enumerate(lines):
        m = _SECTION.match(ln)
        if m and i > 0 and lines[i - 1].startswith("#####"):
            heads.append((i, m.group("phase"), m.group("what")))
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for n, (i, phase, what) in enumerate(heads):
        kind = "query-gpu" if what.startswith("query-gpu") else "dmon" if what.startswith("dmon") else None
        if kind is None:
            continue
        j = i + 1
        while j < len(lines) and (lines[j].startswith("# $") or lines[j].startswith("#####")):
            j += 1
        end = heads[n + 1][0] - 1 if n + 1 < len(heads) else len(lines)
        out[(phase, kind)] = (j, "\n".join(lines[j:end]))
    return out


def _parse_capture(text: str, path: str, phase: str) -> _Part:
    secs = _capture_sections(text)
    phases = sorted({p for p, _ in secs if p in PHASES})
    if phase not in phases:
        raise _err(path, None, f"no '{phase} :: query-gpu' or '{phase} :: dmon' section "
                               f"(phases in this capture: {', '.join(phases) or 'none'})")
    part = _Part(Source(path, "nvidia-smi-capture", ["nvidia-smi"], phase=phase))
    n = 0
    if (phase, "query-gpu") in secs:
        off, body = secs[(phase, "query-gpu")]
        p = _parse_smi_csv(body, path, off)
        part.devices, n = p.devices, p.source.samples
        part.unknown |= p.unknown
        part.notes += p.notes
        part.invalid += p.invalid
    if (phase, "dmon") in secs:
        off, body = secs[(phase, "dmon")]
        p = _parse_dmon(body, path, off)
        n += p.source.samples
        part.notes += p.notes
        part.invalid += p.invalid
        for k, d in p.devices.items():
            mine = part.devices.setdefault(k, Device(k))
            for r, v in d.readings.items():
                if r not in mine.readings:
                    mine.readings[r], mine.where[r], mine.rank[r] = v, d.where[r], d.rank[r]
    part.source.samples = n
    part.notes.append(f"{path}: capture phase '{phase}' read (phases: {', '.join(phases)})")
    return part


# ---------------------------------------------------------------------------------------------
# dcgm-exporter field lists

def _parse_dcgm_fields(text: str, path: str) -> _Part:
    part = _Part(Source(path, "dcgm-fields", ["dcgm"]))
    for i, raw in enumerate(text.splitlines()):
        s = raw.strip()
        if not s:
            continue
        m = _DCGM_FIELD_LINE.match(s)
        if m:
            part.collector_fields[m.group(1)] = not s.startswith("#")
        elif not s.startswith("#"):
            raise _err(path, i + 1, "expected 'DCGM_FI_<FIELD>, <gauge|counter|label>, <help>'")
    part.source.samples = 0
    return part


# ---------------------------------------------------------------------------------------------
# loading and merging

def read_metrics_text(path: Path | str) -> str:
    from kg.core.yamlio import read_text
    return read_text(path, MAX_FILE_BYTES)


def parse_text(text: str, path: str, phase: str = "load") -> _Part:
    """Parse one input (format auto-detected). Raises OptkgError naming ``path`` and the line."""
    fmt = detect_format(text, path)
    if fmt == "prometheus":
        return _parse_prometheus(text, path)
    if fmt == "nvidia-smi-csv":
        return _parse_smi_csv(text, path)
    if fmt == "nvidia-smi-dmon":
        return _parse_dmon(text, path)
    if fmt == "nvidia-smi-capture":
        return _parse_capture(text, path, phase)
    return _parse_dcgm_fields(text, path)


SKIP_SUFFIXES = (".md", ".rst", ".json", ".yaml", ".yml", ".html", ".py", ".sh")


def expand_paths(paths: Iterable[Path | str]) -> tuple[list[Path], list[str]]:
    """Files to read: files as given, directories expanded (sorted, not recursive). Returns (files, notes)."""
    files: list[Path] = []
    notes: list[str] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            skipped = []
            for f in sorted(p.iterdir()):
                if f.name.startswith(".") or not f.is_file():
                    continue
                if f.suffix.lower() in SKIP_SUFFIXES:
                    skipped.append(f.name)
                    continue
                files.append(f)
            if skipped:
                notes.append(f"{p}: skipped {', '.join(skipped)} (not metrics)")
        elif p.exists():
            files.append(p)
        else:
            raise OptkgError(f"{p}: file not found")
    return files, notes


def _merge_device(into: Device, d: Device, snap: Snapshot) -> None:
    if d.name and into.name and d.name != into.name and d.name not in into.name:
        snap.notes.append(f"GPU {into.key} is '{into.name}' in one input and '{d.name}' in another; "
                          "diagnose one machine at a time")
    into.name = into.name or d.name
    for r, v in d.readings.items():
        if r in into.readings:
            old = into.readings[r]
            keep_new = d.rank.get(r, 9) < into.rank.get(r, 9)
            if not math.isclose(old, v, rel_tol=0.02, abs_tol=1e-9):
                used, other = (d.where[r], into.where[r]) if keep_new else (into.where[r], d.where[r])
                snap.notes.append(f"GPU {into.key} {r}: inputs disagree ({old:g} vs {v:g}); used {used}, not {other}")
                pairs = sorted([(old, into.where[r]), (v, d.where[r])])
                snap.disagreements.append({"gpu": into.key, "reading": r, "values": [x for x, _ in pairs],
                                           "where": [w for _, w in pairs]})
            if not keep_new:
                continue
        into.readings[r], into.where[r], into.rank[r] = v, d.where[r], d.rank.get(r, 9)


def _machine(p: _Part) -> dict[str, Any] | None:
    """GPU model names and host names one input reports (None for an input without GPUs)."""
    names = set()
    for d in p.devices.values():
        for n in (d.name or "").split(" / "):  # a device labelled with two models in one file keeps both
            if n.strip():
                names.add(n.strip())
    if not p.devices and not p.hosts:
        return None
    return {"path": p.source.path, "gpu_names": sorted(names), "hosts": sorted(p.hosts)}


def _merge_parts(parts: list[_Part], snap: Snapshot, engines_into: dict[str, Engine]) -> None:
    for p in parts:
        snap.sources.append(p.source)
        snap.notes.extend(p.notes)
        snap.invalid.extend(p.invalid)
        m = _machine(p)
        if m is not None:
            snap.machines.append(m)
        if p.unknown:
            snap.unknown_metrics.setdefault(p.source.path, [])
            snap.unknown_metrics[p.source.path] = sorted(set(snap.unknown_metrics[p.source.path]) | p.unknown)
        snap.collector_fields.update(p.collector_fields)
        for name, e in p.engines.items():
            if name in engines_into:
                prev = engines_into[name]
                snap.notes.append(f"{name} metrics appear in {prev.file} and {e.file}; the readings of {e.file} are used")
            engines_into[name] = e
        for k, d in p.devices.items():
            if k in snap.devices:
                _merge_device(snap.devices[k], d, snap)
            else:
                snap.devices[k] = d


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or a.samefile(b)
    except OSError:
        return False


def load_snapshot(paths: Iterable[Path | str] = (), before: Iterable[Path | str] = (),
                  after: Iterable[Path | str] = (), window_s: float | None = None, phase: str = "load",
                  texts: Iterable[tuple[str, str]] = ()) -> Snapshot:
    """Read, detect and merge every input into one Snapshot.

    ``paths`` and ``after``: files or directories, merged (the current state). ``before``: an earlier
    scrape of the same endpoint(s); counters and histograms become window deltas. Without
    ``before``, two scrapes of the same engine among ``paths`` are taken as before/after in
    timestamp order (file-name order when the text has no timestamps). ``window_s``: seconds between
    the scrapes (else taken from sample timestamps when both scrapes carry them). ``texts``: extra
    in-memory inputs as (name, text). ``phase``: which phase of an nvidia_gpu_exporter capture to read.
    Raises OptkgError for missing/malformed files (file and line named).
    """
    if phase not in PHASES:
        raise OptkgError(f"capture phase must be one of {', '.join(PHASES)}, found {phase!r}")
    if window_s is not None and not (window_s > 0):
        raise OptkgError(f"--window: expected a positive number of seconds, found {window_s}")
    snap = Snapshot()
    texts = list(texts)
    files, notes = expand_paths(list(paths) + list(after))
    bfiles, bnotes = expand_paths(before)
    snap.notes += notes + bnotes
    for b in bfiles:
        for a in files:
            if _same_file(a, b):
                raise OptkgError(f"--before {b} and the later scrape {a} are the same file: give two scrapes of the "
                                 "endpoint taken some time apart (the increase between them is the window)")
    if not files and not texts:
        raise OptkgError("no metrics given: pass files or directories (Prometheus /metrics text, nvidia-smi CSV or dmon)")
    after_texts = [read_metrics_text(f) for f in files]
    after_parts = [parse_text(t, str(f), phase) for f, t in zip(files, after_texts)]
    after_parts += [parse_text(t, name, phase) for name, t in texts]
    before_texts = [read_metrics_text(f) for f in bfiles]
    before_parts = [parse_text(t, str(f), phase) for f, t in zip(bfiles, before_texts)]
    for bf, bt in zip(bfiles, before_texts):
        for af, at in zip(files, after_texts):
            if bt == at:
                snap.notes.append(f"{bf} (--before) and {af} have the same content: the same scrape twice, so every "
                                  "counter increase and rate over the window is 0")
    for p in before_parts:
        p.source.role = "before"
    if not before_parts:
        # two scrapes of one engine among the inputs: the earlier is 'before'
        by_engine: dict[str, list[_Part]] = {}
        for p in after_parts:
            for name in p.engines:
                by_engine.setdefault(name, []).append(p)
        for name, ps in by_engine.items():
            if len(ps) < 2:
                continue
            ps = sorted(ps, key=lambda p: (p.engines[name].timestamp_s is None, p.engines[name].timestamp_s or 0.0,
                                           p.source.path))
            first, last = ps[0], ps[-1]
            snap.before[name] = first.engines.pop(name)
            first.source.role = "before" if not first.engines and not first.devices else first.source.role
            for mid in ps[1:-1]:
                mid.engines.pop(name)
                snap.notes.append(f"{mid.source.path}: a middle scrape of {name}; only the first and last are used")
            snap.notes.append(f"{name}: {first.source.path} read as the earlier scrape and {last.source.path} as the later")
    for p in before_parts:
        snap.sources.append(p.source)
        snap.notes.extend(p.notes)
        snap.invalid.extend(p.invalid)
        if p.unknown:
            snap.unknown_metrics[p.source.path] = sorted(p.unknown)
        if p.devices:
            snap.notes.append(f"{p.source.path}: GPU readings of an earlier scrape are not used (gauges come "
                              "from the later scrape)")
        for name, e in p.engines.items():
            snap.before[name] = e
    b_engines = sorted({n for p in before_parts for n in p.engines})
    a_engines = sorted({n for p in after_parts for n in p.engines})
    if b_engines and not set(b_engines) & set(a_engines):
        bnames = ", ".join(p.source.path for p in before_parts)
        raise OptkgError(f"--before {bnames} ({', '.join(b_engines)}) and the later scrape(s) "
                         f"({', '.join(a_engines) or 'no engine metrics'}) share no engine: give two scrapes of the "
                         "same endpoint")
    _merge_parts(after_parts, snap, snap.engines)
    for name in list(snap.before):
        if name not in snap.engines:
            snap.notes.append(f"{name}: only an earlier scrape was given (--before) and no later one; ignored")
            del snap.before[name]
    if snap.before:
        if window_s is not None:
            snap.window_s, snap.window_source = float(window_s), "--window"
        else:
            gaps = [snap.engines[n].timestamp_s - b.timestamp_s for n, b in snap.before.items()
                    if b.timestamp_s is not None and snap.engines[n].timestamp_s is not None]
            if gaps and min(gaps) > 0:
                snap.window_s, snap.window_source = min(gaps), "sample timestamps"
            else:
                snap.notes.append("two scrapes but no window length: give --window SECONDS to turn counter "
                                  "increases into per-second rates")
    elif window_s is not None:
        snap.notes.append("--window is ignored without two scrapes (--before/--after)")
    return snap
