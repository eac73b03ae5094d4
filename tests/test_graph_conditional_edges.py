"""Graph exports draw a coupling that holds only under a condition dashed and lighter; --depth needs --focus."""
from __future__ import annotations

from kg.cli import main
from kg.knowledge.catalog import load_catalog
from kg.output.diagrams.graphview import _edge_attrs, graph_view
from kg.output.diagrams.style import CONDITIONAL_ALPHA, CONDITIONAL_PENWIDTH, EDGE_STYLES


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_export_depth_without_focus_is_an_error(capsys, tmp_path):
    code, out, err = run(["export", "graph", "--depth", "2", "-o", str(tmp_path / "g.dot")], capsys)
    assert code == 2 and err.count("\n") == 1 and "--depth" in err and "--focus" in err
    assert not (tmp_path / "g.dot").exists()


def test_conditional_coupling_is_dashed_and_lighter_unconditional_is_not():
    cond = _edge_attrs({"kind": "conflicts_with", "condition": "tp_size > 1", "mechanism": "m"})
    plain = _edge_attrs({"kind": "conflicts_with", "condition": "", "mechanism": "m"})
    assert plain["style"] == "bold" and plain["color"] == "#d62728"
    assert cond["style"] == "dashed" and cond["color"] == "#d62728" + CONDITIONAL_ALPHA == "#d6272880"
    assert cond["penwidth"] == CONDITIONAL_PENWIDTH == "0.8"
    assert EDGE_STYLES["conflicts_with"]["style"] == "bold"


def test_speculative_decoding_vs_tp_drawn_conditional(capsys):
    cat = load_catalog()[0]
    vg = graph_view(cat, focus="speculative-decoding", depth=1)
    edges = [(u, v, d) for u, v, d in vg.edges(data=True)
             if {u, v} == {"t:speculative-decoding", "t:tensor-parallelism"} and d["kind"] == "conflicts_with"]
    assert edges and all(d["condition"] for _, _, d in edges)
    assert all(_edge_attrs(d)["style"] == "dashed" for _, _, d in edges)
    code, out, _ = run(["export", "graph", "--focus", "speculative-decoding", "--format", "dot"], capsys)
    assert "the coupling holds only under its condition" in out  # the legend says so
