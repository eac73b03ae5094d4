"""`optkg gaps` over the shipped catalog: every cell accounted for, annotations reasoned and not
contradicted, ranking ordered and driven by the rules in rules/gaps.yaml."""
from __future__ import annotations

import pytest

from kg.knowledge.catalog import load_catalog
from kg.output.diagrams.map import coordinate_map
from kg.analyses.gaps import ANNOTATION_STATUSES, find_gaps, load_annotations
from kg.engine.rules import load_ruleset


@pytest.fixture(scope="module")
def report(catalog):
    return find_gaps(catalog, load_ruleset("gaps"))


def test_every_cell_is_accounted_for(catalog, report):
    ax = catalog.axes
    s = report["summary"]
    assert s["cells"] == len(ax.stage_ids) * len(ax.layer_ids) * len(ax.dimension_ids)
    occupied = {c for t in catalog.techniques for c in catalog.cells(t)}
    assert s["occupied"] == len(occupied)
    listed = {(d["stage"], d["layer"], d["dimension"]) for d in report["directions"] + report["annotated"]}
    assert len(listed) == s["empty"] == s["cells"] - len(occupied)
    assert not listed & occupied


def test_annotations_are_reasoned_and_not_contradicted(catalog, report):
    anns = load_annotations(catalog)
    for a in anns:
        assert a.status in ANNOTATION_STATUSES and len(a.reason) >= 40, a
    assert report["conflicts"] == [], report["conflicts"]
    for a in report["annotated"]:
        assert (a["stage"], a["layer"], a["dimension"]) not in {c for t in catalog.techniques
                                                                 for c in catalog.cells(t)}


def test_ranking_is_ordered_and_comes_from_the_rules(report):
    ds = report["directions"]
    assert [d["rank"] for d in ds] == list(range(1, len(ds) + 1))
    assert all(a["score"] >= b["score"] for a, b in zip(ds, ds[1:]))
    ids = set(report["rules"])
    assert all(r["rule"] in ids for d in ds for r in d["reasons"])
    # the most promising cells have several independent reasons
    assert len(ds[0]["reasons"]) >= 2
    assert len({r["rule"] for d in ds for r in d["reasons"]}) >= 4


def test_gaps_view_highlights_the_top_cells(catalog, report):
    dot = coordinate_map(catalog, combined=False, gaps=report).text("dot")
    assert "<B>gap #1</B>" in dot and "<B>gap #10</B>" in dot
    assert dot.count("<I>out-of-scope</I>") + dot.count("<I>impossible</I>") == len(report["annotated"])


def test_text_view_fits_100_columns(catalog, report):
    # reasons name many techniques and couplings: a long reason wraps under its own indent instead of running on
    from kg.analyses.gaps import render_text
    text = render_text(report, catalog.axes)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "        - [severe] L4 in training holds" in text
