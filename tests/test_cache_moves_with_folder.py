"""A copy of the catalog or of a rules folder elsewhere (a second checkout, a worktree, the catalog copies tests make)
reads the cache entries the original built (kg.core.cache.rooted): files are keyed by their place in the folder, and
the paths in the entry are moved to the folder that reads it. An entry whose data names its folder anywhere else is
pinned to that folder: another folder rebuilds."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import REPO
from kg.core.cache import moved, rooted
from kg.engine import rules as rules_mod
from kg.knowledge import catalog as catalog_mod, support
from kg.knowledge.catalog_cache import catalog_data, catalog_from_data


def _no_build(*a, **k):
    raise AssertionError("rebuilt from the files: the copy did not read the original's entry")


def test_a_file_is_keyed_by_its_place_in_the_folder():
    assert rooted("/a/b/catalog/techniques/x.yaml", "/a/b/catalog") == "./techniques/x.yaml"
    assert rooted("catalog/axes.yaml", "catalog") == "./axes.yaml"
    assert rooted("/a/b/catalogue/x.yaml", "/a/b/catalog") == "/a/b/catalogue/x.yaml"  # a sibling is not inside
    assert moved("/a/b/catalog/techniques/x.yaml", "/a/b/catalog", "/c/catalog") == "/c/catalog/techniques/x.yaml"
    assert moved("/a/b/catalogue/x.yaml", "/a/b/catalog", "/c/catalog") == "/a/b/catalogue/x.yaml"


def test_a_catalog_copy_reads_the_originals_entry_with_its_own_paths(tmp_path, monkeypatch):
    original, problems = catalog_mod.load_catalog(REPO / "catalog")  # builds the entry, or reads it
    assert not problems
    copy = tmp_path / "elsewhere" / "catalog"
    for part in ("techniques", "hardware"):  # what a catalog is built from (kg.knowledge.catalog.load_catalog)
        shutil.copytree(REPO / "catalog" / part, copy / part)
    for part in ("axes.yaml", "properties.yaml"):
        shutil.copy2(REPO / "catalog" / part, copy / part)
    monkeypatch.setattr(catalog_mod, "load_axes", _no_build)  # the first step of a build
    cat, problems = catalog_mod.load_catalog(copy)
    assert not problems and cat.root == copy
    assert cat.techniques == original.techniques and cat.hardware == original.hardware
    assert cat.files["tensor-parallelism"] == str(copy / "techniques" / "tensor-parallelism.yaml")
    assert cat.files == {t: str(copy / Path(f).relative_to(REPO / "catalog")) for t, f in original.files.items()}
    assert [w.file for w in cat.warnings] == [moved(w.file, str(REPO / "catalog"), str(copy)) for w in original.warnings]


def test_a_catalog_entry_naming_its_folder_elsewhere_is_pinned_to_it(catalog):
    d = catalog_data(catalog)
    assert d["pinned"] is False and d["root"] == str(catalog.root)
    tid = "tensor-parallelism"
    quoted = {**catalog.techniques, tid: {**catalog.techniques[tid], "summary": f"see {catalog.root}/notes.md"}}
    d = catalog_data(type(catalog)(catalog.root, catalog.axes, quoted, catalog.properties, catalog.hardware,
                                   catalog.aliases, catalog.files, catalog.warnings))
    assert d["pinned"] is True
    assert catalog_from_data(d, Path("/elsewhere/catalog"), type(catalog)) is None  # a miss: rebuilt there
    assert catalog_from_data(d, catalog.root, type(catalog)).techniques[tid]["summary"] == f"see {catalog.root}/notes.md"


def test_a_rules_copy_reads_the_originals_entry_with_its_own_paths(tmp_path, monkeypatch):
    original = rules_mod.load_ruleset("check", REPO / "rules")
    copy = tmp_path / "rules"
    shutil.copytree(REPO / "rules", copy)
    monkeypatch.setattr(rules_mod, "load_rules", _no_build)
    rs = rules_mod.load_ruleset("check", copy)
    assert [r.id for r in rs.rules] == [r.id for r in original.rules] and rs.thresholds == original.thresholds
    assert {r.file for r in rs.rules} <= {str(f) for f in copy.glob("*.yaml")}
    assert [r.file for r in rs.rules] == [str(copy / Path(r.file).name) for r in original.rules]
    assert [r.match for r in rs.rules] == [r.match for r in original.rules]


def test_a_rules_entry_naming_its_folder_elsewhere_is_pinned_to_it(check_rules):
    folder = REPO / "rules"
    d = rules_mod._ruleset_data(check_rules, folder)
    assert d["pinned"] is False
    d = rules_mod._ruleset_data(rules_mod.RuleSet("check", check_rules.rules, {"note": f"{folder}/x"}), folder)
    assert d["pinned"] is True
    assert rules_mod._ruleset_from_data(d, "check", Path("/elsewhere/rules")) is None
    assert rules_mod._ruleset_from_data(d, "check", folder).thresholds == {"note": f"{folder}/x"}


@pytest.fixture()
def _fresh_support():
    support._load_all.cache_clear()
    yield
    support._load_all.cache_clear()


def test_a_support_copy_reads_the_originals_entry(tmp_path, cache_dir, _fresh_support):
    original = support.support_files(REPO / "catalog" / "support")
    copy = tmp_path / "support"
    shutil.copytree(REPO / "catalog" / "support", copy)
    again = support.support_files(copy)
    assert len(list(cache_dir.glob("support-*.json"))) == 1
    assert [(f.engine, f.facts, f.releases) for f in again] == [(f.engine, f.facts, f.releases) for f in original]


def test_a_table_copied_elsewhere_reads_the_entry_unless_its_data_names_the_folder(tmp_path, cache_dir):
    from kg.core import cache
    a, b = tmp_path / "a" / "engines", tmp_path / "b" / "engines"
    a.mkdir(parents=True)
    (a / "t.yaml").write_text("x: 1\n")
    shutil.copytree(a, b)
    calls = []

    def table(folder):
        def build():
            calls.append(folder)
            return {"x": int((folder / "t.yaml").read_text().split(":")[1])}
        return build

    def index(folder):
        def build():
            calls.append(folder)
            return [str(folder / "t.yaml")]  # names its folder: pinned to it
        return build

    assert cache.built_from("demo", [a / "t.yaml"], table(a)) == {"x": 1}
    assert cache.built_from("demo", [b / "t.yaml"], table(b)) == {"x": 1}
    assert calls == [a]  # the copy read the entry
    assert cache.built_from("demo-index", [a / "t.yaml"], index(a)) == [str(a / "t.yaml")]
    assert cache.built_from("demo-index", [b / "t.yaml"], index(b)) == [str(b / "t.yaml")]
    assert calls == [a, a, b]  # rebuilt in the copy: the entry named the first folder
    (b / "t.yaml").write_text("x: 2\n")  # an edit in the copy is its own content: a new key
    assert cache.built_from("demo", [b / "t.yaml"], table(b)) == {"x": 2}
    assert cache.built_from("demo", [a / "t.yaml"], table(a)) == {"x": 1}
    assert calls == [a, a, b, b]
