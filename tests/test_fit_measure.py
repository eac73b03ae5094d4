"""Trace measurements (kg.analyses.fitmeasure): exact numbers on hand-made traces and on the real traces."""
from __future__ import annotations

import json
import math
import random
from collections import OrderedDict
from pathlib import Path

import pytest

from kg.analyses.fitmeasure import TraceMeasurer, measure_requests, measure_trace
from kg.inputs.traces import Request, iter_trace

# make test (xdist --dist loadgroup) runs this module's tests on one worker:
# the module's trace measurements (small, mooncake) are built once
pytestmark = pytest.mark.xdist_group("fit-measure")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TRACES = SHARED / "data" / "traces"
SMALL = REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl"
MOONCAKE = TRACES / "mooncake_fast25_conversation_trace.jsonl"
AZURE_CODE = TRACES / "azure_llm_inference_2023_code.csv"
AZURE_CONV = TRACES / "azure_llm_inference_2023_conv_first5000.csv"


# ---------------------------------------------------------------------------------------------
# A plain reference implementation, written independently of kg.analyses.fitmeasure: it simulates the
# caches directly instead of using stack distances.

def brute_force(requests, capacities, block_size=512):
    """Longest-prefix hits (blocks, tokens) of an unbounded set and of OrderedDict LRU caches.

    After each lookup the request's blocks are refreshed deepest-first, so the first block ends up
    most recently used. Capacity counts blocks.
    """
    seen = set()
    unb = [0, 0]
    lru = {c: OrderedDict() for c in capacities}
    hits = {c: [0, 0] for c in capacities}
    for inp, ids in requests:
        toks = [min(block_size, inp - i * block_size) for i in range(len(ids))]
        k = 0
        while k < len(ids) and ids[k] in seen:
            k += 1
        unb[0] += k
        unb[1] += sum(toks[:k])
        seen.update(ids)
        for c, od in lru.items():
            k = 0
            while k < len(ids) and ids[k] in od:
                k += 1
            hits[c][0] += k
            hits[c][1] += sum(toks[:k])
            for b in reversed(ids):
                od[b] = None
                od.move_to_end(b)
                if len(od) > c:
                    od.popitem(last=False)
    return unb, hits


def _reqs(path):
    return [(r["input_length"], r["hash_ids"]) for r in map(json.loads, path.read_text().splitlines()) if r]


# ---------------------------------------------------------------------------------------------
# the hand-made trace, rules/fixtures/traces/small_prefix.jsonl (worked out in its README.md)
#
#   line 1: 1536 tokens, ids [1, 2, 3]       (512, 512, 512)
#   line 2: 1100 tokens, ids [1, 2, 4]       (512, 512, 76)
#   line 3:  600 tokens, ids [1, 5]          (512, 88)
#   line 4: 1800 tokens, ids [1, 2, 3, 6]    (512, 512, 512, 264)

@pytest.fixture(scope="module")
def small():
    return measure_trace(SMALL)


def test_small_prefix_reuse(small):
    pr = small.summary["prefix_reuse"]
    # unbounded: line 2 hits [1, 2], line 3 hits [1], line 4 hits [1, 2, 3] -> 6 of 3+3+2+4 = 12 blocks;
    # tokens 1024 + 512 + 1536 = 3072 of 1536+1100+600+1800 = 5036
    assert (pr["blocks_hit"], pr["blocks_total"]) == (6, 12)
    assert (pr["tokens_hit"], pr["tokens_total"]) == (3072, 5036)
    assert pr["ratio_blocks"] == 0.5
    assert pr["ratio_tokens"] == 3072 / 5036


def test_small_stack_distances(small):
    # LRU stack (top first), refreshed deepest-first: after line 1 [1 2 3]; after line 2 [1 2 4 3];
    # after line 3 [1 5 2 4 3]. Reuse distances: line 2: 1->1, 2->2; line 3: 1->1; line 4: 1->1, 2->3, 3->5.
    # Sorted [1, 1, 1, 2, 3, 5]: mean 13/6; p50 = 3rd value = 1; p90 = ceil(5.4) = 6th = 5; p99 = 5.
    sd = small.summary["reuse"]["stack_distance_blocks"]
    assert sd == {"n": 6, "mean": 13 / 6, "min": 1, "max": 5, "p50": 1, "p90": 5, "p99": 5}
    ru = small.summary["reuse"]
    # block 1 is referenced 4 times, block 2 3 times, block 3 twice, and blocks 4, 5, 6 once each
    assert (ru["distinct_blocks"], ru["reused_blocks"], ru["blocks_referenced_once"], ru["reuse_references"]) == (6, 3, 3, 6)
    assert ru["references_per_reused_block"] == {"n": 3, "mean": 3.0, "min": 2, "max": 4, "p50": 3, "p90": 4, "p99": 4}
    # seconds since the block's previous request: 1 at 1.0 and 2 at 1.0 (line 2), 1 at 1.5 (line 3),
    # then on line 4: 1 at 1.5, 2 at 3.0 and 3 at 4.0. Sorted [1, 1, 1.5, 1.5, 3, 4], mean 12/6 = 2.
    assert ru["reuse_interval_s"] == {"n": 6, "mean": 2.0, "min": 1.0, "max": 4.0, "p50": 1.5, "p90": 4.0, "p99": 4.0}


def test_small_lru_hit_ratio_vs_capacity(small):
    # the largest distance so far along each prompt (prefix max): line 2: 1, 2; line 3: 1; line 4: 1, 3, 5
    # (line 1 and the new blocks 4, 5, 6 miss).
    # C=1: 3 blocks (512 each = 1536 tokens); C=2: 4 blocks (+512); C=3 and C=4: 5 blocks (+512 = 2560);
    # C=5: 6 blocks = 3072 tokens, the unbounded value.
    expect = {1: (3, 1536), 2: (4, 2048), 3: (5, 2560), 4: (5, 2560), 5: (6, 3072), 6: (6, 3072), 100: (6, 3072)}
    for c, (b, t) in expect.items():
        assert small.hit_ratio_at(c) == (b / 12, t / 5036), c
    pts = small.summary["lru"]["points"]
    assert [(p["capacity_blocks"], p["hit_ratio_blocks"]) for p in pts] == [(1, 3 / 12), (2, 4 / 12), (4, 5 / 12), (8, 6 / 12)]
    assert pts[0]["capacity_tokens"] == 512
    # 50 % of the 6 unbounded hits = 3, reached at C=1; 90 % = 5.4 -> 6, reached at C=5.
    # Counting tokens: 50 % of 3072 = 1536 at C=1; 90 % = 2764.8 needs 3072, at C=5.
    assert small.summary["lru"]["capacity_for"] == {"50": {"blocks": 1, "tokens_based_blocks": 1},
                                                    "90": {"blocks": 5, "tokens_based_blocks": 5}}
    assert small.capacity_for(90) == 5


def test_small_counts_and_lengths(small):
    s = small.summary
    assert s["requests"] == 4
    # arrivals at 0, 1000, 2500, 4000 ms: duration 4 s, rate 4 / 4 = 1 req/s
    assert s["time"]["duration_s"] == 4.0 and s["time"]["arrival_rate_rps"] == 1.0
    # input sorted [600, 1100, 1536, 1800]: mean 5036/4 = 1259; p50 = 2nd (ceil(0.5*4)) = 1100;
    # p90 = ceil(3.6) = 4th = 1800
    assert s["lengths"]["input"] == {"n": 4, "mean": 1259.0, "min": 600, "max": 1800, "p50": 1100, "p90": 1800, "p99": 1800}
    # output sorted [20, 50, 100, 200]: mean 92.5, p50 50; request = input + output: [620, 1150, 1636, 2000]
    assert s["lengths"]["output"]["mean"] == 92.5 and s["lengths"]["output"]["p50"] == 50
    assert s["lengths"]["request"]["p50"] == 1150 and s["lengths"]["request"]["max"] == 2000
    assert s["lengths"]["input_tokens_total"] == 5036 and s["lengths"]["output_tokens_total"] == 370


def test_brute_force_agrees_on_the_small_trace(small):
    unb, hits = brute_force(_reqs(SMALL), [1, 2, 3, 4, 5])
    assert unb == [6, 3072]
    assert {c: tuple(h) for c, h in hits.items()} == {1: (3, 1536), 2: (4, 2048), 3: (5, 2560), 4: (5, 2560), 5: (6, 3072)}


def _random_trace(seed: int, n: int):
    """Conversations that extend earlier prompts: each request takes a prefix of an earlier one and
    appends fresh blocks, so an id always stands for its whole prefix (as in Mooncake)."""
    rnd = random.Random(seed)
    prompts: list[list[int]] = []
    nxt = 0
    out = []
    for i in range(n):
        base = []
        if prompts and rnd.random() < 0.7:
            src = rnd.choice(prompts)
            base = src[: rnd.randint(1, len(src))]
        new = list(range(nxt, nxt + rnd.randint(0 if base else 1, 4)))
        nxt += len(new)
        ids = base + new
        inp = (len(ids) - 1) * 512 + rnd.randint(1, 512)
        prompts.append(ids)
        out.append((inp, ids))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stack_distances_match_direct_lru_simulation(seed):
    reqs = _random_trace(seed, 400)
    caps = [1, 2, 3, 5, 8, 13, 40, 100, 10_000]
    unb, hits = brute_force(reqs, caps)
    m = measure_requests(Request(i + 1, float(i), inp, 0, tuple(ids)) for i, (inp, ids) in enumerate(reqs))
    tot_b = sum(len(ids) for _, ids in reqs)
    tot_t = sum(inp for inp, _ in reqs)
    assert m.summary["prefix_reuse"]["blocks_hit"] == unb[0]
    assert m.summary["prefix_reuse"]["tokens_hit"] == unb[1]
    for c in caps:
        assert m.hit_ratio_at(c) == (hits[c][0] / tot_b, hits[c][1] / tot_t), c


def test_tree_compaction_changes_nothing():
    # a tiny initial tick space forces many compactions of the Fenwick tree
    reqs = _random_trace(7, 300)
    a, b = TraceMeasurer(), TraceMeasurer(initial_ticks=8)
    for i, (inp, ids) in enumerate(reqs):
        r = Request(i + 1, float(i), inp, 0, tuple(ids))
        a.add(r)
        b.add(r)
    assert b.compactions > 5
    ra, rb = a.result(), b.result()
    assert ra.summary == rb.summary
    assert [ra.hit_ratio_at(c) for c in range(1, 60)] == [rb.hit_ratio_at(c) for c in range(1, 60)]


# ---------------------------------------------------------------------------------------------
# the real Mooncake conversation trace (12,031 requests)
#
# Reference numbers computed once with brute_force() above (an OrderedDict LRU and a set, no stack
# distances), run as a separate script over the file:
#   requests 12,031; prompt blocks 288,500; unbounded longest-prefix hits 105,710 blocks;
#   LRU hits at 4,096 blocks: 25,350; at 16,384 blocks: 76,632.
# Token totals from the same pass: 144,793,823 prompt tokens, 54,098,411 in hit blocks.

MOONCAKE_REQUESTS = 12_031
MOONCAKE_BLOCKS = 288_500
MOONCAKE_UNBOUNDED_HITS = 105_710
MOONCAKE_LRU_HITS = {4_096: 25_350, 16_384: 76_632}
MOONCAKE_LONGEST_REQUEST_BLOCKS = 247  # the longest prompt: 247 blocks (same pass)


@pytest.fixture(scope="module")
def mooncake():
    acc = TraceMeasurer()
    for r in iter_trace(MOONCAKE, "mooncake"):
        acc.add(r)
    return acc.result(), acc


def test_mooncake_numbers(mooncake):
    m, _ = mooncake
    s = m.summary
    assert s["requests"] == MOONCAKE_REQUESTS
    assert s["prefix_reuse"]["blocks_total"] == MOONCAKE_BLOCKS
    assert s["prefix_reuse"]["ratio_blocks"] == MOONCAKE_UNBOUNDED_HITS / MOONCAKE_BLOCKS  # 0.36641
    assert (s["prefix_reuse"]["tokens_hit"], s["prefix_reuse"]["tokens_total"]) == (54_098_411, 144_793_823)
    for c, h in MOONCAKE_LRU_HITS.items():
        assert m.hit_ratio_at(c)[0] == h / MOONCAKE_BLOCKS  # 0.08787 and 0.26562
    # the trace spans 0 .. 3,536,999 ms
    assert s["time"]["duration_s"] == 3536.999


def test_mooncake_work_is_bounded_by_the_trace_size(mooncake):
    # Work, not wall time (timing lives in `make bench`): each of the 288,500 block references costs
    # one Fenwick prefix sum and at most two point updates, each <= bit_length(tree size) steps; the
    # tree is rebuilt only when the tick space runs out, and each rebuild at least doubles the room,
    # so all rebuilds together touch O(references) cells, not O(references x distinct blocks).
    m, acc = mooncake
    distinct = m.summary["reuse"]["distinct_blocks"]
    assert acc.blocks_total == MOONCAKE_BLOCKS
    assert acc._size <= max(1 << 16, 2 * (distinct + MOONCAKE_LONGEST_REQUEST_BLOCKS))
    assert acc._size.bit_length() <= 19                       # <= 19 steps per Fenwick walk
    assert acc.compaction_cells <= 4 * MOONCAKE_BLOCKS + (1 << 16)
    assert len(acc._tick) == distinct                           # one tick per distinct block, nothing more


def test_mooncake_reference_numbers_recomputed_independently():
    # keeps the literals above honest: the brute-force simulation over the file gives them again
    reqs = _reqs(MOONCAKE)
    unb, hits = brute_force(reqs, list(MOONCAKE_LRU_HITS))
    assert len(reqs) == MOONCAKE_REQUESTS
    assert max(len(ids) for _, ids in reqs) == MOONCAKE_LONGEST_REQUEST_BLOCKS
    assert unb[0] == MOONCAKE_UNBOUNDED_HITS
    assert {c: h[0] for c, h in hits.items()} == MOONCAKE_LRU_HITS


def _nearest_rank(values, q):
    v = sorted(values)
    return v[max(1, math.ceil(q * len(v) / 100)) - 1]


@pytest.mark.parametrize("path,requests", [
    # csv.reader counts 8,820 rows in the code trace: the header plus 8,819 requests (the last line has no
    # newline, so `wc -l` says 8,819 lines; SOURCES.md's "8,818 requests" is one short).
    (AZURE_CODE, 8_819),
    (AZURE_CONV, 5_000),
])
def test_azure_lengths_and_no_prefix_reuse(path, requests):
    import csv
    rows = list(csv.DictReader(path.open()))
    inp = [int(r["ContextTokens"]) for r in rows]
    out = [int(r["GeneratedTokens"]) for r in rows]
    m = measure_trace(path)
    s = m.summary
    assert s["format"] == "azure" and s["requests"] == requests == len(rows)
    for key, vals in (("input", inp), ("output", out), ("request", [a + b for a, b in zip(inp, out)])):
        d = s["lengths"][key]
        assert d["mean"] == pytest.approx(sum(vals) / len(vals), rel=1e-12)
        assert (d["p50"], d["p90"], d["p99"], d["max"]) == tuple(_nearest_rank(vals, q) for q in (50, 90, 99, 100))
    assert s["prefix_reuse"]["measurable"] is False
    assert "token counts only" in s["prefix_reuse"]["reason"]
    assert "prefix reuse (unbounded prefix-cache hit ratio)" in s["not_measurable"]
    assert s["time"]["arrival_rate_rps"] == pytest.approx(requests / s["time"]["duration_s"])
    with pytest.raises(Exception, match="not measurable"):
        m.hit_ratio_at(10)


def test_azure_code_known_values():
    # hand-checked against the file: first request 2023-11-16 18:17:03.9799600, last 19:14:19.9280160
    # -> 3,435.948056 s; the longest prompt is 7,437 tokens
    s = measure_trace(AZURE_CODE).summary
    assert s["time"]["duration_s"] == pytest.approx(3435.948056, abs=1e-6)
    assert s["lengths"]["input"]["max"] == 7437
