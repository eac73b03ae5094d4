"""fit's plot: the sequence-length panel marks the knee and the model's context limit."""
from __future__ import annotations

from conftest import REPO, run_cli

SMALL = str(REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl")


def test_plot_markers_include_the_context_limit():
    from kg.output.fitreport import seq_len_markers
    # Llama-3.1-8B: 131,072 B/token; a 64 GiB budget holds 524,288 tokens, above max_position_embeddings 131,072
    cc = {"budget_bytes_per_gpu": 64 * 2**30, "knee_seq_len": 524288, "context_limit": 131072,
          "context_limit_by": "max_position_embeddings", "seq_len_limit": 131072,
          "seq_len_limit_by": "max_position_embeddings"}
    assert seq_len_markers(cc) == [
        (524288, "knee 524,288 tokens", "tab:red"),
        (131072, "context limit 131,072 tokens (max_position_embeddings) (binds)", "tab:purple")]
    cc.update(knee_seq_len=1000, seq_len_limit=1000, seq_len_limit_by="KV memory")
    assert seq_len_markers(cc)[1] == (131072, "context limit 131,072 tokens (max_position_embeddings)", "tab:purple")


def test_plot_is_drawn_with_the_context_limit(tmp_path):
    p = tmp_path / "c.png"
    code, _, _ = run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "64", "--plot", str(p))
    assert code == 0 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
