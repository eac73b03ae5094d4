"""The fast YAML path (kg.core.yamlfast: plain data straight from libyaml's events) reads every shipped
file to the same data and field lines as the exact path (node tree, constructor, line map), and hands
anything it does not build itself to the exact path; kg.core.parallel.map_chunks returns what one
process would, in order, and raises what one process would."""
from __future__ import annotations

import math

import pytest

from conftest import REPO
from kg.core import yamlio
from kg.core.errors import OptkgError
from kg.core.parallel import map_chunks
from kg.core.yamlfast import SHALLOW, fast_parse


def _exact(text: str):
    loader = yamlio._loader_class()(text)
    try:
        node = loader.get_single_node()
        return (None, {}) if node is None else (loader.construct_document(node), yamlio._line_map(node))
    finally:
        loader.dispose()


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and str(a) == str(b))  # YamlFloat keeps its text
    return a == b


def _fast(text: str):
    return fast_parse(text, yamlio.MAX_NODES, yamlio._loader_class())


def test_every_shipped_yaml_file_reads_the_same_both_ways():
    files = sorted(p for d in ("catalog", "rules", "examples") for p in (REPO / d).rglob("*.yaml"))
    assert len(files) > 400
    fast_read = 0
    for f in files:
        text = f.read_text(encoding="utf-8")
        data, lines = _exact(text)
        got = _fast(text)
        if got is None:
            continue
        fast_read += 1
        assert _same(got[0], data), f
        assert got[1] == {k: v for k, v in lines.items() if len(k) <= SHALLOW}, f
    assert fast_read >= 0.9 * len(files)  # the comparison above covered (nearly) all of them


@pytest.mark.parametrize("text, value", [
    ("a: yes\nb: off\nc: ~\nd:\n", {"a": True, "b": False, "c": None, "d": None}),  # YAML 1.1 booleans and nulls
    # octal / hex spellings stay text (a count written 0o17 is not silently 15: hostile #27), 010 is ten
    ("a: 010\nb: 0o17\nc: 0x1F\nd: 1_000\ne: 9:06:08\n", {"a": 10, "b": "0o17", "c": "0x1F", "d": "1_000", "e": "9:06:08"}),
    ("a: 1e3\nb: .5\nc: -.inf\nd: '1'\ne: |\n  x\n", {"a": 1000.0, "b": 0.5, "c": -math.inf, "d": "1", "e": "x\n"}),
    ("- [a, {b: c}]\n- {1: x, 2.5: y}\n", [["a", {"b": "c"}], {1: "x", 2.5: "y"}]),
])
def test_scalars_resolve_as_the_exact_path_resolves_them(text, value):
    got = _fast(text)
    assert got is not None and _same(got[0], _exact(text)[0]) and got[0] == value


@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",           # anchors and aliases (the alias-bomb count is the exact path's)
    "a: 1\na: 2\n",               # a repeated key (reported with both lines by the exact path)
    "<<: {a: 1}\n",               # a merge key
    "a: !!str 1\n",               # an explicit tag
    "---\na: 1\n---\nb: 2\n",     # two documents (an error)
    "a: [1, 2\n",                 # a syntax error (worded by the exact path)
    "? [a]\n: 1\n",               # a collection as a key
])
def test_what_the_fast_path_does_not_build_goes_to_the_exact_path(text):
    assert _fast(text) is None


def test_a_deep_field_line_is_the_exact_line_map_built_on_demand():
    text = "id: x\ncouplings:\n  - target: a\n    condition: tp_size > 1\n"
    doc = yamlio.parse_yaml(text, "t.yaml")
    assert doc.where(("couplings", 0, "condition")) == (4, 5) == _exact(text)[1][("couplings", 0, "condition")]
    assert doc.where(("id",)) == (1, 1)
    with pytest.raises(OptkgError, match=r"t\.yaml:4"):  # the exact path's error, with the line
        yamlio.parse_yaml("a: 1\nb:\n  - c\n  d: e\n", "t.yaml")


def _square_chunk(context, chunk):
    if -1 in chunk:
        raise ValueError("no negative ones")
    return [context * x * x for x in chunk]


def test_map_chunks_over_worker_processes_equals_one_process():
    items = list(range(997))
    sequential = map_chunks(_square_chunk, 3, items, min_items=10**6)  # below min_items: this process only
    parallel = map_chunks(_square_chunk, 3, items, min_items=1, chunks_per_core=4)
    assert len(sequential) == 1 and [x for c in parallel for x in c] == sequential[0] == [3 * x * x for x in items]
    with pytest.raises(ValueError, match="no negative ones"):
        map_chunks(_square_chunk, 1, items[:500] + [-1] + items[500:], min_items=1)
