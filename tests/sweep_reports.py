"""Reports of every combination of a small sweep, made incrementally and afresh (shared by the sweep tests)."""
from __future__ import annotations


def incremental_and_fresh(catalog, check_rules, cmd: str, axes, gpus: int):
    """(incremental reports, fresh reports) of every combination of ``cmd`` swept over ``axes`` on ``gpus`` H200,
    in sweep order."""
    from kg.analyses.sweep import build_plan
    from kg.analyses.sweep_eval import Evaluator
    from kg.engines.launch import parse_command
    base = parse_command(cmd, catalog, "vllm")
    base.hardware, base.gpu_count = catalog.resolve_hardware("H200"), gpus
    plan = build_plan(base, catalog, axes)
    inc, fresh = Evaluator(plan, catalog, check_rules), Evaluator(plan, catalog, check_rules, incremental=False)
    return ([inc.check(inc.stack(i)[0]).to_dict(explain=True) for i in range(plan.size())],
            [fresh.check(fresh.stack(i)[0]).to_dict(explain=True) for i in range(plan.size())])
