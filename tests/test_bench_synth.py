"""The benchmark's synthetic catalogs (tests/bench/synth.py) are valid catalogs of the size asked,
so `make bench` measures real validation work, not error paths."""
from __future__ import annotations

import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "bench"))

from synth import COUPLINGS, TECHNIQUES_PER_RULE, make_catalog, synthetic_ids  # noqa: E402

from kg.knowledge.catalog import load_catalog  # noqa: E402
from kg.engine.rules import load_rules  # noqa: E402


def test_synthetic_catalog_is_valid_and_sized(tmp_path):
    shipped = len(list((REPO / "catalog" / "techniques").glob("*.yaml")))
    n = shipped + 40
    counts = make_catalog(tmp_path / "syn", n, REPO)
    assert counts["techniques"] == n and counts["synthetic"] == 40
    cat, problems = load_catalog(tmp_path / "syn" / "catalog", use_cache=False)
    assert problems == []
    assert len(cat.techniques) == n
    ids = synthetic_ids(REPO / "catalog", n)
    # every synthetic entry couples 5 times; its technique couplings point at other synthetic entries only
    for sid in ids:
        cs = cat.techniques[sid]["couplings"]
        assert len(cs) == COUPLINGS, sid
        assert all(c["target"] in ids for c in cs if "target" in c)
    # no pair of entries couples both ways (the offsets never cancel modulo the synthetic count)
    pairs = {(sid, c["target"]) for sid in ids for c in cat.techniques[sid]["couplings"] if "target" in c}
    assert not any((b, a) in pairs for a, b in pairs)
    rules, rule_problems = load_rules("check", tmp_path / "syn" / "rules")
    assert rule_problems == []
    assert len(rules.rules) == max(n // TECHNIQUES_PER_RULE, len(load_rules("check")[0].rules))
    # deterministic: the same size gives the same bytes
    make_catalog(tmp_path / "again", n, REPO)
    for f in sorted((tmp_path / "syn" / "catalog" / "techniques").glob("*-s0*.yaml")):
        assert f.read_bytes() == (tmp_path / "again" / "catalog" / "techniques" / f.name).read_bytes()
