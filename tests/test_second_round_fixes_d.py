"""Second tester round, items 18, 19, 20 and 21 (sweep CSV integers; kv_tokens_total with SGLang --dp;
fp8-kv-default-scales and fp8_ds_mla).

Model facts (catalog/models/Qwen__Qwen3-235B-A22B.json, the Hugging Face config.json): 94 layers,
64 query heads, 4 KV heads, head_dim 128, bfloat16.
"""
from __future__ import annotations

import csv
import io
import json

from kg.knowledge.catalog import load_catalog
from kg.cli import main
from kg.output.diagrams.graphview import _edge_attrs, graph_view
from kg.output.diagrams.style import CONDITIONAL_ALPHA, CONDITIONAL_PENWIDTH, EDGE_STYLES
from kg.knowledge.graph import build_graph
from kg.engine.rules import evaluate_rules, load_ruleset

QWEN = "Qwen/Qwen3-235B-A22B"


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# --- item 18: explain ------------------------------------------------------------------------

def test_explain_same_technique_twice_is_a_one_line_error(capsys):
    code, out, err = run(["explain", "tensor-parallelism", "tp"], capsys)  # 'tp' is an alias of the same technique
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "are the same technique (tensor-parallelism)" in err


def test_explain_property_lists_edges_into_and_out_of_it(capsys):
    code, out, _ = run(["explain", "num_key_value_heads", "--format", "json"], capsys)
    assert code == 0
    d = json.loads(out)
    # the catalog's couplings into p:num_key_value_heads, worked from the YAML: DCP requires tp_size > H_kv,
    # GQA requires tp_size and H_kv to divide one another (both vLLM-only)
    into = sorted((e["from"], e["kind"]) for e in d["into"])
    assert ("t:decode-context-parallelism", "requires") in into
    assert ("t:grouped-query-attention", "requires") in into
    g = build_graph(load_catalog()[0])
    assert len(d["into"]) == g.in_degree("p:num_key_value_heads")
    assert len(d["out_of"]) == g.out_degree("p:num_key_value_heads")
    code, out, _ = run(["explain", "num_key_value_heads"], capsys)
    assert "raised by (edges into it):" in out and "Decode context parallelism --requires" in out
    assert "(engines: vllm)" in out


def test_explain_property_with_effects_shows_causes_and_mitigations(capsys):
    # kv_bytes_per_token is mitigated by KV-cache quantization (its coupling 'mitigates' it)
    code, out, _ = run(["explain", "kv_bytes_per_token", "--format", "json"], capsys)
    d = json.loads(out)
    assert any(e["from"] == "t:kv-cache-quantization" and e["kind"] == "mitigates" for e in d["into"])
    code, out, _ = run(["explain", "kv_bytes_per_token"], capsys)
    assert "mitigated by:" in out and "KV-cache quantization --mitigates" in out


# --- item 19: export --depth, conditional couplings, engine qualifier ------------------------

def test_export_depth_without_focus_is_an_error(capsys, tmp_path):
    code, out, err = run(["export", "graph", "--depth", "2", "-o", str(tmp_path / "g.dot")], capsys)
    assert code == 2 and err.count("\n") == 1 and "--depth" in err and "--focus" in err
    assert not (tmp_path / "g.dot").exists()


def test_conditional_coupling_is_dashed_and_lighter_unconditional_is_not():
    cond = _edge_attrs({"kind": "conflicts_with", "condition": "tp_size > 1", "mechanism": "m"})
    plain = _edge_attrs({"kind": "conflicts_with", "condition": "", "mechanism": "m"})
    assert plain["style"] == "bold" and plain["color"] == "#d62728"
    assert cond["style"] == "dashed" and cond["color"] == "#d62728" + CONDITIONAL_ALPHA == "#d6272880"
    assert cond["penwidth"] == CONDITIONAL_PENWIDTH == "0.8"
    assert EDGE_STYLES["conflicts_with"]["style"] == "bold"


def test_speculative_decoding_vs_tp_drawn_conditional(capsys):
    cat = load_catalog()[0]
    vg = graph_view(cat, focus="speculative-decoding", depth=1)
    edges = [(u, v, d) for u, v, d in vg.edges(data=True)
             if {u, v} == {"t:speculative-decoding", "t:tensor-parallelism"} and d["kind"] == "conflicts_with"]
    assert edges and all(d["condition"] for _, _, d in edges)
    assert all(_edge_attrs(d)["style"] == "dashed" for _, _, d in edges)
    code, out, _ = run(["export", "graph", "--focus", "speculative-decoding", "--format", "dot"], capsys)
    assert "the coupling holds only under its condition" in out  # the legend says so


def test_fp8_block_reuse_conflict_names_tensorrt_llm(capsys):
    cat = load_catalog()[0]
    c = [c for c in cat.techniques["kv-cache-quantization"]["couplings"]
         if c.get("target") == "prefix-caching" and c["kind"] == "conflicts_with"]
    assert c and all(x["engines"] == ["trtllm"] and "TensorRT-LLM" in x["mechanism"] for x in c)
    code, out, _ = run(["explain", "kv-cache-quantization", "prefix-caching"], capsys)
    assert "(engines: trtllm)--> Prefix caching" in out


# --- item 20: DCP communication coupling consistent with the startup check --------------------

def test_dcp_communication_coupling_only_within_the_valid_range():
    cat = load_catalog()[0]
    comm = [c for c in cat.techniques["decode-context-parallelism"]["couplings"]
            if c.get("property") == "communication_volume" and "num_key_value_heads" in (c.get("condition") or "")]
    assert len(comm) == 1
    assert comm[0]["condition"] == "attention != 'mla' and dcp_size > 1 and dcp_size <= tp_size // num_key_value_heads"
    assert "refuses to start" in comm[0]["mechanism"]
    # the startup check (requires kv_head_replication) keeps dcp_size <= tp_size // num_key_value_heads
    req = [c for c in cat.techniques["decode-context-parallelism"]["couplings"]
           if c.get("property") == "kv_head_replication" and c["kind"] == "requires"]
    assert req[0]["condition"] == "attention == 'mla' or dcp_size <= tp_size // num_key_value_heads"
    assert req[0]["severity"] == "error"


# --- item 21: sweep CSV integers, SGLang --dp KV total, fp8_ds_mla ----------------------------

def test_sweep_csv_writes_whole_numbers_as_integers(capsys):
    code, out, _ = run(["sweep", "--vllm", f"vllm serve {QWEN}", "--tp", "4", "--kv-budget-gib", "40",
                        "--format", "csv"], capsys)
    row = next(csv.DictReader(io.StringIO(out)))
    # 94 layers x 2 (K,V) x 128 x 2 bytes x (4 KV heads / tp 4 = 1 per rank) = 48,128 bytes/token/GPU
    assert row["kv_bytes_per_token_per_gpu"] == "48128"
    # 40 GiB = 42,949,672,960 B; // (48,128 x 16) = 55,775 blocks -> 892,400 tokens
    assert row["kv_budget_bytes_per_gpu"] == "42949672960" and row["kv_tokens_per_gpu"] == "892400"


def _derived(argv, capsys):
    code, out, _ = run(argv + ["--format", "json"], capsys)
    return json.loads(out)["derived"]


def test_kv_tokens_total_counts_every_sglang_dp_pool(capsys):
    base = f"python -m sglang.launch_server --model-path {QWEN} --tp 8"
    # 10 GiB = 10,737,418,240 B / 48,128 B/token = 223,101 tokens per GPU (SGLang pages of 1 token)
    one = _derived(["check", "--sglang", base, "--kv-budget-gib", "10"], capsys)
    assert one["kv_tokens_per_gpu"] == 223101 and one["kv_tokens_total"] == 223101
    # --dp 2 with DP attention: 2 attention groups, each its own pool -> 2 x 223,101 = 446,202
    two = _derived(["check", "--sglang", base + " --dp 2 --enable-dp-attention", "--kv-budget-gib", "10"], capsys)
    assert two["kv_tokens_per_gpu"] == 223101 and two["kv_tokens_total"] == 446202


def test_fp8_kv_default_scales_skips_fp8_ds_mla():
    rs = load_ruleset("check")
    rule = next(r for r in rs.rules if r.id == "fp8-kv-default-scales")
    assert "kv_cache_dtype != 'fp8_ds_mla'" in rule.condition
    # vLLM: fp8_ds_mla is FlashMLASparseBackend's layout (is_sparse, DeepSeek-V3.2 DSA), dense FLASHMLA takes
    # auto/fp8/fp8_e4m3 only: the fix text must not offer it for every MLA model
    nv = next(r for r in rs.rules if r.id == "nvfp4-kv-cache-with-mla")
    assert "not DeepSeek-V3)" in nv.fix
