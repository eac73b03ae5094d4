"""Every diagram of the shipped catalog: content checks, the 5-second budget, and fresh exports/.

Counts are taken from the YAML files directly (not from kg.knowledge.graph), so a diagram that drops or
duplicates a technique or a coupling fails here.
"""
from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import textwrap
import time

import networkx as nx
import pytest

from export_helpers import REPO, dot_edges, dot_nodes, parse_mermaid, svg_node_texts
from kg.knowledge.catalog import load_catalog
from kg.output.diagrams.graphview import GRID_WRAP, coupling_graph
from kg.output.diagrams.map import coordinate_map
from kg.output.diagrams.style import EDGE_STYLES
from kg.knowledge.schema import COUPLING_KINDS

BUDGET_S = 5.0


@pytest.fixture(scope="module")
def graph(catalog):
    return coupling_graph(catalog)


def _declared_couplings(catalog) -> int:
    return sum(len(t.get("couplings") or []) for t in catalog.techniques.values()) + \
        sum(len(p.get("effects") or []) for p in catalog.properties.values())


def test_every_coupling_kind_has_a_style():
    assert set(EDGE_STYLES) == set(COUPLING_KINDS)


def test_dot_has_one_node_per_technique_and_one_edge_per_coupling(catalog, graph):
    nodes = dot_nodes(graph.dot)
    assert sorted(n for n in nodes if n.startswith("t:")) == sorted(f"t:{t}" for t in catalog.techniques)
    assert len(nodes) == len(set(nodes))
    assert len(dot_edges(graph.dot)) == _declared_couplings(catalog)
    coupled = {c["property"] for t in catalog.techniques.values() for c in t.get("couplings") or [] if c.get("property")}
    assert {n for n in nodes if n.startswith("p:")} >= {f"p:{p}" for p in coupled}


def test_svg_contains_each_technique_name(catalog, graph):
    texts = svg_node_texts(graph.render("svg"))
    for tid, t in catalog.techniques.items():
        # grid nodes wrap the name over lines of GRID_WRAP characters; compare the words in order
        want = " ".join(" ".join(textwrap.wrap(t["name"], GRID_WRAP, break_on_hyphens=False)).split())
        assert texts[f"t:{tid}"].startswith(want), (tid, texts[f"t:{tid}"])


def test_mermaid_parses_its_own_counts_back(catalog, graph):
    nodes, edges, other = parse_mermaid(graph.text("mermaid"))
    assert other == []
    assert len(edges) == _declared_couplings(catalog)
    assert len([n for n in nodes if n.startswith("t_")]) == len(catalog.techniques)
    assert {nodes[f"t_{tid.replace('-', '_')}"] for tid in catalog.techniques} == \
           {t["name"] for t in catalog.techniques.values()}


def test_graphml_and_json_counts(catalog, graph):
    g = nx.read_graphml(io.BytesIO(graph.render("graphml")))
    assert g.number_of_edges() == _declared_couplings(catalog)
    assert sum(1 for _, d in g.nodes(data=True) if d.get("type") == "technique") == len(catalog.techniques)
    data = json.loads(graph.render("json"))
    assert len(data["links"]) == _declared_couplings(catalog)


def test_map_lists_every_technique_in_its_cells(catalog):
    data = json.loads(coordinate_map(catalog).text("json"))
    panels = {p["stage"]: p for p in data["panels"]}
    for tid in catalog.techniques:
        for s, layer, d in catalog.cells(tid):
            cell = next(c for c in panels[s]["cells"] if c["layer"] == layer and c["dimension"] == d)
            assert tid in cell["techniques"]
            comb = next(c for c in panels["combined"]["cells"] if c["layer"] == layer and c["dimension"] == d)
            assert tid in comb["techniques"]
    for s in catalog.axes.stage_ids:  # no technique in a cell it does not occupy
        total = sum(c["count"] for c in panels[s]["cells"])
        assert total == sum(1 for t in catalog.techniques for c in catalog.cells(t) if c[0] == s)


EXPORTS = [
    ("map", "svg", []), ("map", "png", []), ("map", "pdf", []), ("map", "png", ["--gaps"]),
    ("graph", "svg", []), ("graph", "png", []), ("graph", "pdf", []), ("graph", "mermaid", []),
    ("graph", "graphml", []), ("graph", "json", []),
    ("graph", "svg", ["--focus", "tensor-parallelism", "--depth", "2"]),
    ("graph", "png", ["--focus", "tensor-parallelism", "--depth", "2"]),
    ("matrix", "svg", []), ("matrix", "png", []),
]


@pytest.mark.parametrize("what,fmt,extra", EXPORTS, ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_each_full_catalog_export_finishes_in_budget(what, fmt, extra, tmp_path):
    if what == "matrix":
        pytest.importorskip("kg.analyses.matrix")
    out = tmp_path / f"out.{ {'mermaid': 'mmd'}.get(fmt, fmt) }"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "kg.cli", "export", what, *extra, "-o", str(out)],
                       capture_output=True, timeout=60, env=dict(os.environ))
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 0, r.stderr.decode()
    if fmt == "json":
        assert json.loads(out.read_text())["kind"] == "graph"
    else:
        head = out.read_bytes()[:400]
        magic = {"svg": b"<svg", "png": b"\x89PNG", "pdf": b"%PDF-", "mermaid": b"flowchart LR",
                 "graphml": b"<graphml"}[fmt]
        assert magic in head, head[:80]
    # The whole command: process start, catalog load, layout and render, Graphviz included (a
    # waited-for grandchild is counted in RUSAGE_CHILDREN). CPU seconds, not wall seconds: on a
    # shared CI box wall time includes waiting for other jobs. Wall time is in the message.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < BUDGET_S, f"{what} {fmt} {extra}: {cpu:.2f} s CPU ({wall:.2f} s wall)"


def test_committed_exports_are_fresh(cli):
    code, out, err = cli("export", "--all", "--check", "-o", str(REPO / "exports"))
    assert code == 0, out + err + "\nrun `make export` (optkg export --all) and commit exports/"
