"""optkg fit: second tester round (items 2, 4, 5, 12, 13, 14, 15)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "traces"
AZURE = str(TRACES / "azure_llm_inference_2023_code.csv")
MOONCAKE = str(TRACES / "mooncake_fast25_conversation_trace.jsonl")
SMALL = str(REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl")
SMALL_AZURE = REPO / "rules" / "fixtures" / "traces" / "small_azure.csv"


# ---- item 2: every output path is checked before anything is computed or written ---------------

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


# ---- item 4: weights that do not fit are an error, and no KV compression is advised -----------

def test_weights_do_not_fit_qwen3_235b_tp1_h100():
    # weights 470,185,672,704 B = 437.89 GiB on one GPU (kg.derive.kv.weight_bytes_per_gpu, as kg.analyses.check);
    # H100-SXM 81,559 MiB x 0.92 = 73.28 GiB usable (issue 13: the budget check prints);
    # ceil(470,185,672,704 / 78,679,145,185.28) = ceil(5.98) = 6 GPUs
    code, out, _ = run_cli("fit", str(SMALL_AZURE), "--model", "Qwen/Qwen3-235B-A22B", "--tp", "1", "--gpu", "H100-SXM",
                           "--format", "json", "--fail-on", "error")
    assert code == 1
    rep = json.loads(out)
    fired = {r["id"]: r for r in rep["rules"] if r["fired"]}
    w = fired["fit-weights-do-not-fit"]
    assert w["severity"] == "error"
    assert w["numbers"] == {"weight_gib_per_gpu": 437.89, "usable_gib_per_gpu": 73.28, "weight_gib_total": 437.89,
                            "min_gpus_for_weights": 6}
    # the KV budget is 0, but no KV-compression advice: those rules need the kv_budget fact
    for rid in ("fit-memory-first", "fit-compact-kv-pattern", "fit-kv-head-sharing", "fit-long-requests-exceed-gpu"):
        assert rid not in fired
    assert rep["checklist"][3]["answer"] == ("weights 437.89 GiB per GPU exceed the 73.28 GiB the engine may use: "
                                             "no KV budget, fix the weights first")


# ---- item 5: --tp / --pp checked like `optkg kv` (kg.derive.kv.check_parallel_sizes) ------------------

def test_tp_that_does_not_divide_the_heads_is_refused():
    code, _, err = run_cli("fit", str(SMALL_AZURE), "--model", "Qwen/Qwen3-235B-A22B", "--tp", "3")
    assert code == 2
    assert ("--tp: 3 does not divide num_attention_heads 64 of Qwen/Qwen3-235B-A22B; "
            "valid tp sizes: 1, 2, 4, 8, 16, 32, 64") in err
    # the same message as `optkg kv`
    code_kv, _, err_kv = run_cli("kv", "--model", "Qwen/Qwen3-235B-A22B", "--tp", "3")
    assert code_kv == 2 and err_kv == err


def test_tp_16_is_valid_for_4_kv_heads_as_in_optkg_kv():
    # 16 divides 64 query heads and is a multiple of 4 KV heads (each KV head replicated 4x): kv accepts it
    code, out, _ = run_cli("fit", str(SMALL_AZURE), "--model", "Qwen/Qwen3-235B-A22B", "--tp", "16", "--format", "json")
    assert code == 0
    assert json.loads(out)["model"]["tp_size"] == 16


def test_pp_larger_than_layers_refused():
    code, _, err = run_cli("fit", str(SMALL_AZURE), "--model", "meta-llama/Llama-3.1-8B", "--pp", "33")
    assert code == 2
    assert "--pp: 33 pipeline stages for 32 layers of meta-llama/Meta-Llama-3.1-8B; pp_size must be at most 32" in err


# ---- items 12 and 13 on the Mooncake conversation trace with Qwen3-32B on H100 ----------------

@pytest.fixture(scope="module")
def qwen32b():
    code, out, _ = run_cli("fit", MOONCAKE, "--model", "Qwen/Qwen3-32B", "--gpu", "H100-SXM", "--format", "json")
    assert code == 0
    return json.loads(out)


def test_host_tier_fix_names_the_dram_sized_tier(qwen32b):
    fired = {r["id"]: r for r in qwen32b["rules"] if r["fired"]}
    assert "fit-host-tier-exceeds-host-memory" in fired
    # 90 % of the unbounded hits: 31,435 blocks x 512 tokens x 262,144 B/token = 3,929.38 GiB per GPU (tp 1),
    # above 256 GiB of DRAM per GPU, so the fix names 256 GiB x 1 GPU = 256.0 GiB
    assert qwen32b["features"]["host_tier_gib"] == 256.0
    fix = fired["fit-host-kv-cache"]["fix"]
    assert fix.startswith("add a host-memory KV tier of about 256.0 GiB across the parallel group (sized to 256 GiB "
                          "of host DRAM per GPU x 1 GPU(s); 90 % of the unbounded hits would need 3929.38 GiB")
    assert "3929.38 GiB (" not in fix


def test_host_tier_fix_keeps_the_90_percent_size_when_it_fits_dram():
    # small_prefix: 90 % needs 5 blocks x 64 MiB = 0.3125 GiB per GPU (tp 1) < 256 GiB -> round(0.3125, 2) = 0.31
    from kg.knowledge.catalog import load_catalog
    from kg.analyses.fit import run_fixture
    from kg.engine.rules import load_ruleset
    cat, _ = load_catalog()
    firings = run_fixture({"trace": "traces/small_prefix.jsonl", "model": "meta-llama/Llama-3.1-8B", "kv_budget_gib": 0.125},
                          cat, load_ruleset("fit"), REPO / "rules" / "fixtures")
    f = next(f for f in firings if f.rule.id == "fit-host-kv-cache")
    assert f.fired
    from kg.analyses.fit import _fmt
    assert _fmt(f.rule.fix, {"host_tier_gib": 0.31, "host_tier_basis": "90 % of the unbounded hits"}).startswith(
        "add a host-memory KV tier of about 0.31 GiB across the parallel group (90 % of the unbounded hits;")


def test_pattern_1_says_what_the_model_already_has(qwen32b):
    # Qwen3-32B: 64 query heads, 8 KV heads (GQA), no sliding window, not MLA
    f = qwen32b["features"]
    assert f["kv_features_present"] == "GQA"
    assert f["kv_features_missing"] == "MQA, MLA, sliding window"
    assert f["kv_compaction_status"] == ("Qwen/Qwen3-32B already has GQA (8 KV heads for 64 query heads); MQA, MLA, "
                                         "sliding window and cross-layer KV sharing need retraining or a different model")
    p1 = qwen32b["patterns"][0]
    assert p1["recommended"]
    assert p1["message"].endswith(f["kv_compaction_status"] + ".")
    assert {t["id"]: t["needs"] for t in p1["techniques"]} == {
        "sliding-window-attention": "retraining or a different model",
        "multi-query-attention": "retraining or a different model",
        "grouped-query-attention": "already in the model",
        "cross-layer-kv-sharing": "retraining or a different model"}


def test_compaction_status_for_sliding_and_mla_models():
    from kg.analyses.fit import _compaction_status
    from kg.inputs.modelcfg import resolve_model
    # gemma-2-9b: 16 query heads, 8 KV heads, a 4096-token window on every other layer (21 of 42)
    s = _compaction_status(resolve_model("google/gemma-2-9b-it"))
    assert s == {"kv_features_present": "GQA, sliding window", "kv_features_missing": "MQA, MLA",
                 "kv_compaction_status": "google/gemma-2-9b-it already has GQA (8 KV heads for 16 query heads) and a "
                                         "4096-token sliding window on 21 of 42 layers; MQA, MLA and cross-layer KV "
                                         "sharing need retraining or a different model"}
    # DeepSeek-V3: MLA with kv_lora_rank 512
    s = _compaction_status(resolve_model("deepseek-ai/DeepSeek-V3"))
    assert s["kv_features_present"] == "MLA"
    assert s["kv_compaction_status"].startswith("deepseek-ai/DeepSeek-V3 already has MLA (latent of kv_lora_rank 512); ")


# ---- item 14: an Azure CSV whose last row has no line ending --------------------------------

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


# ---- item 15: the plot's sequence-length panel shows the context limit -----------------------

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
