"""A 10^5-configuration rules-only sweep through worker processes and through a local Ray: same result, and
each path's rate (``make bench-sweep``; minutes on two cores, so not part of ``make bench``).

Sweep: Qwen3-235B-A22B on 64 H200, TP 1..50 x DCP 1..40 x PP 1..5 x KV dtype {auto, fp8} x DP {1, 2, 4, 8, 16}
= 100,000 combinations, ``workload=None`` (rules and KV only: the rate issue 29 measures).
Usage: ``python tests/bench/sweep_scale.py [--jobs N] [--small]`` (``--small``: 1,000 combinations).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    from kg.knowledge.catalog import load_catalog
    from kg.engine.rules import load_ruleset
    from kg.engines.launch import parse_command
    from kg.analyses.sweep import sweep
    cat, _ = load_catalog()
    rules = load_ruleset("check")
    base = parse_command("vllm serve Qwen/Qwen3-235B-A22B --max-model-len 32768", cat, "vllm")
    base.hardware, base.gpu_count = cat.resolve_hardware("H200"), 64
    axes = ({"tp_size": list(range(1, 11)), "dcp_size": list(range(1, 11)), "pp_size": [1, 2, 4, 8, 16],
             "kv_cache_dtype": ["auto", "fp8"]} if args.small else
            {"tp_size": list(range(1, 51)), "dcp_size": list(range(1, 41)), "pp_size": [1, 2, 3, 4, 5],
             "kv_cache_dtype": ["auto", "fp8"], "dp_size": [1, 2, 4, 8, 16]})
    results = {}
    for ex in ("local", "ray"):
        t = time.perf_counter()
        r = sweep(base, cat, rules, axes=axes, executor=ex, jobs=args.jobs).to_dict()
        dt = time.perf_counter() - t
        n = r["summary"]["combinations"]
        results[ex] = r
        print(f"{ex:>5}: {n:,} combinations in {dt:,.1f} s = {n / dt:,.0f} stacks/s "
              f"({r['summary']['valid_and_fit']:,} valid and fit)", flush=True)
    same = results["local"] == results["ray"]
    print(f"identical results: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
