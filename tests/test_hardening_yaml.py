"""YAML safety: unsafe tags refused, alias bombs refused before they expand, a size limit that names
itself, non-UTF-8 bytes reported with the file name, runaway nesting refused -- through the library
(kg.core.yamlio) and through the CLI (exit 2, one line, no traceback)."""
from __future__ import annotations

import resource

import pytest

from conftest import run_cli
from kg.core.errors import OptkgError
from kg.core.yamlio import MAX_BYTES, MAX_NODES, load_yaml, parse_yaml, read_text


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("optkg: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/new:os.system ['touch {marker}']",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/object:kg.inputs.stack.Stack {{name: x}}",
])
def test_unsafe_tags_are_refused_and_nothing_runs(tmp_path, tag):
    marker = tmp_path / "pwned"
    f = tmp_path / "stack.yaml"
    f.write_text(f"model: Qwen/Qwen3-235B-A22B\nname: {tag.format(marker=marker)}\n")
    with pytest.raises(OptkgError, match=r"stack\.yaml:2:\d+: YAML error: unsafe or unknown tag refused"):
        load_yaml(f)
    err = one_line_error(*run_cli("check", str(f))[::2])
    assert "unsafe or unknown tag refused" in err and f"{f}:2:" in err
    assert not marker.exists()


def _bomb(levels: int) -> str:
    # the classic "billion laughs": each level repeats the previous one 10 times -> 10**levels leaves
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_before_expansion(tmp_path):
    text = _bomb(9)  # 10**9 leaves if expanded; a few hundred bytes on disk
    assert len(text) < 1000
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(OptkgError, match=rf"expands to more than {MAX_NODES} nodes.*alias bomb"):
        parse_yaml(text, "bomb.yaml")
    # expanding even 10**6 nodes would cost ~100 MB; the refusal happens on the composed node graph
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024 < 50
    f = tmp_path / "bomb.yaml"
    f.write_text(text)
    err = one_line_error(*run_cli("check", str(f))[::2])
    assert "alias bomb" in err and str(f) in err


def test_small_alias_use_is_fine():
    doc = parse_yaml(_bomb(3), "ok.yaml")  # 10**3 leaves: legitimate anchors keep working
    assert len(doc.data["a2"]) == 10 and doc.data["a2"][0][0][0] == "lol"


def test_size_limit_is_named(tmp_path):
    f = tmp_path / "huge.yaml"
    f.write_text("model: Qwen/Qwen3-235B-A22B\n# " + "x" * MAX_BYTES + "\n")
    size = f.stat().st_size
    with pytest.raises(OptkgError, match=rf"file is {size} bytes, over the limit of {MAX_BYTES} bytes"):
        load_yaml(f)
    err = one_line_error(*run_cli("check", str(f))[::2])
    assert f"over the limit of {MAX_BYTES} bytes" in err and str(f) in err


def test_endless_file_stops_at_the_limit():
    # /dev/zero reports size 0 and never ends; reading stops one byte past the limit (the error is
    # raised only after reading limit + 1 bytes, so reaching it proves the read was bounded; no timer)
    with pytest.raises(OptkgError, match=r"/dev/zero: file is over the limit of 1024 bytes"):
        read_text("/dev/zero", max_bytes=1024)
    err = one_line_error(*run_cli("kv", "--config", "/dev/zero")[::2])
    assert "/dev/zero: file is over the limit" in err


def test_non_utf8_is_reported_with_file_and_line(tmp_path):
    f = tmp_path / "latin1.yaml"
    f.write_bytes("model: Qwen/Qwen3-235B-A22B\nname: caf".encode() + b"\xe9\n")
    # "model: " (7) + "Qwen/Qwen3-235B-A22B" (20) + "\n" (1) = 28 bytes, "name: caf" 9 more:
    # the bad byte 0xe9 sits at offset 37, on line 2
    with pytest.raises(OptkgError, match=r"latin1\.yaml:2: not valid UTF-8 \(byte 0xe9 at offset 37\)"):
        load_yaml(f)
    err = one_line_error(*run_cli("check", str(f))[::2])
    assert f"{f}:2: not valid UTF-8 (byte 0xe9 at offset 37)" in err


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 400))])
def test_runaway_nesting_is_refused(tmp_path, text):
    f = tmp_path / "deep.yaml"
    f.write_text(text)
    with pytest.raises(OptkgError, match=r"nesting"):
        load_yaml(f)
    err = one_line_error(*run_cli("check", str(f))[::2])
    assert "nesting" in err


def test_technique_file_with_unsafe_tag_is_a_validate_problem(tmp_path):
    from catalog_copy import copy_catalog
    home = copy_catalog(tmp_path / "home", examples=False)
    f = home / "catalog" / "techniques" / "evil.yaml"
    f.write_text("id: evil\nname: !!python/object/apply:os.system ['true']\n")
    code, out, err = run_cli("validate", "--catalog", str(home / "catalog"), "--rules", str(home / "rules"), str(f))
    assert code == 2 and err == ""
    assert "unsafe or unknown tag refused" in out and f"{f}:2:" in out
