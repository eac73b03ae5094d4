"""Workload measurements from a request trace, computed in one streaming pass.

Definitions (each also appears in the output, see ``DEFINITIONS``):

- **requests, duration, arrival rate**: requests = non-blank data lines; duration = last minus
  first arrival time (s); arrival rate = requests / duration (req/s; none when duration is 0).
- **length distributions** (tokens): input = prompt tokens, output = generated tokens, request =
  input + output (the KV a request holds when it finishes). mean, and p50/p90/p99 by the
  *nearest-rank* rule: pN is the smallest value v with at least N % of requests <= v
  (the ceil(N/100 * n)-th smallest value), so every percentile is a value that occurred.
- **prefix reuse** (Mooncake traces only): the hit ratio of an *unbounded* prefix cache with
  longest-prefix matching. A prompt block counts as a hit when it and every block before it in
  the same prompt were referenced by an earlier request (the ids stand for whole prefixes). Ratio
  over blocks = hit blocks / prompt blocks; over tokens = tokens in hit blocks / prompt tokens
  (the last block of a prompt may be partial and weighs its real token count).
- **stack distance** of a reference to a block referenced before: its position (1-based) in an
  LRU stack of blocks = 1 + the number of distinct blocks referenced since its previous reference.
  An LRU cache of C blocks holds it exactly when the distance is <= C. The stack is updated once
  per request, after the request's lookup; within a request blocks are refreshed deepest-first,
  so the shared prefix is the most recently used part (vLLM frees a request's blocks in reverse
  order for the same reason: tail blocks are evicted first).
- **reuse frequency**: references per block among blocks referenced at least twice; **time
  between reuses**: seconds from the previous request referencing a block to the next.
- **LRU hit ratio at capacity C** (blocks): an LRU cache of C blocks with longest-prefix
  matching. Block i of a prompt hits when the largest stack distance among blocks 0..i is <= C;
  so one pass gives the ratio for every C. The capacities reaching 50 % / 90 % of the unbounded
  ratio are the smallest C whose hits reach that share of the unbounded hits.

Memory: O(distinct block ids + distinct length values), independent of the number of lines;
time: O(block references x log(distinct blocks)) (a Fenwick tree over LRU ticks, compacted when
full).
"""
from __future__ import annotations

import bisect
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kg.core.errors import OptkgError
from kg.inputs.traces import MOONCAKE_BLOCK_SIZE, Request, detect_format, iter_trace, truncation_note

PERCENTILES = (50, 90, 99)

DEFINITIONS: dict[str, str] = {
    "duration_s": "last arrival minus first arrival, seconds",
    "arrival_rate_rps": "requests / duration, requests per second",
    "percentiles": "nearest rank: pN is the smallest length with at least N % of requests at or below it",
    "request_length": "input + output tokens of one request (the KV it holds when it finishes)",
    "prefix_reuse": "hit ratio of an unbounded prefix cache with longest-prefix matching: a prompt block hits "
                    "when it and all blocks before it were referenced by an earlier request; over blocks and "
                    "over the tokens those blocks hold",
    "stack_distance": "for a reference to a block seen before: 1 + distinct blocks referenced since its previous "
                      "reference (LRU stack position, updated per request, prefix most recent); an LRU cache of "
                      "C blocks holds it when distance <= C",
    "reuse_frequency": "references per block, over blocks referenced at least twice",
    "reuse_interval_s": "seconds between consecutive requests referencing the same block",
    "lru_hit_ratio": "hit ratio of an LRU cache of C prefix blocks with longest-prefix matching "
                     "(block i hits when the largest stack distance of blocks 0..i is <= C)",
    "capacity_for": "smallest LRU capacity (blocks) whose hits reach 50 % / 90 % of the unbounded cache's hits",
}


class PartialTraceError(OptkgError):
    """A bad line stopped the measurement; ``partial`` holds the measurement of the lines before it (or None)."""

    def __init__(self, message: str, partial: "TraceMeasurement | None"):
        super().__init__(message)
        self.partial = partial


def _percentiles(hist: Counter, qs: Iterable[int] = PERCENTILES) -> dict[str, Any]:
    """mean, pN (nearest rank), min, max and n of a value -> count histogram; {} for an empty one."""
    n = sum(hist.values())
    if not n:
        return {"n": 0}
    keys = sorted(hist)
    out: dict[str, Any] = {"n": n, "mean": sum(k * v for k, v in hist.items()) / n, "min": keys[0], "max": keys[-1]}
    want = sorted((max(1, -(-q * n // 100)), q) for q in qs)
    cum = 0
    i = 0
    for k in keys:
        cum += hist[k]
        while i < len(want) and cum >= want[i][0]:
            out[f"p{want[i][1]}"] = k
            i += 1
        if i == len(want):
            break
    return out


@dataclass
class TraceMeasurement:
    """The result of a pass over a trace. ``summary`` is the JSON-ready dict; the curve arrays
    (sorted prefix stack distances with cumulative hit blocks/tokens) answer ``hit_ratio_at``."""

    summary: dict[str, Any]
    _dists: list[int] = field(default_factory=list)
    _cum_blocks: list[int] = field(default_factory=list)
    _cum_tokens: list[int] = field(default_factory=list)

    @property
    def prefix_measurable(self) -> bool:
        return bool(self.summary["prefix_reuse"]["measurable"])

    def hit_ratio_at(self, capacity_blocks: int) -> tuple[float, float]:
        """(hit ratio over blocks, over tokens) of an LRU cache of ``capacity_blocks`` prefix blocks."""
        pr = self.summary["prefix_reuse"]
        if not pr["measurable"] or not pr["blocks_total"]:
            raise OptkgError("prefix reuse is not measurable from this trace (no prefix block ids)")
        i = bisect.bisect_right(self._dists, capacity_blocks)
        hb = self._cum_blocks[i - 1] if i else 0
        ht = self._cum_tokens[i - 1] if i else 0
        return hb / pr["blocks_total"], (ht / pr["tokens_total"] if pr["tokens_total"] else 0.0)

    def capacity_for(self, share: int, tokens: bool = False) -> int | None:
        """Smallest capacity (blocks) reaching ``share`` % of the unbounded hits (over blocks, or tokens)."""
        cum = self._cum_tokens if tokens else self._cum_blocks
        if not cum or not cum[-1]:
            return None
        total = cum[-1]
        for d, c in zip(self._dists, cum):
            if c * 100 >= share * total:
                return d
        return self._dists[-1]

    def to_dict(self) -> dict[str, Any]:
        return self.summary


class TraceMeasurer:
    """Streaming accumulator: ``add(request)`` for each request, then ``result()``.

    ``block_size``: tokens per prefix block (512 for Mooncake). State is O(distinct blocks +
    distinct length values).
    """

    def __init__(self, block_size: int = MOONCAKE_BLOCK_SIZE, fmt: str = "mooncake", initial_ticks: int = 1 << 16):
        self.block_size = block_size
        self.format = fmt
        self.n = 0
        self.last_line = 0
        self.first_ms: float | None = None
        self.last_ms: float | None = None
        self.min_ms = float("inf")
        self.max_ms = float("-inf")
        self.out_of_order = 0
        self.hist_in: Counter = Counter()
        self.hist_out: Counter = Counter()
        self.hist_req: Counter = Counter()
        self.prefix = True       # every request so far carried hash ids
        # prefix state
        self._initial = initial_ticks
        self._size = initial_ticks
        self._tree = [0] * (initial_ticks + 1)
        self._tick: dict[int, int] = {}
        self._count: dict[int, int] = {}
        self._last_ms: dict[int, float] = {}
        self._now = 0
        self._live = 0
        self.blocks_total = 0
        self.tokens_total = 0
        self.first_refs = 0
        self.pre_blocks: Counter = Counter()   # prefix-max stack distance -> hit blocks
        self.pre_tokens: Counter = Counter()   # prefix-max stack distance -> hit tokens
        self.dist_hist: Counter = Counter()    # stack distance of every reuse reference
        self.interval_hist: Counter = Counter()  # ms between reuses
        self.compactions = 0
        self.compaction_cells = 0              # tree cells rebuilt + ticks renumbered over all compactions

    # -- Fenwick tree over LRU ticks (1-based positions) ------------------------------------------
    def _compact(self, need: int) -> None:
        """Renumber live ticks 1..D in LRU order and rebuild the tree with room for ``need`` more."""
        order = sorted(self._tick.items(), key=lambda kv: kv[1])
        d = len(order)
        for i, (b, _) in enumerate(order, 1):
            self._tick[b] = i
        size = max(self._initial, 2 * (d + need))
        tree = [0] * (size + 1)
        for i in range(1, size + 1):
            low = i & -i
            tree[i] = max(0, min(i, d) - (i - low))
        self._tree, self._size, self._now = tree, size, d
        self.compactions += 1
        self.compaction_cells += size + d

    def add(self, r: Request) -> None:
        """Account one request (in file order)."""
        self.n += 1
        self.last_line = r.line
        ts = r.timestamp_ms
        if self.last_ms is not None and ts < self.last_ms:
            self.out_of_order += 1
        if self.first_ms is None:
            self.first_ms = ts
        self.last_ms = ts
        if ts < self.min_ms:
            self.min_ms = ts
        if ts > self.max_ms:
            self.max_ms = ts
        self.hist_in[r.input_length] += 1
        self.hist_out[r.output_length] += 1
        self.hist_req[r.input_length + r.output_length] += 1
        ids = r.hash_ids
        if ids is None:
            self.prefix = False
            return
        if not self.prefix:
            return
        bs = self.block_size
        length = r.input_length
        tick, tree, live = self._tick, self._tree, self._live
        count, last_ms = self._count, self._last_ms
        pre_b, pre_t, dist_hist, ivals = self.pre_blocks, self.pre_tokens, self.dist_hist, self.interval_hist
        m = 0
        broken = False
        for i, b in enumerate(ids):
            tok = length - i * bs
            if tok > bs:
                tok = bs
            t = tick.get(b)
            if t is None:
                self.first_refs += 1
                broken = True
            else:
                s = 0
                j = t - 1
                while j:
                    s += tree[j]
                    j &= j - 1
                d = live - s
                dist_hist[d] += 1
                ivals[int(round(ts - last_ms[b]))] += 1
                if not broken:
                    if d > m:
                        m = d
                    pre_b[m] += 1
                    pre_t[m] += tok
            self.blocks_total += 1
            self.tokens_total += tok
        # refresh deepest-first so the prefix ends up most recently used
        if self._now + len(ids) > self._size:
            self._compact(len(ids))
            tree = self._tree
        size = self._size
        for b in reversed(ids):
            t = tick.get(b)
            if t is not None:
                while t <= size:
                    tree[t] -= 1
                    t += t & -t
                count[b] += 1
            else:
                live += 1
                count[b] = 1
            self._now += 1
            t = self._now
            tick[b] = t
            while t <= size:
                tree[t] += 1
                t += t & -t
            last_ms[b] = ts
        self._live = live

    def result(self) -> TraceMeasurement:
        """The measurement so far (callable at any time, e.g. after a bad line)."""
        n = self.n
        dur = (self.max_ms - self.min_ms) / 1000.0 if n else 0.0
        timing = {
            "first_ms": self.first_ms if n else None, "last_ms": self.last_ms if n else None,
            "duration_s": dur, "arrival_rate_rps": (n / dur) if dur > 0 else None,
            "out_of_order_requests": self.out_of_order,
        }
        lengths = {"input": _percentiles(self.hist_in), "output": _percentiles(self.hist_out),
                   "request": _percentiles(self.hist_req),
                   "input_tokens_total": sum(k * v for k, v in self.hist_in.items()),
                   "output_tokens_total": sum(k * v for k, v in self.hist_out.items())}
        not_measurable: list[str] = []
        dists: list[int] = []
        cum_b: list[int] = []
        cum_t: list[int] = []
        if self.prefix and n:
            hits_b = sum(self.pre_blocks.values())
            hits_t = sum(self.pre_tokens.values())
            prefix = {"measurable": True, "blocks_total": self.blocks_total, "blocks_hit": hits_b,
                      "ratio_blocks": hits_b / self.blocks_total if self.blocks_total else 0.0,
                      "tokens_total": self.tokens_total, "tokens_hit": hits_t,
                      "ratio_tokens": hits_t / self.tokens_total if self.tokens_total else 0.0}
            cb = ct = 0
            for d in sorted(self.pre_blocks):
                cb += self.pre_blocks[d]
                ct += self.pre_tokens[d]
                dists.append(d)
                cum_b.append(cb)
                cum_t.append(ct)
            counts = Counter(c for c in self._count.values() if c >= 2)
            reused = sum(counts.values())
            distinct = len(self._count)
            reuse = {
                "distinct_blocks": distinct,
                "blocks_referenced_once": distinct - reused,
                "reused_blocks": reused,
                "reuse_references": self.blocks_total - self.first_refs,
                "reuse_reference_share": (self.blocks_total - self.first_refs) / self.blocks_total if self.blocks_total else 0.0,
                "references_per_reused_block": _percentiles(counts),
                "stack_distance_blocks": _percentiles(self.dist_hist),
                "reuse_interval_s": {k: (v / 1000.0 if k not in ("n",) else v) for k, v in _percentiles(self.interval_hist).items()},
            }
            points = []
            top = dists[-1] if dists else 1
            c = 1
            while True:
                i = bisect.bisect_right(dists, c)
                hb = cum_b[i - 1] if i else 0
                ht = cum_t[i - 1] if i else 0
                points.append({"capacity_blocks": c, "capacity_tokens": c * self.block_size,
                               "hit_ratio_blocks": hb / self.blocks_total if self.blocks_total else 0.0,
                               "hit_ratio_tokens": ht / self.tokens_total if self.tokens_total else 0.0})
                if c >= top:
                    break
                c *= 2
            lru = {"points": points, "unbounded_capacity_blocks": top if dists else 0}
        else:
            why = ("the trace carries token counts only (no prefix block ids), so which prompt tokens repeat an "
                   "earlier prefix is unknown" if not self.prefix else "no requests")
            prefix = {"measurable": False, "reason": why}
            reuse = {"measurable": False, "reason": why}
            lru = {"measurable": False, "reason": why}
            not_measurable = ["prefix reuse (unbounded prefix-cache hit ratio)", "reuse frequency and stack distances",
                              "LRU hit ratio vs cache capacity", "session structure (which requests belong to one conversation)"]
        m = TraceMeasurement({
            "format": self.format, "block_size": self.block_size if self.prefix else None,
            "requests": n, "last_line": self.last_line, "time": timing, "lengths": lengths,
            "prefix_reuse": prefix, "reuse": reuse, "lru": lru, "not_measurable": not_measurable,
        }, dists, cum_b, cum_t)
        if self.prefix and n and dists:
            lru["capacity_for"] = {
                str(s): {"blocks": m.capacity_for(s), "tokens_based_blocks": m.capacity_for(s, tokens=True)}
                for s in (50, 90)}
        elif self.prefix and n:
            lru["capacity_for"] = {"50": {"blocks": None, "tokens_based_blocks": None},
                                   "90": {"blocks": None, "tokens_based_blocks": None}}
        if self.prefix and n:
            not_measurable.append("session structure (which requests belong to one conversation): "
                                  "the trace has no session ids; pass --session-length")
        return m


def measure_requests(requests: Iterable[Request], block_size: int = MOONCAKE_BLOCK_SIZE,
                     fmt: str = "mooncake") -> TraceMeasurement:
    """Measure an iterable of requests (see module doc). A bad request raised by the iterable
    becomes ``PartialTraceError`` carrying the measurement of the requests before it."""
    acc = TraceMeasurer(block_size, fmt)
    try:
        for r in requests:
            acc.add(r)
    except PartialTraceError:
        raise
    except OptkgError as e:
        raise PartialTraceError(str(e), acc.result() if acc.n else None) from None
    return acc.result()


def measure_trace(path: Path | str, fmt: str = "auto", block_size: int = MOONCAKE_BLOCK_SIZE) -> TraceMeasurement:
    """Stream ``path`` (Mooncake JSONL or Azure CSV, see kg.inputs.traces) and measure it.

    Returns a TraceMeasurement whose ``summary`` also records the file, format and the elapsed
    seconds. Raises OptkgError for an unreadable/empty file and PartialTraceError (with the
    measurement of the earlier lines) at the first bad line.
    """
    p = Path(path)
    if fmt == "auto":
        fmt = detect_format(p)
    t0 = time.perf_counter()
    try:
        m = measure_requests(iter_trace(p, fmt, block_size), block_size, fmt)
    except PartialTraceError as e:
        if e.partial is not None:
            e.partial.summary["trace"] = str(p)
        raise
    m.summary["trace"] = str(p)
    cut = truncation_note(p, fmt)
    if cut:
        m.summary["notes"] = [cut]
    m.summary["elapsed_s"] = time.perf_counter() - t0
    return m
