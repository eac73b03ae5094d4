"""The metrics model every reader fills: ``Snapshot`` (engines, GPU devices, sources, machines,
invalid readings, window deltas), ``Engine``, ``Device``, ``Histogram``, ``Source``, and the validity
rule for readings (``invalid_reason``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kg.core.errors import OptkgError


MIB = 1024 * 1024
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
# a parsed file before merging

@dataclass
class _Part:
    """What one metrics file gave, before the files of a snapshot are merged."""

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
