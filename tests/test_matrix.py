"""`optkg matrix`: technique x technique compatibility from the coupling graph and the check rules."""
from __future__ import annotations

import json

import pytest

from kg.catalog import load_catalog
from kg.matrix import compatibility_matrix, context_names, variant_only
from kg.rules import Rule, load_ruleset


@pytest.fixture(scope="module")
def catalog():
    cat, problems = load_catalog()
    assert not problems, [p.one_line() for p in problems[:5]]
    return cat


@pytest.fixture(scope="module")
def rules():
    return load_ruleset("check")


@pytest.fixture(scope="module")
def matrix(catalog, rules):
    return compatibility_matrix(catalog, rules)


def cell(m, a, b):
    a, b = sorted((a, b))
    got = [c for c in m["cells"] if c["a"] == a and c["b"] == b]
    return got[0] if got else None


def test_shape_is_exactly_the_documented_one(matrix, catalog):
    assert set(matrix) == {"schema_version", "kind", "techniques", "cells"}
    assert matrix["schema_version"] == "1.0" and matrix["kind"] == "matrix"
    assert matrix["techniques"] == sorted(catalog.techniques)
    pairs = [(c["a"], c["b"]) for c in matrix["cells"]]
    assert pairs == sorted(pairs) and len(pairs) == len(set(pairs))
    for c in matrix["cells"]:
        assert set(c) == {"a", "b", "mark", "condition", "engines", "rule", "sources"}
        assert c["a"] < c["b"]
        assert c["mark"] in ("conflict", "conditional")  # ok pairs are not listed
        assert c["a"] in catalog.techniques and c["b"] in catalog.techniques
        assert c["condition"] is None or isinstance(c["condition"], str)
        assert c["engines"] == sorted(c["engines"])
        assert c["sources"], c


def test_speculative_decoding_x_lora_is_a_vllm_conflict(matrix):
    c = cell(matrix, "speculative-decoding", "multi-lora-serving")
    assert c["mark"] == "conflict"
    assert c["engines"] == ["vllm"]
    assert c["rule"] == "speculative-decoding-lora"
    assert c["condition"] is None  # unconditional in vLLM's feature matrix
    assert any("docs/features/README.md" in s["url"] for s in c["sources"])


def test_prefix_caching_x_sliding_window_is_conditional(matrix):
    c = cell(matrix, "prefix-caching", "sliding-window-attention")
    assert c["mark"] == "conditional"
    assert "engine_uses_v0" in c["condition"] and "<0.11.0" in c["condition"]


def test_fp8_kv_cache_x_attention_backend_without_fp8_kv_is_a_conflict(matrix):
    c = cell(matrix, "kv-cache-quantization", "flash-attention")
    assert c["mark"] == "conflict"
    assert c["rule"] == "attention-backend-no-fp8-kv"
    assert "flash_attn_version_effective == 2" in c["condition"]


def test_other_pairs_from_the_rules(matrix):
    # DCP x KV connector (LMCache issue 1732) and PP x speculative decoding (vLLM and SGLang)
    assert cell(matrix, "decode-context-parallelism", "kv-cache-connector")["mark"] == "conflict"
    pp = cell(matrix, "pipeline-parallelism", "speculative-decoding")
    assert pp["mark"] == "conflict" and pp["rule"] == "speculative-decoding-pipeline-parallel"
    assert pp["engines"] == ["sglang", "vllm"]
    # a numeric relation between two sizes makes a pair conditional, not a conflict
    assert cell(matrix, "fp8-block-quantization", "tensor-parallelism")["mark"] == "conditional"


def test_engine_filter(catalog, rules):
    # a pair known only from an SGLang rule disappears for vLLM and stays for SGLang
    sglang = compatibility_matrix(catalog, rules, engine="sglang")
    vllm = compatibility_matrix(catalog, rules, engine="vllm")
    c = cell(sglang, "dp-attention", "speculative-decoding")
    assert c and c["mark"] == "conflict" and c["engines"] == ["sglang"]
    assert cell(vllm, "dp-attention", "speculative-decoding") is None or \
        "sglang-spec-with-dp-attention" != cell(vllm, "dp-attention", "speculative-decoding")["rule"]


def test_classification(catalog):
    ctx = context_names(catalog)
    # constants against the techniques' own settings: a variant choice
    assert variant_only("kv_cache_dtype == 'int8'", ctx)
    assert variant_only("pp_size > 1", ctx)
    assert variant_only("attention_backend in ('A', 'B') and not enable_lora", ctx)
    assert variant_only(None, ctx)
    # model / hardware / release facts, or two settings against each other: conditional
    assert not variant_only("num_sliding_layers > 0", ctx)
    assert not variant_only("gpu_compute_capability < 8.0", ctx)
    assert not variant_only("engine_uses_v0", ctx)
    assert not variant_only("tp_size % dp_size != 0", ctx)


def test_synthetic_rules_decide_the_mark(catalog):
    a, b = "zero-1", "dvfs"  # two techniques the shipped rules do not relate
    base = dict(ruleset="check", title="t", match=[{"kind": "technique", "technique": a}], message="m",
                sources=[{"title": "s", "url": "https://example.org/s"}], involves=[b])
    hard = Rule(id="syn-hard", severity="error", condition="dp_size > 1", applies_to={"engines": ["sglang"]}, **base)
    soft = Rule(id="syn-soft", severity="warning", condition="dp_size > 1", **base)
    old = Rule(id="syn-old", severity="error", condition="dp_size > 1", applies_to={"engines": ["vllm"], "versions": "<0.5"}, **base)
    note = Rule(id="syn-note", severity="info", **base)
    pair = lambda rs, **kw: cell(compatibility_matrix(catalog, rs, **kw), a, b)  # noqa: E731
    if pair([]) is not None:
        pytest.skip("the catalog relates the synthetic pair")
    assert pair([note]) is None  # info rules are notes, not compatibility
    assert pair([soft])["mark"] == "conditional"
    assert pair([old])["mark"] == "conditional" and "[vllm <0.5]" in pair([old])["condition"]
    got = pair([soft, hard])
    assert got["mark"] == "conflict" and got["rule"] == "syn-hard" and got["engines"] == ["sglang"]
    assert pair([hard], engine="vllm") is None


def test_deterministic(catalog, rules):
    assert compatibility_matrix(catalog, rules) == compatibility_matrix(catalog, rules)


def test_cli_text_and_json(cli):
    code, out, err = cli("matrix", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["kind"] == "matrix"
    code, out, err = cli("matrix", "--technique", "speculative-decoding", "--engine", "vllm")
    assert code == 0, err
    assert "❌" in out
    assert "[rule speculative-decoding-lora]" in out
    assert "grid (X conflict, ~ conditional, . ok):" in out
    code, out, err = cli("matrix", "--technique", "no-such-technique")
    assert code == 2 and "unknown technique 'no-such-technique'" in err
