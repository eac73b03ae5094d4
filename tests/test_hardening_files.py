"""File safety: no command overwrites a user's file without --force; writes are atomic (an
interrupted write leaves the old file and no temp file); ``-o`` writes exactly the path asked for
and nothing else."""
from __future__ import annotations

import os

import pytest

from conftest import SHARED, run_cli
from kg.core import yamlio

MODEL = "Qwen/Qwen3-235B-A22B"
VLLM = f"vllm serve {MODEL} -tp 8"
METRICS = SHARED / "data" / "metrics" / "vllm_metrics_datadog_fixture_opt125m.prom"
TRACE = SHARED / "data" / "traces" / "azure_llm_inference_2023_code.csv"

# every command that writes a report with -o (and its arguments); suffix decides the format where it matters
COMMANDS = {
    "check": (["check", "--vllm", VLLM, "--format", "json", "--fail-on", "never"], ".json"),
    "sweep": (["sweep", "--vllm", VLLM, "--dcp", "1,2", "--format", "csv"], ".csv"),
    "validate": (["validate", "--format", "json"], ".json"),
    "diagnose": (["diagnose", str(METRICS), "--format", "json", "--fail-on", "never"], ".json"),
    "fit": (["fit", str(TRACE), "--format", "json"], ".json"),
    "matrix": (["matrix", "--format", "json"], ".json"),
    "gaps": (["gaps", "--format", "json"], ".json"),
    "export": (["export", "graph", "--format", "dot"], ".dot"),
}


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_overwrite_without_force_then_force_replaces(tmp_path, name):
    argv, suffix = COMMANDS[name]
    out = tmp_path / f"report{suffix}"
    out.write_text("the user's own file\n")
    code, stdout, err = run_cli(*argv, "-o", str(out))
    assert code == 2, (code, err)
    assert err == f"optkg: error: {out}: exists; refusing to overwrite (pass --force to replace it)\n"
    assert out.read_text() == "the user's own file\n" and stdout == ""
    code, stdout, err = run_cli(*argv, "-o", str(out), "--force")
    assert code in (0, 1), err
    assert out.read_text() != "the user's own file\n" and out.stat().st_size > 0
    assert tree(tmp_path) == [out.name]  # no temp file left beside it


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_o_writes_exactly_where_asked(tmp_path, monkeypatch, name):
    argv, suffix = COMMANDS[name]
    work = tmp_path / "cwd"
    (work / "sub").mkdir(parents=True)
    monkeypatch.chdir(work)
    code, stdout, err = run_cli(*argv, "-o", f"sub/out{suffix}")
    assert code in (0, 1), err
    assert tree(tmp_path) == ["cwd", "cwd/sub", f"cwd/sub/out{suffix}"]
    assert stdout == ""
    # a folder that does not exist is an error naming it, and nothing is created
    code, stdout, err = run_cli(*argv, "-o", f"missing/out{suffix}")
    assert code == 2 and err == f"optkg: error: missing/out{suffix}: folder missing does not exist\n"
    assert tree(tmp_path) == ["cwd", "cwd/sub", f"cwd/sub/out{suffix}"]


def _interrupt_at(monkeypatch, where: str):
    if where == "rename":
        def boom(*a, **k):
            raise KeyboardInterrupt
        monkeypatch.setattr(yamlio.os, "replace", boom)
    else:  # half-way through writing the temp file
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, fh):
                self.fh = fh

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.fh.close()

            def write(self, data):
                self.fh.write(data[: len(data) // 2])
                raise KeyboardInterrupt

        monkeypatch.setattr(yamlio.os, "fdopen", lambda fd, mode="r", *a, **k: HalfWriter(real_fdopen(fd, mode, *a, **k)))


@pytest.mark.parametrize("where", ["write", "rename"])
@pytest.mark.parametrize("name", ["check", "sweep", "export"])
def test_interrupted_write_keeps_the_old_file(tmp_path, monkeypatch, name, where):
    argv, suffix = COMMANDS[name]
    out = tmp_path / f"report{suffix}"
    out.write_text("previous report\n")
    _interrupt_at(monkeypatch, where)
    code, stdout, err = run_cli(*argv, "-o", str(out), "--force")
    assert code == 130 and err == "optkg: interrupted\n"
    assert out.read_text() == "previous report\n"
    assert tree(tmp_path) == [out.name]


def test_atomic_write_never_clobbers_a_file_that_appears_meanwhile(tmp_path, monkeypatch):
    # force=False: the final step is link(), which fails if the target was created after the check
    out = tmp_path / "x.txt"
    real_link = os.link

    def racing_link(src, dst):
        out.write_text("someone else's\n")
        return real_link(src, dst)
    monkeypatch.setattr(yamlio.os, "link", racing_link)
    with pytest.raises(yamlio.OptkgError, match="exists; refusing to overwrite"):
        yamlio.atomic_write(out, "mine\n", force=False)
    assert out.read_text() == "someone else's\n" and tree(tmp_path) == ["x.txt"]
