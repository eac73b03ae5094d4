"""Writing output never loses anything: no write through a symlink, onto a device or an input, into a missing
folder, or over a file without --force; every output path is checked before anything is computed or written."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from catalog_copy import copy_catalog, optkg
from cli_helpers import EXAMPLE, one_line_error
from conftest import REPO, run_cli
from kg.core.errors import OptkgError

SMALL = str(REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl")


@pytest.fixture
def home(tmp_path):
    return copy_catalog(tmp_path / "home", examples=False)


@pytest.mark.parametrize("target", ["/sys/optkg-x", "/proc/optkg-x"])
def test_unwritable_output_is_a_user_error(target):
    code, _, err = run_cli("check", EXAMPLE, "-o", target)
    assert f"{target}: cannot write" in one_line_error(code, err)
    code, _, err = run_cli("new", "zz-never", "-o", os.path.dirname(target))
    assert "cannot write" in one_line_error(code, err)


def test_force_never_replaces_a_device_or_an_input(tmp_path):
    code, _, err = run_cli("check", EXAMPLE, "-o", "/dev/full", "--force")
    assert "not a regular file" in one_line_error(code, err)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    stack = tmp_path / "s.yaml"
    stack.write_text(Path(EXAMPLE).read_text())
    before = stack.read_bytes()
    code, _, err = run_cli("check", str(stack), "-o", str(stack), "--force")
    assert "is an input of this command" in one_line_error(code, err)
    assert stack.read_bytes() == before
    # the same file through another spelling (.. and a symlink) is still the input
    link = tmp_path / "link.yaml"
    link.symlink_to(stack)
    code, _, err = run_cli("check", str(stack), "-o", str(tmp_path / "sub" / ".." / "link.yaml"), "--force")
    assert code == 2 and stack.read_bytes() == before
    base = tmp_path / "base.json"
    base.write_text('{"schema_version": "1.0", "fingerprints": []}\n')
    code, _, err = run_cli("check", str(stack), "--baseline", str(base), "--write-baseline", str(base), "--force")
    assert "is an input" in one_line_error(code, err)


def test_atomic_write_edges(tmp_path):
    from kg.core.yamlio import atomic_write
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OptkgError, match="not a regular file"):
        atomic_write(fifo, "x", force=True)
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with pytest.raises(OptkgError, match="symbolic link"):  # never written through (second tester, item 22)
        atomic_write(link, "new", force=True)
    assert link.is_symlink() and real.read_text() == "old"
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if not os.access(ro, os.W_OK):  # root may write anyway
            with pytest.raises(OptkgError, match="cannot write"):
                atomic_write(ro / "x.txt", "x")
    finally:
        ro.chmod(0o700)


def test_atomic_write_refuses_symlink(tmp_path):
    from kg.core.yamlio import atomic_write
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with pytest.raises(OptkgError) as e:
        atomic_write(link, "new", force=True)
    assert str(e.value).startswith(f"{link}: is a symbolic link to {os.path.realpath(real)}; ")
    assert "\n" not in str(e.value)
    assert real.read_text() == "old" and link.is_symlink()


def test_atomic_write_refuses_dangling_symlink(tmp_path):
    from kg.core.yamlio import atomic_write
    target = tmp_path / "nowhere" / ".." / "created.txt"
    link = tmp_path / "dangling.txt"
    link.symlink_to(tmp_path / "created.txt")
    with pytest.raises(OptkgError, match=f"symbolic link to {tmp_path / 'created.txt'}"):
        atomic_write(link, "x", force=True)
    assert not (tmp_path / "created.txt").exists() and link.is_symlink()
    del target


def test_cli_output_symlink_with_force_is_refused(home):
    (home / "victim.txt").write_text("keep")
    (home / "out.svg").symlink_to(home / "victim.txt")
    r = optkg(["export", "map", "-o", "out.svg", "--force"], home)
    assert r.returncode == 2 and "is a symbolic link to" in r.stderr and r.stderr.count("\n") == 1
    assert (home / "victim.txt").read_text() == "keep"


def test_export_format_disagreeing_with_suffix(home):
    r = optkg(["export", "map", "--format", "png", "-o", "x.svg"], home)
    assert r.returncode == 2
    assert r.stderr == ("optkg: error: --format png disagrees with the suffix of -o x.svg (svg); "
                        "drop --format or name the file *.png\n")
    assert not (home / "x.svg").exists()


def test_export_format_agreeing_with_suffix_writes(home):
    r = optkg(["export", "map", "--format", "dot", "-o", "x.gv"], home)
    assert r.returncode == 0
    assert (home / "x.gv").read_text().lstrip().startswith(("digraph", "strict digraph", "graph"))


def test_o_equal_to_plot_is_refused_and_nothing_written(tmp_path):
    y = tmp_path / "y.png"
    code, _, err = run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--plot", str(y), "-o", str(y))
    assert code == 2
    assert f"-o and --plot name the same file ({y})" in err
    assert not y.exists()


def test_missing_output_folder_refused_before_the_plot_is_written(tmp_path):
    z, r = tmp_path / "z.png", tmp_path / "nodir" / "r.txt"
    code, _, err = run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--plot", str(z), "-o", str(r))
    assert code == 2
    assert f"{r}: folder {r.parent} does not exist" in err
    assert not z.exists()


def test_existing_output_refused_before_the_plot_is_written(tmp_path):
    z, r = tmp_path / "z.png", tmp_path / "r.txt"
    r.write_text("keep")
    code, _, err = run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--plot", str(z), "-o", str(r))
    assert code == 2
    assert f"{r}: exists; refusing to overwrite" in err
    assert not z.exists() and r.read_text() == "keep"


def test_missing_plot_folder_refused(tmp_path):
    z = tmp_path / "nodir" / "z.png"
    code, out, err = run_cli("fit", SMALL, "--plot", str(z))
    assert code == 2 and out == ""
    assert f"{z}: folder {z.parent} does not exist" in err
