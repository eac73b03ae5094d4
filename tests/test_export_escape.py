"""Hostile labels: names with quotes, <, &, braces, backslashes, DOT/HTML/Mermaid syntax and Chinese
(tests/fixtures/catalogs/hostile) come out of every format as text and never change the structure."""
from __future__ import annotations

import io
import json
import textwrap

import networkx as nx
import pytest

from export_helpers import HOSTILE, dot_edges, dot_nodes, parse_mermaid, svg_all_text, svg_node_texts
from kg.knowledge.catalog import load_catalog
from kg.output.diagrams.escape import dot_string, html_text, mermaid_text
from kg.output.diagrams.filters import Filters
from kg.output.diagrams.graphview import coupling_graph
from kg.output.diagrams.map import coordinate_map
from kg.output.diagrams.render import render_dot
from kg.analyses.gaps import find_gaps
from kg.engine.rules import load_ruleset


@pytest.fixture(scope="module")
def hostile():
    cat, problems = load_catalog(HOSTILE, use_cache=False)
    assert not problems, [p.one_line() for p in problems]
    return cat


def _names(cat):
    return {f"t:{tid}": t["name"] for tid, t in cat.techniques.items()} | \
           {f"p:{pid}": p["name"] for pid, p in cat.properties.items()}


def test_escape_functions_by_hand():
    # HTML-like labels: entities for & < > " ' and a doubled backslash (Graphviz shows one)
    assert html_text('a<b>&"c\'\\N') == "a&lt;b&gt;&amp;&quot;c&#x27;\\\\N"
    # quoted DOT strings: quotes escaped, each backslash written four times (DOT + escString halve it twice)
    assert dot_string('say "hi" \\N') == '"say \\"hi\\" \\\\\\\\N"'
    # control characters cannot reach XML or DOT
    assert html_text("a\x00b\nc") == "a b c"
    # Mermaid: everything outside letters, digits and a few punctuation marks becomes #code;
    assert mermaid_text('A-->B["x"]; %%|#') == "A--#62;B#91;#34;x#34;#93;#59; #37;#37;#124;#35;"
    assert mermaid_text("张量并行 TP") == "张量并行 TP"


@pytest.mark.parametrize("engine", ["grid", "dot", "fdp"])
def test_graph_svg_shows_every_hostile_name_as_text(hostile, engine):
    d = coupling_graph(hostile, engine=engine)
    svg = d.render("svg")  # Graphviz accepted the DOT
    texts = svg_node_texts(svg)  # and the SVG is well-formed XML
    names = _names(hostile)
    assert set(names) <= set(texts)
    for node, name in names.items():
        if engine == "grid":  # wrapped over lines: compare the words
            assert texts[node].startswith(" ".join(" ".join(textwrap.wrap(name, 22, break_on_hyphens=False)).split()))
        else:
            assert texts[node].startswith(" ".join(name.split())), (node, texts[node])
    # \N and \G stayed text: the node id and the graph name do not appear in place of them
    assert "back\\slash \\N \\G \\n \\l" in texts["t:backslash-tech"]
    # the name that looks like an HTML table is text, not a table
    # (the grid wraps long words, so compare without spaces)
    assert texts["t:html-tech"].replace(" ", "").startswith("<TABLE><TR><TD>notatable</TD></TR></TABLE>")
    # tooltips (mechanisms, conditions) survive too
    tips = svg_all_text(svg)
    assert 'A mechanism with "quotes", <tags> & ampersands, {braces} and back\\slashes.' in tips
    assert "Needs the quoted technique (fixture) \\N." in tips


def test_graph_structure_unchanged_by_names(hostile):
    d = coupling_graph(hostile)
    assert sorted(dot_nodes(d.dot)) == sorted(_names(hostile))
    assert len(dot_edges(d.dot)) == 6  # quote 2, zh 1, backslash 1, html 1, mermaid 1
    nodes, edges, other = parse_mermaid(d.text("mermaid"))
    assert other == [], other  # no injected statement
    assert len(nodes) == 6 and len(edges) == 6
    names = _names(hostile)
    assert {k.replace(":", "_", 1).replace("-", "_"): v for k, v in names.items()} == nodes
    g = nx.read_graphml(io.BytesIO(d.render("graphml")))
    assert {n: g.nodes[n]["label"] for n in g.nodes} == names
    data = json.loads(d.render("json"))
    assert {n["id"]: n["label"] for n in data["nodes"]} == names


def test_map_with_hostile_axis_and_technique_names(hostile):
    d = coordinate_map(hostile, gaps=find_gaps(hostile, load_ruleset("gaps")))
    svg = d.render("svg")
    text = svg_all_text(svg)
    for phrase in ['Serve "quoted" & <b>bold</b>', "Train {braces} | pipe", 'Chips <HBM> & "links"',
                   "Kernels \\N \\G back\\slash", 'Compute "FLOP/s" <&>', "Storage ]]> <!-- x -->",
                   '"Q" <&> {x}', "张量并行", "推理「阶段」"]:
        assert phrase in text, phrase
    assert json.loads(d.render("json"))["techniques"]["html-tech"]["short_name"] == "<B>x</B>"


def test_png_and_pdf_render(hostile, tmp_path):
    d = coupling_graph(hostile)
    assert d.render("png")[:8] == b"\x89PNG\r\n\x1a\n"
    pdf = d.render("pdf")
    assert pdf[:5] == b"%PDF-" and d.render("pdf") == pdf  # fixed creation date: identical bytes


def test_filters_reject_unknown_values(hostile):
    from kg.core.errors import OptkgError
    with pytest.raises(OptkgError, match="--stage: unknown value 'nope'"):
        Filters.from_lists(stages=["nope"]).validate(hostile)
    with pytest.raises(OptkgError, match="--tag: no technique has tag 'hostle' \\(did you mean hostile\\?\\)"):
        Filters.from_lists(tags=["hostle"]).validate(hostile)


def test_render_rejects_broken_dot():
    from kg.core.errors import OptkgError
    with pytest.raises(OptkgError, match="Graphviz failed"):
        render_dot("digraph { a -> }", "svg")
