"""Shared test helpers: paths to the repo, the shared data folder, and an in-process CLI runner."""
from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def _session_folder(tmp_path_factory) -> Path:
    """This test session's temporary folder; under pytest-xdist the one its workers share (each worker's
    basetemp is a ``popen-gwN`` folder inside it), so a table, catalog or speed point one worker built
    serves the others. The cache is content-keyed, written atomically and signed with the key in the
    state folder beside it, which the workers must share for that reason."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # keep the catalog cache out of the user's home and per test session
    monkeypatch.setenv("OPTKG_CACHE_DIR", str(_session_folder(tmp_path_factory) / "optkg-cache"))
    # and the private state (the key that signs cache entries and the records of written folders, kg.core.provenance)
    monkeypatch.setenv("OPTKG_STATE_DIR", str(_session_folder(tmp_path_factory) / "optkg-state"))


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    """An empty private cache folder of this test's own (``$OPTKG_CACHE_DIR``), for tests of the cache itself."""
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("OPTKG_CACHE_DIR", str(d))
    return d


def run_cli(*argv: str) -> tuple[int, str, str]:
    """Run ``optkg`` in-process; return (exit code, stdout, stderr)."""
    from kg.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def catalog():
    """The shipped catalog, loaded once; the suite fails here if it does not validate."""
    from kg.knowledge.catalog import load_catalog
    cat, problems = load_catalog()
    assert not problems, [p.one_line() for p in problems[:5]]
    return cat


@pytest.fixture(scope="session")
def check_rules():
    """The shipped ``check`` ruleset (compiled once per session)."""
    from kg.engine.rules import load_rules
    rs, problems = load_rules("check")
    assert not problems, [p.one_line() for p in problems]
    return rs


# The modules holding the longest single tests (CPU-s on a quiet core, 2026-12-07 serial profile), run first:
# `make test` hands tests to its two xdist workers in collection order, so a 20-second test collected last keeps
# one worker busy while the other has nothing left (the wall time is bounded by the longest test at the end).
HEAVY_FIRST = (
    "test_engine_stress.py",        # 22: 1,500 generated stacks through the rule engine and the pure-Python matcher
    "test_validate_precommit.py",   # 13: pre-commit builds the hook's environment (pip)
    "test_hardening_isolation.py",  # 8.5: 400 checks in one process against fresh processes
    "test_sweep_speed.py",          # 7: speed points of many layouts
    "test_packaging.py",            # 6.6: builds the wheel
    "test_readme_commands.py",      # 6-7 per sweep line of the README
    "test_fuzz.py",                 # 5.6
    "test_sweep_executors.py",      # 5: Ray tasks and worker processes
    "test_docs_reference.py",       # 4.7
)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    order = {id(item): (rank.get(item.path.name, len(rank)), n) for n, item in enumerate(items)}
    items.sort(key=lambda item: order[id(item)])
