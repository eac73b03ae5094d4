"""One cold run of load + validate + graph + check, for the benchmark (run in a fresh process).

Usage: ``python pipeline.py <root>`` where ``<root>`` holds ``catalog/`` and ``rules/`` (as
``synth.make_catalog`` writes them). Prints one JSON line: seconds per step (``load_validate``,
``graph``, ``rules``, ``check``, ``total``), counts, and peak RSS in MiB (``ru_maxrss``).
The catalog and rules caches are bypassed: every file is parsed and validated.
"""
from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path


def main(root: Path) -> dict:
    t0 = time.perf_counter()
    from kg.knowledge.catalog import load_catalog
    from kg.analyses.check import check_stack
    from kg.knowledge.graph import build_graph
    from kg.engine.rules import load_rules
    from kg.inputs.stack import stack_from_mapping

    t_import = time.perf_counter()
    from kg.engine import durable
    durable.KEEP_MATCHES = False  # durable-rules matches every run too: no rule matches kept by content
    cat, problems = load_catalog(root / "catalog", use_cache=False)
    if problems:
        raise SystemExit(f"{root}: {len(problems)} catalog problem(s), first: {problems[0].one_line()}")
    t_load = time.perf_counter()
    g = build_graph(cat)
    t_graph = time.perf_counter()
    rules, rule_problems = load_rules("check", root / "rules")  # uncached, like the catalog
    if rule_problems:
        raise SystemExit(f"{root}: {len(rule_problems)} rule problem(s), first: {rule_problems[0].one_line()}")
    t_rules = time.perf_counter()
    # the real stack of examples/qwen3-235b-tp8.yaml plus every synthetic technique that a rule names
    synthetic = sorted({p["technique"] for r in rules.rules for p in r.match if "technique" in p} - {"tensor-parallelism"})
    techs = [{"tensor-parallelism": {"tp_size": 8}}, "prefix-caching", "chunked-prefill"]
    techs += [t for t in synthetic if t in cat.techniques and not cat.techniques[t].get("parameters")][:200]
    stack = stack_from_mapping({"name": "bench", "model": "Qwen/Qwen3-235B-A22B", "engine": "vllm",
                                "techniques": techs, "settings": {"max_model_len": 32768, "kv_budget_gib": 40}},
                               cat)
    report = check_stack(stack, cat, rules)
    t_check = time.perf_counter()
    return {
        "import": round(t_import - t0, 4), "load_validate": round(t_load - t_import, 4),
        "graph": round(t_graph - t_load, 4), "rules": round(t_rules - t_graph, 4), "check": round(t_check - t_rules, 4),
        "total": round(t_check - t0, 4), "techniques": len(cat.techniques), "edges": g.number_of_edges(),
        "rule_count": len(rules.rules), "findings": len(report.findings), "stack_techniques": len(stack.techniques),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
