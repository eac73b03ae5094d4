"""Golden files and determinism for `optkg export` on the hand-made tiny catalog.

The tiny catalog (tests/fixtures/catalogs/tiny) has 5 techniques, 1 property and 6 couplings:
  alpha-split   --causes-->         replica_factor  (compute -> storage)
  beta-cache    --mitigates-->      replica_factor  (storage -> storage: no crossing, no label)
  gamma-link    --conflicts_with--> beta-cache      (network -> storage)
  delta-kernel  --requires-->       alpha-split     (storage -> compute)
  epsilon-queue --amplifies-->      replica_factor  (compute -> storage)
  epsilon-queue --requires-->       alpha-split     (compute -> network)
Golden files live in tests/golden/; regenerate with OPTKG_UPDATE_GOLDEN=1 after checking the
diff by eye (the content assertions below must keep holding).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import networkx as nx
import pytest

from export_helpers import GOLDEN, TINY, dot_edges, dot_nodes, parse_mermaid
from kg.knowledge.catalog import load_catalog
from kg.output.diagrams.graphview import coupling_graph
from kg.output.diagrams.map import coordinate_map
from kg.output.diagrams.matrix import matrix_diagram
from kg.analyses.gaps import find_gaps
from kg.output.report import to_json
from kg.engine.rules import load_ruleset

HAND_MATRIX = {
    "schema_version": "1.0", "kind": "matrix",
    "techniques": ["alpha-split", "beta-cache", "delta-kernel", "epsilon-queue", "gamma-link"],
    "cells": [
        {"a": "beta-cache", "b": "gamma-link", "mark": "conflict", "condition": "tp_size > 8", "engines": [],
         "rule": None, "sources": []},
        {"a": "alpha-split", "b": "epsilon-queue", "mark": "conditional", "condition": "split_size > heads",
         "engines": ["vllm"], "rule": "fixture-rule", "sources": []},
    ],
}


@pytest.fixture(scope="module")
def tiny():
    cat, problems = load_catalog(TINY, use_cache=False)
    assert not problems, [p.one_line() for p in problems]
    return cat


def _products(cat):
    gaps = find_gaps(cat, load_ruleset("gaps"))
    graph = coupling_graph(cat)
    return {
        "tiny-graph.dot": graph.text("dot"),
        "tiny-graph.mmd": graph.text("mermaid"),
        "tiny-graph.json": graph.text("json"),
        "tiny-graph.graphml": graph.text("graphml"),
        "tiny-focus-beta-cache.dot": coupling_graph(cat, focus="beta-cache", depth=1).text("dot"),
        "tiny-map.dot": coordinate_map(cat).text("dot"),
        "tiny-map.json": coordinate_map(cat).text("json"),
        "tiny-map-gaps.dot": coordinate_map(cat, combined=False, gaps=gaps).text("dot"),
        "tiny-gaps.json": to_json(gaps),
        "tiny-matrix.dot": matrix_diagram(HAND_MATRIX, cat).text("dot"),
    }


def test_golden_files(tiny):
    products = _products(tiny)
    if os.environ.get("OPTKG_UPDATE_GOLDEN"):
        GOLDEN.mkdir(exist_ok=True)
        for name, text in products.items():
            (GOLDEN / name).write_text(text, encoding="utf-8")
    for name, text in products.items():
        assert (GOLDEN / name).read_text(encoding="utf-8") == text, f"{name} differs from tests/golden/{name}"


def test_graph_dot_content(tiny):
    dot = coupling_graph(tiny).text("dot")
    # one node statement per technique and per property, one edge statement per coupling
    assert sorted(dot_nodes(dot)) == ["p:replica_factor", "t:alpha-split", "t:beta-cache", "t:delta-kernel",
                                      "t:epsilon-queue", "t:gamma-link"]
    assert sorted(dot_edges(dot)) == sorted([
        ("t:alpha-split", "p:replica_factor"), ("t:beta-cache", "p:replica_factor"),
        ("t:delta-kernel", "t:alpha-split"), ("t:epsilon-queue", "p:replica_factor"),
        ("t:epsilon-queue", "t:alpha-split"), ("t:gamma-link", "t:beta-cache")])
    # edges styled by kind and labelled with the crossing; a same-dimension edge carries no label
    line = next(x for x in dot.splitlines() if '"t:gamma-link" -> "t:beta-cache"' in x)
    assert 'color="#d62728"' in line and 'arrowhead="tee"' in line and "label=<network → storage>" in line
    line = next(x for x in dot.splitlines() if '"t:beta-cache" -> "p:replica_factor"' in x)
    assert 'style="dashed"' in line and "label=" not in line.replace("fontcolor", "")
    # clustered by layer, the whole graph laid out on the coordinate grid with fixed positions
    assert 'layout="nop2"' in dot and 'subgraph "cluster_L2"' in dot and 'pos="' in dot
    # gamma-link spans L1-L2: drawn once, in the L1 band, with its span written under the name
    assert dot.count('"t:gamma-link" [') == 1 and "L1–L2" in dot


def test_focus_uses_dot_and_the_neighbourhood(tiny):
    d = coupling_graph(tiny, focus="beta-cache", depth=1)
    # depth 1 around beta-cache: itself, gamma-link (conflicts_with it) and replica_factor (it
    # mitigates it); alpha-split and epsilon-queue are two hops away
    assert sorted(d.graph.nodes) == ["p:replica_factor", "t:beta-cache", "t:gamma-link"]
    assert 'layout="dot"' in d.dot and "start=" not in d.dot
    d2 = coupling_graph(tiny, focus="beta-cache", depth=2)
    assert sorted(d2.graph.nodes) == ["p:replica_factor", "t:alpha-split", "t:beta-cache", "t:epsilon-queue",
                                      "t:gamma-link"]
    # the force-directed alternative carries its fixed seed
    assert "start=7" in coupling_graph(tiny, engine="fdp").dot


def test_mermaid_parses_back_to_the_same_counts(tiny):
    text = coupling_graph(tiny).text("mermaid")
    nodes, edges, other = parse_mermaid(text)
    assert other == []
    assert len(nodes) == 6 and len(edges) == 6
    assert nodes["t_gamma_link"] == "Gamma link" and nodes["p_replica_factor"] == "Replica factor"
    arrows = {(a, b): (arrow, lab) for a, arrow, lab, b in edges}
    assert arrows[("t_gamma_link", "t_beta_cache")] == ("--x", "network → storage")
    assert arrows[("t_beta_cache", "p_replica_factor")] == ("-.->", "")
    assert arrows[("t_epsilon_queue", "p_replica_factor")] == ("==>", "compute → storage")
    assert arrows[("t_delta_kernel", "t_alpha_split")] == ("--o", "storage → compute")


def test_json_and_graphml_round_trip(tiny):
    d = coupling_graph(tiny)
    data = json.loads(d.text("json"))
    assert data["kind"] == "graph" and data["schema_version"] == "1.0"
    assert len(data["nodes"]) == 6 and len(data["links"]) == 6
    g = nx.read_graphml(__import__("io").BytesIO(d.render("graphml")))
    assert g.number_of_nodes() == 6 and g.number_of_edges() == 6
    assert g.nodes["t:delta-kernel"]["label"] == "Delta kernel"
    assert g.nodes["t:alpha-split"]["stages"] == "train, serve"


def test_map_cells_by_hand(tiny):
    data = json.loads(coordinate_map(tiny).text("json"))
    assert data["layers"] == ["L3", "L2", "L1"]  # L7..L1 order: top layer first
    panels = {p["stage"]: p for p in data["panels"]}
    assert list(panels) == ["train", "serve", "combined"]
    cell = {(c["layer"], c["dimension"]): c["techniques"] for c in panels["train"]["cells"]}
    # train: alpha (L2 compute), delta (L2 storage), gamma (L1..L2 network) -> 4 occupied of 9
    assert cell[("L2", "compute")] == ["alpha-split"]
    assert cell[("L2", "network")] == ["gamma-link"] and cell[("L1", "network")] == ["gamma-link"]
    assert panels["train"]["empty"] == 9 - 4 and panels["serve"]["empty"] == 9 - 4
    comb = {(c["layer"], c["dimension"]): c["techniques"] for c in panels["combined"]["cells"]}
    assert comb[("L2", "compute")] == ["alpha-split"] and comb[("L3", "compute")] == ["epsilon-queue"]
    assert panels["combined"]["techniques"] == 5


def test_map_filters(tiny):
    from kg.output.diagrams.filters import Filters
    data = json.loads(coordinate_map(tiny, Filters.from_lists(stages=["serve"], tags=["caching,batching"])).text("json"))
    assert [p["stage"] for p in data["panels"]] == ["serve", "combined"]
    assert sorted(data["techniques"]) == ["beta-cache", "epsilon-queue"]
    data = json.loads(coordinate_map(tiny, Filters.from_lists(layers=["L1"], dimensions=["network"])).text("json"))
    assert data["layers"] == ["L1"] and data["dimensions"] == ["network"]
    assert data["panels"][0]["cells"] == [{"layer": "L1", "dimension": "network", "techniques": ["gamma-link"],
                                           "count": 1}]


def test_map_gaps_view_marks_ranked_and_annotated_cells(tiny):
    gaps = find_gaps(tiny, load_ruleset("gaps"))
    dot = coordinate_map(tiny, combined=False, gaps=gaps).text("dot")
    # the two cells with a reason (score 2) are the top gaps; annotated cells are grey with their status
    # (score-0 gaps get the plain empty mark; their rank is only in the tooltip)
    assert "<B>gap #1</B>" in dot and "<B>gap #2</B>" in dot and "<B>gap #3</B>" not in dot
    assert dot.count("<I>out-of-scope</I>") == 3 and dot.count("<I>impossible</I>") == 1


def _run(args, seed):
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    r = subprocess.run([sys.executable, "-m", "kg.cli", *args], capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


@pytest.mark.parametrize("what,fmt", [("graph", "dot"), ("graph", "mermaid"), ("graph", "json"), ("map", "dot"),
                                      ("map", "json"), ("graph", "svg")])
def test_byte_identical_across_runs_and_hash_seeds(what, fmt):
    args = ["export", what, "--catalog", str(TINY), "--format", fmt]
    a, b = _run(args, 1), _run(args, 4242)
    assert a == b
    golden = {("graph", "dot"): "tiny-graph.dot", ("graph", "mermaid"): "tiny-graph.mmd",
              ("graph", "json"): "tiny-graph.json", ("map", "dot"): "tiny-map.dot", ("map", "json"): "tiny-map.json"}
    if (what, fmt) in golden:
        assert a == (GOLDEN / golden[(what, fmt)]).read_bytes()


def test_png_twice_is_identical(tiny, tmp_path):
    from kg.output.diagrams.render import write_diagram
    d = coordinate_map(tiny)
    a, b = write_diagram(d, tmp_path / "a.png"), write_diagram(d, tmp_path / "b.png")
    assert a.read_bytes() == b.read_bytes() and a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
