"""``--format json``: an input error is also a JSON object on stdout (tester defect: stdout was empty,
so a consumer piping into ``json.load`` crashed), beside the one-line stderr message; exit 2."""
from __future__ import annotations

import json

import pytest

from conftest import REPO, run_cli


@pytest.mark.parametrize("argv, message", [
    # an input error raised by the command
    (["kv", "--model", "no/such-model", "--format", "json"], "unknown model 'no/such-model'"),
    (["check", "--vllm", "vllm serve Qwen/Qwen3-32B -tp 1e20", "--format", "json"], "--vllm -tp: expected an integer"),
    # a usage error raised while parsing the flags (--format=json spelling)
    (["kv", "--model", "Qwen/Qwen3-32B", "--tp", "x", "--format=json"], "argument --tp: expected an integer in ASCII digits, found 'x'"),
])
def test_error_is_a_json_object_on_stdout_too(argv, message):
    code, out, err = run_cli(*argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"optkg: error: {message}")
    d = json.loads(out)
    assert (d["schema_version"], d["kind"], d["command"], d["exit_code"]) == ("1.0", "error", argv[0], 2)
    assert d["message"] == err[len("optkg: error: "):].rstrip("\n") and d["details"] == []


def test_detail_lines_are_a_list_and_text_format_keeps_stdout_empty(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "bad.yaml").write_text("ruleset: chekc\nrules: []\n")
    code, out, err = run_cli("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--rules", str(rules),
                             "--format", "json")
    assert code == 2
    d = json.loads(out)
    assert d["message"].startswith("invalid rules: ") and "unknown ruleset 'chekc'" in d["message"]
    assert len(d["details"]) == 1 and "unknown ruleset 'chekc'" in d["details"][0]
    code, out, err = run_cli("check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--rules", str(rules))
    assert code == 2 and out == "" and err.startswith("optkg: error: invalid rules:")


def test_no_json_on_stdout_when_the_report_goes_to_a_file(tmp_path):
    # -o FILE: the report was never meant for stdout, and a refused write leaves everything as it was
    out = tmp_path / "report.json"
    out.write_text("mine\n")
    code, stdout, err = run_cli("matrix", "--format", "json", "-o", str(out))
    assert code == 2 and stdout == "" and "refusing to overwrite" in err and out.read_text() == "mine\n"
    code, stdout, err = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-32B -tp zz", "--format", "json", "-o", "-")
    assert code == 2 and json.loads(stdout)["kind"] == "error"
