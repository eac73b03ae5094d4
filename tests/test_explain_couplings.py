"""optkg explain on couplings: a property's edges in and out, mitigations, conditions and engine qualifiers, and
the coupling data they read (DCP's communication cost only in its valid range, TensorRT-LLM's FP8 block reuse)."""
from __future__ import annotations

import json

from conftest import run_cli
from kg.cli import main
from kg.knowledge.catalog import load_catalog
from kg.knowledge.graph import build_graph


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


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


def test_fp8_block_reuse_conflict_names_tensorrt_llm(capsys):
    cat = load_catalog()[0]
    c = [c for c in cat.techniques["kv-cache-quantization"]["couplings"]
         if c.get("target") == "prefix-caching" and c["kind"] == "conflicts_with"]
    assert c and all(x["engines"] == ["trtllm"] and "TensorRT-LLM" in x["mechanism"] for x in c)
    code, out, _ = run(["explain", "kv-cache-quantization", "prefix-caching"], capsys)
    assert "(engines: trtllm)--> Prefix caching" in out


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


def test_explain_single_technique_shows_conditions():
    code, out, _ = run_cli("explain", "kv-cache-quantization")
    assert code == 0
    assert "conflicts_with (when kv_cache_dtype in ('fp8', 'fp8_e4m3', 'fp8_e5m2'); engines: trtllm): Prefix caching" \
        in " ".join(out.split())  # the output wraps at 100 columns


def test_explain_misspelt_technique_suggests_the_nearest_ids(capsys):
    code, out, err = run(["explain", "tensor-paralelism"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "unknown technique or property 'tensor-paralelism'; did you mean tensor-parallelism," in err
    code, out, err = run(["explain", "zzzz"], capsys)
    assert code == 2 and "'zzzz' (docs/techniques.md lists every technique)" in err
