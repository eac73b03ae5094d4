"""Helpers the CLI tests share: the one-line user-error contract and check's JSON report."""
from __future__ import annotations

import json

from conftest import REPO, run_cli

EXAMPLE = str(REPO / "examples" / "qwen3-235b-tp8.yaml")


def one_line_error(code: int, err: str) -> str:
    """The CLI's user-error contract: exit 2 and exactly one line ``optkg: error: ...``."""
    assert code == 2, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("optkg: error: "), err
    return lines[0]


def check_json(*argv: str) -> tuple[int, dict]:
    code, out, err = run_cli("check", *argv, "--format", "json", "--no-speed")  # no caller reads the Speed section
    assert code in (0, 1), err
    return code, json.loads(out)


def fired(d: dict) -> dict[str, dict]:
    return {f["rule_id"]: f for f in d["findings"]}


def model(name: str):
    from kg.inputs.modelcfg import resolve_model
    return resolve_model(name)


def check_report(args: list[str]) -> dict:
    code, out, err = run_cli("check", *args, "--format", "json", "--no-speed")  # no caller reads the Speed section
    assert code in (0, 1), err
    return json.loads(out)
