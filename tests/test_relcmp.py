"""kg.core.relcmp answers as packaging does: release order, equality, hashing and text, and membership in a range,
for every release and range optkg ships and for the forms it hands to packaging (post-releases, epochs, ``~=``)."""
from __future__ import annotations

import functools
import itertools
import re

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from kg.core.relcmp import Release, in_range, older_than, operators, release_numbers
from tests.conftest import REPO

EDGE_RELEASES = ["0.14", "0.14.0", "0.14.0.0", "00.14.00", "0.4.0.post1", "0.4.0rc1", "0.4.0.dev3", "0.4.0a1",
                 "1!0.1", "v0.14.0", "0.14.0+local", "0", "0.0", "10.0.0", "0.10", "0.9.9", "0.4.post1", "0.4.0.post01",
                 "0.4.0.post", "0.4.0.post1.dev2", "0.4.0.post1+local", "0.4.0.post2", "0.4.0.1", "0.6.3.post1"]
EDGE_RANGES = ["", ">=0.4.0,<0.34.0", ">= 0.4.0 , < 0.34", ">0.14", ">=0.14.0", "<0.14", "<=0.14", "==0.14",
               "!=0.14.0", "==0.14.*", "~=0.14", "===0.14.0", ">=0.4.0.post1", ">0.4.0", "<0.4.0.post1", ",>=0.5,",
               "==0.6.4.post1", ">=0.5.3.post1", ">=0.4.0.post1,<0.10.2", ">0.4.0.post1", "!=0.4.0.post1", "<=0.4.post1",
               ">=0.4.0.post", ">=0.4.0.post1.dev1", "==0.4.0.*"]


@functools.lru_cache(maxsize=1)
def _shipped() -> tuple[list[str], list[str]]:
    """The known releases of every engine, and every range text in the release tables and rules (read as text)."""
    releases, ranges = set(), set()
    for f in (REPO / "catalog" / "engines" / "releases").glob("*.yaml"):
        block = re.search(r"^releases:(.*?)^\w", f.read_text(), re.S | re.M)
        releases.update(re.findall(r"[\w.]+", block.group(1)) if block else [])
    for f in [*(REPO / "catalog" / "engines" / "releases").glob("*.yaml"), *(REPO / "rules").rglob("*.yaml")]:
        ranges.update(m.strip() for m in re.findall(r"['\"]((?:[<>=!~]=?=?\s*\d[\w.*]*\s*,?\s*)+)['\"]", f.read_text()))
    return sorted(releases), sorted(ranges)


def _clauses(specs: list[str]) -> list[str]:
    """The distinct comparisons (``>=0.4.0``) the range texts are made of."""
    return sorted({c.strip() for s in specs for c in s.split(",") if c.strip()})


def test_the_shipped_tables_give_enough_to_compare():
    releases, ranges = _shipped()
    assert len(releases) > 100 and len(ranges) > 30
    assert any("post" in r for r in releases)  # the forms packaging itself decides are among them


def test_order_equality_hash_and_text_are_packagings():
    texts = _shipped()[0] + EDGE_RELEASES
    rel = {t: Release(t) for t in texts}
    ver = {t: Version(t) for t in texts}
    for a, b in itertools.product(texts, repeat=2):
        ra, rb, va, vb = rel[a], rel[b], ver[a], ver[b]
        assert ((ra < rb), (ra <= rb), (ra == rb), (ra >= rb), (ra > rb)) == \
            ((va < vb), (va <= vb), (va == vb), (va >= vb), (va > vb)), (a, b)
        if ra == rb:
            assert hash(ra) == hash(rb), (a, b)
    for t in texts:
        assert str(rel[t]) == str(ver[t]), t
    assert sorted(texts, key=Release) == sorted(texts, key=Version)


def test_range_membership_is_packagings():
    """Every shipped range against the releases at, just below and just above each of its bounds (and the edge
    cases); the order test above holds the rest of the releases on the same side of a bound as packaging does."""
    releases, ranges = _shipped()
    order = sorted(releases + EDGE_RELEASES, key=Version)
    checked = 0
    for spec in ranges + EDGE_RANGES:
        sset, near = SpecifierSet(spec), set(EDGE_RELEASES)
        for clause in _clauses([spec]):
            bound = re.sub(r"^[<>=!~]+", "", clause).strip().removesuffix(".*")
            i = next((k for k, t in enumerate(order) if Version(t) >= Version(bound)), len(order))
            near.update([bound, *order[max(i - 1, 0):i + 2]])
        for t in near:
            want = Version(t) in sset
            assert in_range(t, spec) == want and in_range(Release(t), spec) == want, (spec, t)
            checked += 1
    assert checked > 3000


def test_plain_releases_are_read_without_packaging_and_the_rest_with_it():
    assert release_numbers("0.34.0") == (0, 34) and release_numbers("0.0") == (0,)
    assert [release_numbers(t) for t in ("0.4.0.post1", "v0.14", " 0.14", "0.14 ", "0..1", "", "٣.1", "1!0.1")] == \
        [None] * 8
    with pytest.raises(InvalidVersion):
        Release("not a release")
    with pytest.raises(ValueError):
        in_range("0.14.0", ">=banana")
    assert older_than("0.13.0", "0.14.0") and not older_than(None, "0.14.0") and not older_than("junk", "0.14.0")


def test_range_operators_are_packagings():
    for spec in _shipped()[1] + EDGE_RANGES:
        assert operators(spec) == {s.operator for s in SpecifierSet(spec)}, spec
    with pytest.raises(ValueError):
        operators(">=banana")


def test_post_releases_compare_without_packaging():
    """The vLLM model registry names 0.4.0.post1 and 0.6.3.post1: a check orders them without importing packaging
    (its two patterns cost ~6 ms to compile); a post-release sits after its release, before the next one."""
    assert Release("0.4.0") < Release("0.4.0.post1") < Release("0.4.0.post2") < Release("0.4.0.1") < Release("0.4.1")
    assert Release("0.4.post1") == Release("0.4.0.post01") and str(Release("0.4.0.post01")) == "0.4.0.post1"
    assert all(Release(t)._version is None for t in ("0.4.0.post1", "0.6.3.post1", "0.34.0"))
    assert Release("0.4.0.post1.dev2")._version is not None  # a dev-release of a post-release: packaging decides
