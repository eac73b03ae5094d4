"""A trace whose last row has no line ending may be cut short: fit says so (Azure CSV only)."""
from __future__ import annotations

import json

from conftest import REPO, run_cli

SMALL_AZURE = REPO / "rules" / "fixtures" / "traces" / "small_azure.csv"


def test_cut_azure_csv_gets_a_truncation_note(tmp_path):
    text = SMALL_AZURE.read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text.rstrip("\n")[:-1])  # last row "...,1200,20" cut to "...,1200,2", no newline
    n_lines = text.count("\n")  # the cut row is line n_lines (header is line 1)
    code, out, _ = run_cli("fit", str(cut), "--format", "json")
    assert code == 0
    notes = json.loads(out)["notes"]
    assert notes[0].startswith(f"warning: {cut}:{n_lines}: the last row has no line ending while the earlier rows "
                               "have one: the file may be truncated")
    whole = tmp_path / "whole.csv"
    whole.write_text(text)
    code, out, _ = run_cli("fit", str(whole), "--format", "json")
    assert not any("truncated" in n for n in json.loads(out)["notes"])


def test_truncation_note_only_for_azure(tmp_path):
    from kg.inputs.traces import truncation_note
    j = tmp_path / "t.jsonl"
    j.write_text('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n'
                 '{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}')
    assert truncation_note(j, "mooncake") is None
    one = tmp_path / "one.csv"
    one.write_text("TIMESTAMP,ContextTokens,GeneratedTokens")
    assert truncation_note(one, "azure") is None
