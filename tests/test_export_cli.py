"""`optkg export` and `optkg check --diagram` as a user runs them: paths, overwrites, formats, errors,
`--all` / `--all --check`, and the stack diagram drawn from a check report."""
from __future__ import annotations

import json

import pytest

from export_helpers import REPO, TINY, dot_edges, dot_nodes
from kg.knowledge.catalog import load_catalog
from kg.output.diagrams.stack import stack_diagram, stack_diagram_build


def test_writes_exactly_the_path_asked_for(cli, tmp_path):
    before = set(tmp_path.iterdir())
    code, out, err = cli("export", "map", "--catalog", str(TINY), "-o", str(tmp_path / "m.svg"))
    assert code == 0, err
    assert set(tmp_path.iterdir()) - before == {tmp_path / "m.svg"}  # no temp file left behind
    assert (tmp_path / "m.svg").read_bytes().lstrip().startswith(b"<?xml")


def test_refuses_to_overwrite_without_force(cli, tmp_path):
    p = tmp_path / "g.dot"
    p.write_text("mine\n")
    code, _, err = cli("export", "graph", "--catalog", str(TINY), "-o", str(p))
    assert code == 2 and "refusing to overwrite" in err and p.read_text() == "mine\n"
    assert cli("export", "graph", "--catalog", str(TINY), "-o", str(p), "--force")[0] == 0
    assert p.read_text().startswith('digraph "coupling_graph"')


@pytest.mark.parametrize("suffix,magic", [(".png", b"\x89PNG"), (".pdf", b"%PDF"), (".mmd", b"%% optkg"),
                                          (".graphml", b"<?xml"), (".json", b"{"), (".gv", b"digraph")])
def test_format_from_suffix(cli, tmp_path, suffix, magic):
    p = tmp_path / f"g{suffix}"
    assert cli("export", "graph", "--catalog", str(TINY), "-o", str(p))[0] == 0
    assert p.read_bytes().startswith(magic)


def test_stdout_and_format_errors(cli, tmp_path):
    code, out, _ = cli("export", "graph", "--catalog", str(TINY), "--format", "mermaid")
    assert code == 0 and out.startswith("%% optkg coupling graph")
    code, out, _ = cli("export", "map", "--catalog", str(TINY))  # default: SVG on stdout
    assert code == 0 and "<svg" in out
    for args, msg in [
        (["export", "map", "--format", "png"], "--format png is binary: give a file with -o"),
        (["export", "map", "-o", str(tmp_path / "m.txt")], "cannot tell the format from '.txt'"),
        (["export", "map", "--format", "mermaid"], "a map diagram can be written as svg, png, pdf, dot, json"),
        (["export", "graph", "--focus", "nope"], "unknown technique or property 'nope'"),
        (["export", "graph", "--focus", "beta-cache", "--depth", "-1"], "--depth: expected 0 or more hops"),
        (["export", "map", "--focus", "beta-cache"], "--focus, --depth, --no-properties and --engine go with"),
        (["export", "graph", "--gaps"], "--gaps, --combined and --no-combined go with `optkg export map`"),
        (["export", "map", "--gaps", "--combined"], "--gaps marks cells of the stage panels"),
        (["export", "graph", "--status", "retired"], "--status: unknown value 'retired'"),
        (["export", "graph", "--focus", "beta-cache", "--tag", "kernels"], "technique 'beta-cache' is excluded by"),
        (["export"], "say what to draw"),
        (["export", "map", "--check"], "--check goes with --all"),
    ]:
        code, _, err = cli(*args, "--catalog", str(TINY))
        assert code == 2, args
        assert msg in err, (args, err)
        assert "Traceback" not in err


def test_graph_filters_and_no_properties(cli):
    code, out, _ = cli("export", "graph", "--catalog", str(TINY), "--format", "dot", "--stage", "train",
                       "--no-properties")
    # train: alpha-split, delta-kernel, gamma-link; couplings among them: delta -> alpha
    assert sorted(dot_nodes(out)) == ["t:alpha-split", "t:delta-kernel", "t:gamma-link"]
    assert dot_edges(out) == [("t:delta-kernel", "t:alpha-split")]
    code, out, _ = cli("export", "graph", "--catalog", str(TINY), "--format", "json", "--focus", "replica_factor")
    data = json.loads(out)  # a property can be the focus; depth 1: the three techniques coupling to it
    assert sorted(n["id"] for n in data["nodes"]) == ["p:replica_factor", "t:alpha-split", "t:beta-cache",
                                                      "t:epsilon-queue"]


def test_all_then_check(cli, tmp_path):
    out = tmp_path / "exports"
    code, _, err = cli("export", "--all", "--catalog", str(TINY), "-o", str(out))
    assert code == 0, err
    names = sorted(p.name for p in out.iterdir())
    for must in ("map.svg", "map.dot", "map.json", "map-combined.png", "map-combined.svg", "map-gaps.svg", "gaps.md",
                 "gaps.json", "graph.svg", "graph.dot", "graph.mmd", "graph.graphml", "graph.json", "README.md",
                 "manifest.json"):
        assert must in names
    assert not [n for n in names if n.startswith(".")]  # no temp files
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["files"]["graph.svg"]["source_sha256"] and manifest["files"]["graph.dot"]["source_sha256"] is None
    code, text, _ = cli("export", "--all", "--check", "--catalog", str(TINY), "-o", str(out))
    assert code == 0 and "is up to date" in text
    # a stale text file, a hand-edited image and a stray file are each reported; exit 1
    (out / "graph.mmd").write_text("flowchart LR\n")
    (out / "map-combined.png").write_bytes((out / "map-combined.png").read_bytes() + b"\0")
    (out / "notes.txt").write_text("x")
    code, text, _ = cli("export", "--all", "--check", "--catalog", str(TINY), "-o", str(out))
    assert code == 1
    assert f"{out / 'graph.mmd'}: stale" in text
    assert f"{out / 'map-combined.png'}: changed since it was generated" in text
    assert f"{out / 'notes.txt'}: not written by `optkg export --all`" in text
    # a catalog change makes the images stale too (their DOT source digest changes)
    cat = tmp_path / "cat"
    __import__("shutil").copytree(TINY, cat)
    t = cat / "techniques" / "beta-cache.yaml"
    t.write_text(t.read_text().replace("name: Beta cache", "name: Beta block cache"))
    code, text, _ = cli("export", "--all", "--check", "--catalog", str(cat), "-o", str(out))
    assert code == 1 and f"{out / 'graph.svg'}: stale (drawn from an older diagram source)" in text
    assert cli("export", "--all", "--check", "--stage", "train", "--catalog", str(TINY), "-o", str(out))[0] == 2


# ----------------------------------------------------------------------------------------------
# stack diagram

REPORT = {
    "schema_version": "1.0", "kind": "check",
    "stack": {"name": "tiny stack", "model": "m", "engine": "vllm", "engine_version": None, "hardware": None,
              "gpu_count": None, "techniques": {"alpha-split": {"split_size": 8}, "delta-kernel": {},
                                                "epsilon-queue": {}}},
    "findings": [
        {"rule_id": "replica", "title": "Split replicates state", "severity": "warning", "message": "copied twice",
         "techniques": ["alpha-split"], "numbers": {"replication_factor": 2, "bytes_per_token": 48128},
         "cost_dimension": "storage", "from_dimension": "compute",
         "fixes": [{"technique": "beta-cache", "name": "Beta cache"}], "fix": "cache it"},
        {"rule_id": "pair-clash", "title": "Queue and kernel clash", "severity": "error", "message": "clash",
         "techniques": ["epsilon-queue", "delta-kernel"], "numbers": {}, "cost_dimension": "network",
         "from_dimension": "compute", "fixes": [], "fix": ""},
        {"rule_id": "model-only", "title": "About the model", "severity": "info", "message": "m",
         "techniques": [], "numbers": {}, "cost_dimension": None, "from_dimension": None, "fixes": [], "fix": ""},
    ],
}


def test_stack_view_by_hand():
    cat, _ = load_catalog(TINY, use_cache=False)
    d = stack_diagram_build(REPORT, cat)
    g = d.graph
    # the stack's three techniques, the property behind 'replica', and the suggested fix
    assert sorted(g.nodes) == ["p:replica_factor", "t:alpha-split", "t:beta-cache", "t:delta-kernel",
                               "t:epsilon-queue"]
    assert g.nodes["t:beta-cache"]["role"] == "fix"
    edges = {(u, v, k): dd for u, v, k, dd in g.edges(keys=True, data=True)}
    # couplings among the stack: delta -> alpha and epsilon -> alpha (both requires); no finding fired on
    # them, so they are drawn 'held' (grey), not in their kind's colour (issue 12)
    assert edges[("t:delta-kernel", "t:alpha-split", "delta-kernel#0")]["role"] == "held"
    assert edges[("t:epsilon-queue", "t:alpha-split", "epsilon-queue#1")]["role"] == "held"
    # 'replica' matches alpha's declared coupling compute -> storage: drawn red with its numbers
    fired = edges[("t:alpha-split", "p:replica_factor", "alpha-split#0")]
    assert fired["role"] == "fired" and fired["label"] == "replica\nreplication ×2; bytes per token 48,128"
    # its fix points dashed at the property the finding runs through
    assert edges[("t:beta-cache", "p:replica_factor", "fix:replica:beta-cache")]["role"] == "fix"
    # 'pair-clash' has no catalog coupling compute -> network between its two techniques: a synthetic red edge
    assert edges[("t:epsilon-queue", "t:delta-kernel", "finding:pair-clash")]["label"] == "pair-clash"
    assert len(edges) == 5
    line = next(x for x in d.dot.splitlines() if '"t:alpha-split" -> "p:replica_factor"' in x)
    assert 'color="#d62728"' in line and "replication ×2" in line
    line = next(x for x in d.dot.splitlines() if '"t:beta-cache" -> "p:replica_factor"' in x)
    assert 'style="dashed"' in line and 'color="#1b9e77"' in line
    assert "About the model" in d.dot  # findings without techniques are listed under the drawing


def test_stack_diagram_writes_by_suffix(tmp_path):
    cat, _ = load_catalog(TINY, use_cache=False)
    p = stack_diagram(REPORT, cat, tmp_path / "s.svg")
    assert b"replication" in p.read_bytes()
    with pytest.raises(Exception, match="refusing to overwrite"):
        stack_diagram(REPORT, cat, tmp_path / "s.svg")
    with pytest.raises(Exception, match="--diagram: cannot tell the format"):
        stack_diagram(REPORT, cat, tmp_path / "s.txt")


def test_check_diagram_on_the_shipped_example(cli, tmp_path):
    # Qwen3-235B-A22B (4 KV heads) at tp_size 8: kv-head-replication fires with replication_factor 2
    # (8 / 4); the diagram draws tensor-parallelism's coupling into kv_head_replication red with
    # "replication ×2" and decode-context-parallelism dashed as the fix.
    out = tmp_path / "stack.dot"
    code, _, err = cli("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--diagram", str(out),
                       "--fail-on", "never")
    assert code == 0, err
    dot = out.read_text()
    line = next(x for x in dot.splitlines() if '"t:tensor-parallelism" -> "p:kv_head_replication"' in x)
    assert 'color="#d62728"' in line and "kv-head-replication" in line and "replication ×2" in line
    fix = [x for x in dot.splitlines() if x.strip().startswith('"t:decode-context-parallelism" ->')]
    assert fix and 'style="dashed"' in fix[0]
    assert (tmp_path / "stack.svg").exists() is False  # only the file asked for
