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


def test_a_warm_optkg_check_keeps_inspect_deferred_and_loads_no_zipfile_difflib_yaml_durable_rules_or_packaging():
    """durable-rules asks ``inspect.ismethod`` of each action it registers: the stand-in answers it (kg.cli); the
    wheel reader (zipfile) and the "did you mean" matcher (difflib) are loaded only when used; a warm check of an
    unchanged stack reads its rule matches from the cache (kg.engine.durable): no durable-rules, no logging; and
    every shipped table it reads (the transformers class defaults too) from the content-keyed cache: no PyYAML; the
    releases and ranges it compares (plain, and the registry's 0.4.0.post1) through kg.core.relcmp: no packaging,
    whose two version patterns took ~6 ms to compile."""
    code = ("import sys; from kg.cli import main; rc = main(['check', 'examples/qwen3-235b-tp8.yaml', '--fail-on', "
            "'never']); print(rc, sorted(m for m in sys.modules if m in ('zipfile', 'difflib', 'dis', 'durable', 'logging', 'yaml', "
            "'packaging')), "
            "type(sys.modules['inspect']).__name__)")
    for _ in range(2):  # the first run may fill this session's cache, the second reads it
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.splitlines()[-1] == "0 [] _Deferred"


def test_the_stand_in_answers_ismethod_as_inspect_does_until_the_module_loads(tmp_path, monkeypatch):
    import inspect
    import types

    from kg.cli import _ismethod

    class C:
        def m(self):
            return 1
    for obj in (C().m, C.m, len, [].append, types.MethodType(len, 1), C, None):
        assert _ismethod(obj) is inspect.ismethod(obj), obj
    (tmp_path / "optkg_deferred_probe2.py").write_text("def f():\n    return 'real'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "optkg_deferred_probe2", raising=False)
    deferred.defer("optkg_deferred_probe2", f=lambda: "stand-in")
    import optkg_deferred_probe2 as early
    assert early.f() == "stand-in" and sys.modules["optkg_deferred_probe2"] is early  # answered, not loaded
    assert early.__getattr__("f")() == "real"  # any other read loads the module, whose own names replace the stand-in's
    assert early.f() == "real"
    monkeypatch.delitem(sys.modules, "optkg_deferred_probe2")


def test_a_one_shot_process_keeps_its_exit_code_and_runs_an_exit_handler_registered_before_main():
    """The console script ends with os._exit after the command (kg.cli._exit_now): the exit code is the command's;
    with an exit handler registered before main (coverage, an embedding program) the interpreter exits as usual."""
    run = "import sys; sys.argv = ['optkg'] + sys.argv[1:]; from kg.cli import main; sys.exit(main())"
    bad = [sys.executable, "-c", run, "check", "examples/qwen3-235b-tp8.yaml", "--select", "nonsense-x"]
    p = subprocess.run(bad, capture_output=True, text=True, cwd=REPO)
    assert (p.returncode, p.stdout) == (2, "") and p.stderr.startswith("optkg: error: --select: 'nonsense-x'")
    ok = [sys.executable, "-c", "import atexit; atexit.register(print, 'handler ran'); " + run, "kv", "--model",
          "Qwen/Qwen3-235B-A22B", "--tp", "8", "--format", "json"]
    p = subprocess.run(ok, capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 0 and p.stdout.endswith("}\nhandler ran\n")
