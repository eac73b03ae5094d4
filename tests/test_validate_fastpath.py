"""The compiled fast path of catalog validation (kg.knowledge.filechecks._fast_validator) gives the same yes/no
verdict as the full jsonschema validation with the teaching schema, on every shipped entry and on
mutated copies of them (hypothesis), so it can never hide a problem."""
from __future__ import annotations

import copy

import jsonschema
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from kg.knowledge.axes import load_axes
from kg.knowledge.filechecks import FASTJSONSCHEMA_FROM, _fast_validator
from kg.knowledge.schema import technique_schema

CATALOG = REPO / "catalog"
SCHEMA = technique_schema(load_axes(CATALOG / "axes.yaml"))
FULL = jsonschema.Draft202012Validator(SCHEMA)
FAST = _fast_validator(SCHEMA, FASTJSONSCHEMA_FROM)       # compiled with fastjsonschema
SMALL = _fast_validator(SCHEMA, 1)                         # jsonschema over the enum form
DOCS = [yaml.load(p.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        for p in sorted((CATALOG / "techniques").glob("*.yaml"))]
VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
                      | st.sampled_from(["L1", "L9", "inference", "compute", "causes", "stable", "deprecated", "https://x.org"]),
                      lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6) | st.integers(), c, max_size=3),
                      max_leaves=6)


def test_fast_path_is_compiled():
    assert FAST.__name__ == "ok"  # fastjsonschema is a dependency: the compiled path is the one in use


def test_shipped_entries_agree():
    for d in DOCS:
        assert FAST(d) is SMALL(d) is FULL.is_valid(d) is True


from test_fuzz import _slots  # noqa: E402 - one helper for both mutation tests


@settings(max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(range(len(DOCS))), st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["del", "set", "add"]),
                                                              VALUES), min_size=1, max_size=3))
def test_mutated_entries_agree(i, edits):
    d = copy.deepcopy(DOCS[i])
    for pick, op, value in edits:
        slots = _slots(d, [])
        cont, key = slots[pick % len(slots)]
        if op == "del":
            del cont[key]
        elif op == "set":
            cont[key] = value
        elif isinstance(cont, dict):
            cont[f"x{pick}"] = value
        else:
            cont.append(value)
    want = FULL.is_valid(d)
    assert FAST(d) is want and SMALL(d) is want
