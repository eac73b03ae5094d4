"""Shared test helpers: paths to the repo, the shared data folder, and an in-process CLI runner."""
from __future__ import annotations

import io
import os
import re
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


# The modules holding the longest single tests or groups, longest first (CPU-s of one test or group in a `make test`
# run, 2026-12-07, load 8-13): `make test` hands tests to its two xdist workers in collection order, so a
# 5-second test collected last (test_yaml_fast_path was) keeps one worker busy while the other has nothing left.
HEAVY_FIRST = (
    "test_engine_stress.py",          # 37: 1,500 generated stacks through the rule engine and the pure-Python matcher
    "test_readme_commands.py",        # 21 in one group: every README command in a checkout copy
    "test_site_browser.py",           # ~14 in one group: Chromium on the explorer and the report
    "test_validate_precommit.py",     # 11: pre-commit builds the hook's environment (pip)
    "test_hardening_determinism.py",  # 10 in one group: two interpreters under two hash seeds
    "test_hardening_isolation.py",    # 10: 400 checks in one process against fresh processes
    "test_docs_reference.py",         # 8.9 in one group: `optkg docs` on catalog copies
    "test_sweep_speed.py",            # 8: speed points of many layouts
    "test_hostile_leak.py",           # 7: 100 check_stack calls keep memory flat
    "test_fit_cli.py",                # 7 in one group: fit over traces, the Mooncake report shared
    "test_sweep_incremental.py",      # 5.7 in one group: two sweeps, each swept once
    "test_yaml_fast_path.py",         # 5: every shipped YAML file read both ways
    "test_fuzz.py",                   # 4.6
    "test_site.py",                   # 4.5 in one group: the explorer built once
    "test_packaging.py",              # 4.5: builds the wheel
    "test_fit_measure.py",            # 4.1 in one group: trace measurements
    "test_diagnose_input_warnings.py",  # 4.0
    "test_training_generated_data_fresh.py",  # 3.6: the DeepSpeed keys generator over the sdist
    "test_sweep_executors.py",        # 2.9: Ray tasks and worker processes
)


# `make test` runs `pytest -n 2 --dist loadgroup`: the tests of a module marked ``pytestmark =
# pytest.mark.xdist_group("name")`` go to one worker, so its module fixtures are built once (test_hardening_determinism:
# the two hash-seed interpreters, ~10 CPU-s; test_site_browser: one Chromium). pytest-xdist marks a group by appending
# "@name" to each test's nodeid, which pytest 9.2's structured node ids ignore (pytest-dev/pytest-xdist#1386: the
# groups were silently split over both workers, each building the fixtures). The scheduler below reads the mark
# from the module's text instead, in the controller, where no test module is imported.
_GROUP_MARK = re.compile(r"""^pytestmark = pytest\.mark\.xdist_group\(["']([\w-]+)["']\)$""", re.M)


def module_group(path: Path) -> str | None:
    """The xdist group named by the module-level mark of test module ``path`` (the only form of the mark used here)."""
    try:
        found = _GROUP_MARK.search(path.read_text(encoding="utf-8"))
    except OSError:
        return None
    return found.group(1) if found else None


def work_unit(rootpath: Path, nodeid: str, groups: dict[str, str | None]) -> str | None:
    """The group of test ``nodeid`` (``group:<name>``) when its module is marked, else None (a unit of its own);
    ``groups`` keeps each module's answer."""
    path = nodeid.split("::", 1)[0]
    if path not in groups:
        groups[path] = module_group(rootpath / path)
    return f"group:{groups[path]}" if groups[path] else None


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleGroups(LoadGroupScheduling):
        """loadgroup with each marked module's tests as one unit, handed out in collection order (HEAVY_FIRST)."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            self._groups: dict[str, str | None] = {}
            # xdist orders units by their number of tests by default: the group of 25 browser tests would go before
            # the stress test (one test, 37 CPU-s). Collection order is HEAVY_FIRST, by measured cost
            config.option.loadscopereorder = False

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(Path(self.config.rootpath), nodeid, self._groups) or super()._split_scope(nodeid)

    return ModuleGroups(config, log)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    order = {id(item): (rank.get(item.path.name, len(rank)), n) for n, item in enumerate(items)}
    items.sort(key=lambda item: order[id(item)])
