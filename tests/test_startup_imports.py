"""What a warm one-shot command does not import (issue 31: ``optkg kv`` <= 5x a bare interpreter), and the
stand-in module (kg.core.deferred) that keeps ``inspect`` out of a command-line process that never reads it."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

from kg.core import deferred
from tests.conftest import REPO

KV = ["kv", "--model", "Qwen/Qwen3-235B-A22B", "--tp", "8", "--kv-budget-gib", "40", "--max-model-len", "32768"]


def test_a_warm_optkg_kv_imports_no_packaging_yaml_inspect_shutil_hashlib_or_renderer():
    code = (f"import sys; from kg.cli import main; rc = main({KV!r}); "
            "heavy = ('packaging', 'yaml', 'ast', 'dis', 'shutil', 'hashlib'); "
            "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith('kg.output'))"
            " , type(sys.modules['inspect']).__name__)")
    for _ in range(2):  # the first run fills this session's cache (if no test did), the second reads it
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.splitlines()[-1] == "0 [] _Deferred"


def test_a_deferred_module_loads_on_first_read_and_every_importer_sees_it(tmp_path, monkeypatch):
    (tmp_path / "optkg_deferred_probe.py").write_text("X = 41\ndef f():\n    return X + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "optkg_deferred_probe", raising=False)
    deferred.defer("optkg_deferred_probe")
    import optkg_deferred_probe as early  # binds the stand-in: nothing of the module has run
    assert type(early).__name__ == "_Deferred" and "X" not in vars(early)
    assert importlib.util.find_spec("optkg_deferred_probe").origin == str(tmp_path / "optkg_deferred_probe.py")
    assert "X" not in vars(early)  # asking for the spec did not load it
    assert early.f() == 42  # the first read loads the module
    real = sys.modules["optkg_deferred_probe"]
    assert real is not early and type(real).__name__ == "module" and early.X == real.X == 41
    from optkg_deferred_probe import X
    assert X == 41
    monkeypatch.delitem(sys.modules, "optkg_deferred_probe")


def test_the_help_formatter_picks_the_width_argparse_would(monkeypatch):
    import argparse

    from kg.cli import _Formatter
    for columns in ("100", "57", "abc", "0", "-3", None):
        if columns is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", columns)
        assert _Formatter("optkg")._width == argparse.HelpFormatter("optkg")._width, columns
    assert _Formatter("optkg", width=40)._width == 40


def test_defer_leaves_a_loaded_module_alone():
    before = sys.modules["inspect"]
    deferred.defer("inspect")
    assert sys.modules["inspect"] is before


def test_every_dataclass_has_a_docstring():
    """dataclasses reads ``inspect`` only to write a docstring for a class without one: with one on every class,
    a command-line process keeps the stand-in (test above)."""
    import re
    pattern = re.compile(r'^([ \t]*)@(?:dataclasses\.)?dataclass\b[^\n]*\n(?:\1@[^\n]*\n)*\1class (\w+)[^\n]*:\n'
                         r'(?![ \t]*[rR]?(?:"""|\'\'\'|"|\'))', re.M)
    missing = [f"{f.relative_to(REPO)}: {m.group(2)}" for f in sorted((REPO / "kg").rglob("*.py"))
               for m in pattern.finditer(f.read_text(encoding="utf-8"))]
    assert missing == []
