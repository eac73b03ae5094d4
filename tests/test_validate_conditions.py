"""optkg validate on coupling conditions: syntax errors with their position, typos with a suggestion, baselines
that hide warnings but never errors; --select and place on an entry with problems.

Each test builds its own catalog copy under tmp_path (tests/catalog_copy.py) and runs the CLI on it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog_copy import copy_catalog, optkg
from conftest import run_cli

DCP = "catalog/techniques/decode-context-parallelism.yaml"
# line 49 of the shipped file is "    condition: dcp_size > 1" (couplings[0]); the problem points at
# the condition key, column 4 (indent) + 1 = 5
COND_LINE, COND_COL = 49, 5


def _break_condition(home: Path, new: str) -> Path:
    f = home / DCP
    lines = f.read_text(encoding="utf-8").split("\n")
    assert lines[COND_LINE - 1] == "    condition: dcp_size > 1"
    lines[COND_LINE - 1] = f"    condition: {new}"
    f.write_text("\n".join(lines), encoding="utf-8")
    return f


@pytest.fixture
def home(tmp_path):
    return copy_catalog(tmp_path / "home", examples=False)


def _validate_json(home: Path, *extra: str) -> tuple[int, dict]:
    r = optkg(["validate", "--format", "json", *extra], home)
    return r.returncode, json.loads(r.stdout)


def test_shipped_catalog_has_no_condition_warnings(catalog):
    # the unknown-fact check must not flag real facts that merely look alike
    # (max_power_limit_watts vs power_limit_watts, num_mamba_layers vs num_moe_layers, is_moe vs is_mla)
    assert [w.one_line() for w in catalog.warnings] == []


def test_condition_syntax_error_is_an_error_with_position(home):
    _break_condition(home, '"attention == ((("')
    code, d = _validate_json(home)
    assert code == 2
    [p] = [p for p in d["problems"] if p["code"] == "coupling-condition"]
    assert (p["file"].endswith("decode-context-parallelism.yaml"), p["line"], p["column"]) == (True, COND_LINE, COND_COL)
    assert p["severity"] == "error" and p["path"] == "couplings[0].condition"
    # kg.engine.expr passes on CPython's parse message; the last '(' of "attention == (((" is character 16
    assert p["message"] == "condition 'attention == (((' does not parse: syntax error at column 16: '(' was never closed"


def test_condition_operator_garbage_is_an_error(home):
    _break_condition(home, '"ssd_cache_gb >> and ("')
    code, d = _validate_json(home)
    assert code == 2
    assert [p["code"] for p in d["problems"]] == ["coupling-condition"]


def test_condition_typo_warns_with_suggestion(home):
    _break_condition(home, "dcp_size > 1 and tp_sizee > 1")
    code, d = _validate_json(home)
    assert code == 1  # warnings only: --fail-on warning (the default) -> 1
    msgs = [(p["code"], p["severity"], p["message"], p["line"]) for p in d["problems"]]
    assert msgs == [("coupling-unknown-fact", "warning", "unknown fact 'tp_sizee' (did you mean 'tp_size'?)", COND_LINE)]


def test_condition_unknown_name_without_close_match_is_silent(home):
    # 'flux_capacitor_level' is close to no known name: not flagged (only likely typos warn)
    _break_condition(home, "dcp_size > 1 and flux_capacitor_level > 1")
    code, d = _validate_json(home)
    assert (code, d["problems"]) == (0, [])


def test_baseline_never_hides_errors(home):
    _break_condition(home, '"attention == ((("')
    r = optkg(["validate", "--write-baseline", "bl.json"], home)
    assert r.returncode == 2
    assert "1 error(s) left out of bl.json" in r.stderr
    assert json.loads((home / "bl.json").read_text())["fingerprints"] == []
    code, d = _validate_json(home, "--baseline", "bl.json")
    assert code == 2 and d["suppressed"] == 0 and [p["code"] for p in d["problems"]] == ["coupling-condition"]
    # a baseline written by hand with the error's fingerprint still does not hide it
    (home / "bl2.json").write_text(json.dumps({"schema_version": "1.0", "fingerprints": [d["problems"][0]["fingerprint"]]}))
    code, d = _validate_json(home, "--baseline", "bl2.json")
    assert code == 2 and d["suppressed"] == 0


def test_baseline_still_hides_warnings(home):
    _break_condition(home, "dcp_size > 1 and tp_sizee > 1")
    assert optkg(["validate", "--write-baseline", "bl.json"], home).returncode == 1
    code, d = _validate_json(home, "--baseline", "bl.json")
    assert (code, d["problems"], d["suppressed"]) == (0, [], 1)


def test_select_nonsense_suggests_nothing(home):
    r = optkg(["validate", "--select", "nonsense"], home)
    # difflib ratio('nonsense', 'none') = 2*4/12 = 0.67 < cutoff 0.75: no "did you mean none?"
    assert r.returncode == 2
    assert r.stderr.strip() == "optkg: error: --select: 'nonsense' matches no rule id, tag, severity or check code"
    r = optkg(["validate", "--select", "coupling-conditon"], home)
    assert r.stderr.strip().endswith("did you mean coupling-condition?")


def test_place_header_names_entry_with_problems(home):
    f = _break_condition(home, '"attention == ((("')
    r = optkg(["place", str(f)], home)
    assert r.stdout.splitlines()[0] == "optkg place: decode-context-parallelism (Decode context parallelism)"
    assert "the entry has problems" in r.stdout


def test_new_outside_the_catalog_suggests_place_then_move(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "new").mkdir()
    code, out, err = run_cli("new", "zz-outside", "-o", "new")
    assert code == 0, err
    assert "`optkg place new/zz-outside.yaml`" in out and "then move it to" in out
    assert "optkg validate new/zz-outside.yaml" not in out
    text = (tmp_path / "new" / "zz-outside.yaml").read_text()
    assert "(after moving it there)" in text
