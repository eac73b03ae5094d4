"""The compatibility-matrix image and its text form, drawn from a hand-made matrix dict in the shape
of kg.analyses.matrix.compatibility_matrix (non-ok pairs only)."""
from __future__ import annotations

import re

import pytest

from export_helpers import TINY, svg_all_text
from kg.knowledge.catalog import load_catalog
from kg.core.errors import OptkgError
from kg.output.diagrams.filters import Filters
from kg.output.diagrams.matrix import matrix_diagram, matrix_markdown

MATRIX = {
    "schema_version": "1.0", "kind": "matrix",
    "techniques": ["alpha-split", "beta-cache", "delta-kernel", "epsilon-queue", "gamma-link"],
    "cells": [
        {"a": "beta-cache", "b": "gamma-link", "mark": "conflict", "condition": "tp_size > 8", "engines": ["vllm"],
         "rule": "fixture-conflict", "sources": []},
        {"a": "alpha-split", "b": "epsilon-queue", "mark": "conditional", "condition": "split_size > heads",
         "engines": [], "rule": None, "sources": []},
        {"a": "alpha-split", "b": "delta-kernel", "mark": "ok", "condition": None, "engines": [], "rule": None,
         "sources": []},
    ],
}


@pytest.fixture(scope="module")
def tiny():
    return load_catalog(TINY, use_cache=False)[0]


def test_rows_are_the_techniques_with_a_mark(tiny):
    d = matrix_diagram(MATRIX, tiny)
    # delta-kernel has only an ok pair: left out; the rest keep the matrix's order
    assert d.data["techniques"] == ["alpha-split", "beta-cache", "epsilon-queue", "gamma-link"]
    tds = re.findall(r'<TD BGCOLOR="([^"]+)" TOOLTIP="([^"]*)">([^<]*)</TD>', d.dot)
    marks = [(tip.split(":")[0], sym) for _, tip, sym in tds if sym.strip()]
    # both orders of each pair: 2 conflict cells (✗) and 2 conditional cells (⚠); of the 4 x 4 - 4 = 12
    # off-diagonal cells the other 8 are ok (blank, no tooltip)
    assert sorted(marks) == sorted([("beta-cache × gamma-link", "✗"), ("gamma-link × beta-cache", "✗"),
                                    ("alpha-split × epsilon-queue", "⚠"), ("epsilon-queue × alpha-split", "⚠")])
    assert len(tds) == 4 and d.dot.count('<TD> </TD>') == 8
    tip = next(t for _, t, s in tds if t.startswith("beta-cache × gamma-link"))
    assert tip == "beta-cache × gamma-link: conflict when tp_size &gt; 8 (vllm) [fixture-conflict]"
    svg = d.render("svg")
    assert "Beta cache" in svg_all_text(svg) and "✗" in svg_all_text(svg)


def test_filters_and_empty(tiny):
    d = matrix_diagram(MATRIX, tiny, Filters.from_lists(tags=["caching", "hardware"]))
    assert d.data["techniques"] == ["beta-cache", "gamma-link"]
    d = matrix_diagram(MATRIX, tiny, Filters.from_lists(tags=["caching"]))  # its partner is filtered out
    assert d.data["techniques"] == [] and "no conflicts or conditions" in d.dot


def test_text_form(tiny):
    md = matrix_markdown(MATRIX, tiny)
    rows = [x for x in md.splitlines() if x.startswith("| ❌") or x.startswith("| ⚠️")]
    # conflicts first, then conditionals; the ok pair is not listed
    assert rows == ["| ❌ | Beta cache (`beta-cache`) | Gamma link (`gamma-link`) | tp_size > 8 | vllm | fixture-conflict |",
                    "| ⚠️ | Alpha split (`alpha-split`) | Epsilon queue (`epsilon-queue`) | split_size > heads |  |  |"]
    assert "5 techniques, 2 pairs that are not ✅" in md


@pytest.mark.parametrize("bad,msg", [
    ({"kind": "check"}, "expected the dict of kg.analyses.matrix.compatibility_matrix"),
    ({**MATRIX, "cells": [{"a": "x"}]}, r"cells\[0\] needs a, b and mark"),
    ({**MATRIX, "cells": [{"a": "x", "b": "y", "mark": "maybe"}]}, "mark 'maybe' is not one of conflict"),
])
def test_malformed_matrix(tiny, bad, msg):
    with pytest.raises(OptkgError, match=msg):
        matrix_diagram(bad, tiny)
