"""Stack diagrams draw a coupling red only when its finding fired (issue 12, step 6)."""
import json

from kg.output.diagrams.stack import stack_diagram_build, stack_view


def _report(cli, tmp_path, framework):
    from kg.analyses.check import check_stack
    from kg.engine.rules import load_ruleset
    from kg.inputs.stack import load_stack_file
    from kg.knowledge.catalog import load_catalog
    f = tmp_path / f"{framework}.yaml"
    f.write_text(f"model: meta-llama/Meta-Llama-3.1-8B\nframework: {framework}\n"
                 "techniques: [zero-2, {pipeline-parallelism: {pp_size: 4}}]\n")
    cat, _ = load_catalog()
    return json.loads(json.dumps(check_stack(load_stack_file(f, cat), cat, load_ruleset("check")).to_dict(), default=str))


def _edge(vg):
    return next(d for u, v, k, d in vg.edges(keys=True, data=True)
                if (u, v, k) == ("t:zero-2", "t:pipeline-parallelism", "zero-2#0"))


def test_conflict_red_only_when_it_fired(cli, tmp_path, catalog):
    fired = _report(cli, tmp_path, "deepspeed")
    held = _report(cli, tmp_path, "megatron")
    assert "coupling-zero-2-conflicts-with-pipeline-parallelism" in {f["rule_id"] for f in fired["findings"]}
    assert "coupling-zero-2-conflicts-with-pipeline-parallelism" not in {f["rule_id"] for f in held["findings"]}
    e = _edge(stack_view(fired, catalog))
    assert e["role"] == "fired" and e["rule"] == "coupling-zero-2-conflicts-with-pipeline-parallelism"
    e = _edge(stack_view(held, catalog))
    assert e["role"] == "held"
    dot = stack_diagram_build(held, catalog).dot
    line = next(x for x in dot.splitlines() if '"t:zero-2" -> "t:pipeline-parallelism"' in x)
    assert 'color="#9e9e9e"' in line and "#d62728" not in line
    dot = stack_diagram_build(fired, catalog).dot
    line = next(x for x in dot.splitlines() if '"t:zero-2" -> "t:pipeline-parallelism"' in x)
    assert 'color="#d62728"' in line
