"""Shared test helpers: paths to the repo, the shared data folder, and an in-process CLI runner."""
from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # keep the catalog cache out of the user's home and per test session
    monkeypatch.setenv("OPTKG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "optkg-cache"))
    # and the private state (the key that signs cache entries and the records of written folders, kg.core.provenance)
    monkeypatch.setenv("OPTKG_STATE_DIR", str(tmp_path_factory.getbasetemp() / "optkg-state"))


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
