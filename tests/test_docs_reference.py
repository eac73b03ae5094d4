"""`optkg docs`: the generated technique and rule reference, and the freshness checks CI runs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from catalog_copy import REPO, copy_catalog, dump, load, optkg

# make test (xdist --dist loadgroup) runs this module's tests on one worker:
# the shared catalog copy is copied and built once
pytestmark = pytest.mark.xdist_group("docs-reference")


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """A catalog copy of the test's own (for a test that edits it)."""
    return copy_catalog(tmp_path / "home")


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory) -> Path:
    """One catalog copy for the tests that only read it (each copy's catalog and rules are built again: ~1.5
    CPU-s, the cache being keyed on the files' paths)."""
    return copy_catalog(tmp_path_factory.mktemp("docs-home") / "home")


def test_docs_cover_every_technique_and_rule(shared_home: Path) -> None:
    home = shared_home
    r = optkg(["docs"], home)
    assert r.returncode == 0, r.stderr
    tech = (home / "docs" / "techniques.md").read_text(encoding="utf-8")
    rules = (home / "docs" / "rules.md").read_text(encoding="utf-8")
    ids = sorted(f.stem for f in (home / "catalog" / "techniques").glob("*.yaml"))
    anchors = re.findall(r'<a id="t-([a-z0-9-]+)"></a>', tech)
    assert sorted(anchors) == ids  # every technique described exactly once
    # grouped by stage, then layer: the stage headings come in axis order
    axes = yaml.safe_load((home / "catalog" / "axes.yaml").read_text())
    heads = [line[3:] for line in tech.splitlines() if line.startswith("## ") and line != "## Contents"]
    assert heads[: len(axes["stages"])] == [f"{s['name']} ({s['name_zh']})" for s in axes["stages"]]
    # couplings in both directions: every technique -> technique coupling shows on the target as incoming
    for f in sorted((home / "catalog" / "techniques").glob("*.yaml")):
        for c in load(f).get("couplings") or []:
            if c.get("target") in ids:
                section = tech.split(f'<a id="t-{c["target"]}"></a>', 1)[1].split('<a id="t-', 1)[0]
                assert "**Couplings (others → this)**" in section
                assert f"(#t-{f.stem})" in section
                break
    # rules: id, severity, fixtures with their counts
    fixtures = home / "rules" / "fixtures"
    for f in sorted((home / "rules").glob("*.yaml")):
        doc = yaml.safe_load(f.read_text()) or {}
        for rule in doc.get("rules") or []:
            part = rules.split(f'<a id="r-{rule["id"]}"></a>', 1)[1].split('<a id="r-', 1)[0]
            assert f"### `{rule['id']}`" in part
            assert "- **Severity**: " in part
            fx = fixtures / f"{rule['id']}.yaml"
            if fx.is_file():
                d = yaml.safe_load(fx.read_text())
                assert f"{len(d.get('fire') or [])} must fire, {len(d.get('pass') or [])} must not" in part
            else:
                assert "- **Fixtures**: none" in part
    from kg.knowledge.checks import CHECKS
    assert all(f"| `{code}` |" in rules for code in CHECKS)


def test_docs_check_detects_stale_copies(home: Path) -> None:
    assert optkg(["docs"], home).returncode == 0
    fresh = optkg(["docs", "--check"], home)
    # techniques.md, rules.md and engine-checks.md (issue 14)
    assert fresh.returncode == 0 and fresh.stdout.count(": fresh") == 4  # + docs/glossary.md
    f = home / "catalog" / "techniques" / "tensor-parallelism.yaml"
    d = load(f)
    d["summary"] = d["summary"] + " Changed in a test."
    dump(f, d)
    stale = optkg(["docs", "--check"], home)
    assert stale.returncode == 1
    assert "docs/techniques.md: stale; run `optkg docs`" in stale.stdout
    assert "docs/rules.md: fresh" in stale.stdout
    before = (home / "docs" / "techniques.md").read_text()
    assert "Changed in a test." not in before  # --check writes nothing
    assert optkg(["docs"], home).returncode == 0
    assert "Changed in a test." in (home / "docs" / "techniques.md").read_text()


def test_docs_are_deterministic(shared_home: Path, tmp_path: Path) -> None:
    home = shared_home
    a, b = tmp_path / "a", tmp_path / "b"
    assert optkg(["docs", "-o", str(a)], home).returncode == 0
    assert optkg(["docs", "-o", str(b)], home, cwd=tmp_path).returncode == 0
    for name in ("techniques.md", "rules.md", "engine-checks.md"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_committed_schema_and_docs_are_fresh() -> None:
    """The committed catalog/schema/technique.schema.json and docs/ match what the commands generate."""
    home = REPO
    r = optkg(["schema", "--check", "--catalog", str(REPO / "catalog")], home)  # the session's cache
    assert r.returncode == 0, r.stdout + r.stderr
    d = optkg(["docs", "--check", "--catalog", str(REPO / "catalog"), "--rules", str(REPO / "rules"),
               "-o", str(REPO / "docs")], home)
    assert d.returncode == 0, d.stdout + d.stderr
