"""`optkg matrix`: technique x technique compatibility from the coupling graph and the check rules."""
from __future__ import annotations

import json

import pytest

from kg.knowledge.catalog import load_catalog
from kg.analyses.matrix import compatibility_matrix, context_names, variant_only
from kg.engine.rules import Rule, load_ruleset


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


def test_speculative_decoding_x_lora_is_conditional_on_old_vllm(matrix):
    # vLLM 0.11.1 added LoRA with speculative decoding (PR 21068): the rule applies to <0.11.1 only, so the
    # pair is no longer a conflict but conditional on the release
    c = cell(matrix, "speculative-decoding", "multi-lora-serving")
    assert c["mark"] == "conditional"
    assert c["engines"] == ["vllm"]
    assert c["rule"] == "speculative-decoding-lora"
    assert c["condition"] == "[vllm >=0.4.2,<0.11.1]"  # lower bound: the first wheel with the check (0.4.2)
    assert any(s["url"] == "https://github.com/vllm-project/vllm/pull/21068" for s in c["sources"])


def test_prefix_caching_x_sliding_window_is_conditional(matrix):
    c = cell(matrix, "prefix-caching", "sliding-window-attention")
    assert c["mark"] == "conditional"
    assert "engine_uses_v0" in c["condition"] and "<0.11.0" in c["condition"]


def test_fp8_kv_cache_x_flash_attention_is_conditional_on_the_backend(matrix):
    # FA2 (and FLASH_ATTN_MLA) take no FP8 KV cache, FA3 takes e4m3: the clash is backend-specific
    c = cell(matrix, "kv-cache-quantization", "flash-attention")
    assert c["mark"] == "conditional"
    assert c["rule"] == "attention-backend-no-fp8-kv"
    assert "flash_attn_version_effective == 2" in c["condition"]


def test_flash_attention_x_paged_attention_is_conditional_on_the_backend(matrix, catalog):
    # the block-size clash holds for CUTLASS_MLA (128) and FLASHMLA (64) only, on vLLM and SGLang
    # (catalog coupling paged-kv-cache -> flash-attention, and the warning rule attention-backend-block-size,
    # whose condition is shown because rules carry the engine-specific detail)
    c = cell(matrix, "flash-attention", "paged-kv-cache")
    assert (c["mark"], c["engines"], c["rule"]) == ("conditional", ["sglang", "vllm"], "attention-backend-block-size")
    assert "(attention_backend == 'CUTLASS_MLA' and block_size != 128)" in c["condition"]
    assert "(attention_backend == 'flashmla' and block_size != 64)" in c["condition"]
    # on its own, the coupling is conditional too: its condition names two backends
    coupling_only = compatibility_matrix(catalog, [])
    c = cell(coupling_only, "flash-attention", "paged-kv-cache")
    # issue 12: a coupling-only cell names the rule generated from the coupling (check runs it)
    assert (c["mark"], c["engines"], c["rule"]) == ("conditional", ["sglang", "vllm"],
                                                    "coupling-paged-kv-cache-conflicts-with-flash-attention")
    assert c["condition"] == ("(attention_backend == 'CUTLASS_MLA' and block_size != 128) or "
                              "(attention_backend == 'FLASHMLA' and block_size != 64)")


def test_other_pairs_from_the_rules(matrix):
    # DCP x KV connector (LMCache issue 1732) and PP x speculative decoding (vLLM and SGLang)
    assert cell(matrix, "decode-context-parallelism", "kv-cache-connector")["mark"] == "conflict"
    # changed on purpose (issue 14): vLLM refuses PP x SD only in its V0 worker (0.6.5-0.9.x, a conditional rule);
    # SGLang 0.5.21+ refuses it outside EAGLE on prefill nodes / SGLANG_ENABLE_PP_SPEC
    pp = cell(matrix, "pipeline-parallelism", "speculative-decoding")
    assert pp["mark"] == "conflict" and pp["rule"] == "sglang-speculative-decoding-pipeline-parallel"
    # TensorRT-LLM refuses n-gram / draft-target drafters under PP too (trtllm-drafter-with-pipeline-parallel, issue 9009)
    assert pp["engines"] == ["sglang", "trtllm"]
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


def test_engine_filter_uses_only_evidence_for_that_engine(catalog, rules):
    from kg.analyses.matrix import known_engines
    assert known_engines(catalog, rules.rules) == ["lmdeploy", "sglang", "trtllm", "vllm"]
    trt = compatibility_matrix(catalog, rules, engine="trtllm")
    # every cell is either engine-independent or names trtllm; no vLLM/SGLang backend evidence remains
    assert all(not c["engines"] or "trtllm" in c["engines"] for c in trt["cells"])
    assert not any("CUTLASS_MLA" in (c["condition"] or "") or "FLASH_ATTN" in (c["condition"] or "") for c in trt["cells"])
    assert cell(trt, "flash-attention", "paged-kv-cache") is None
    assert cell(trt, "kv-cache-quantization", "prefix-caching")["rule"] == "int8-kv-cache-reuse"


def test_unknown_engine_is_an_error(catalog, rules, cli):
    from kg.core.errors import OptkgError
    with pytest.raises(OptkgError, match=r"--engine: unknown engine 'foo' \(known: lmdeploy, sglang, trtllm, vllm\)"):
        compatibility_matrix(catalog, rules, engine="foo")
    code, out, err = cli("matrix", "--engine", "vlm")
    assert code == 2 and out == "" and err == ("optkg: error: --engine: unknown engine 'vlm'; did you mean 'vllm'? "
                                               "(known: lmdeploy, sglang, trtllm, vllm)\n")


def test_backend_selectors_make_evidence_conditional():
    from kg.analyses.matrix import selector_restricted
    assert selector_restricted("attention_backend == 'TRITON_ATTN' and dcp_size > 1")
    assert selector_restricted("moe_a2a_backend == 'deepep' and deepep_mode == 'normal'")
    assert selector_restricted("kv_cache_is_fp8 and flash_attn_version_effective == 2")
    assert not selector_restricted("kv_cache_dtype == 'int8'")
    assert not selector_restricted(None)


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
    # without a release, a refusal that later releases dropped is conditional (speculative decoding x PP: vLLM
    # < 0.10.0, SGLang < 0.5.21); --engine-version makes it exact (test below)
    assert "⚠️ PP x Spec decode (sglang, vllm)  [rule " in out
    assert "⚠️ Multi-LoRA x Spec decode (vllm)  [rule speculative-decoding-lora]" in out
    assert "grid (X conflict, ~ conditional, . ok):" in out
    code, out, err = cli("matrix", "--technique", "no-such-technique")
    assert code == 2 and "unknown technique 'no-such-technique'" in err


def test_engine_version_makes_version_ranged_rules_exact(cli):
    # speculative-decoding-lora applies to vllm <0.11.1 (error): unknown release -> conditional,
    # 0.10.2 -> conflict, 0.11.1 -> the rule does not hold (the cell may remain only from catalog couplings).
    import json
    def cell(*extra):
        code, out, err = cli("matrix", "--engine", "vllm", "--technique", "speculative-decoding", "--format", "json", *extra)
        assert code == 0, err
        cells = [c for c in json.loads(out)["cells"] if {c["a"], c["b"]} == {"multi-lora-serving", "speculative-decoding"}]
        return cells[0] if cells else None
    assert cell()["mark"] == "conditional"
    old = cell("--engine-version", "0.10.2")
    assert old["mark"] == "conflict" and old["rule"] == "speculative-decoding-lora"
    new = cell("--engine-version", "0.11.1")
    assert new is None or new["rule"] != "speculative-decoding-lora"
    code, _, err = cli("matrix", "--engine", "vllm", "--engine-version", "banana")
    assert code == 2 and "--engine-version: expected an engine version number" in err


def test_text_grid_is_cut_into_panels_that_fit_100_columns(matrix):
    # 80-96 techniques sit in a non-ok pair (86 when this was written): at 3 columns per cell one grid line would be
    # 4 + 86 * 3 = 262 columns; panels of (100 - 4) // 3 = 32 columns give 3 panels (32 + 32 + the rest)
    from kg.analyses.matrix import render_matrix_text
    text = render_matrix_text(matrix)
    involved = sorted({c["a"] for c in matrix["cells"]} | {c["b"] for c in matrix["cells"]})
    n = len(involved)
    assert max(len(line) for line in text.splitlines()) <= 100
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("     1  2") or line.strip().startswith("33 34")
             or line.strip().startswith("65 66")]
    assert 64 < n <= 96 and len(heads) == 3
    assert lines[heads[2]].split() == [str(i) for i in range(65, n + 1)]
    # every technique is named once under the panels, by its number
    assert sum(1 for line in lines if " 1 3d-parallelism" in line) == 1
    assert all(any(f"{i} {t}" in line for line in lines) for i, t in enumerate(involved, 1))


@pytest.mark.parametrize("version,pair,rule", [
    # a catalog coupling a hand rule refines is shown only where that rule holds: speculative decoding x PP is a
    # vLLM V0 refusal (speculative-decoding-pipeline-parallel: >=0.6.5,<0.10.0), DP x PCP >=0.26.0,<0.30.0,
    # async scheduling x PP 0.10.0-0.14.x (arg_utils.py:1144 at 0.10.0 ... config/vllm.py:564 at 0.14.0)
    # (V0 only: the condition reads engine_uses_v0, so the pair is conditional even where the rule holds)
    ("0.9.2", ("pipeline-parallelism", "speculative-decoding"), ("conditional", "speculative-decoding-pipeline-parallel")),
    ("0.34.0", ("pipeline-parallelism", "speculative-decoding"), None),
    ("0.29.0", ("data-parallelism", "prefill-context-parallelism"), ("conflict", "pcp-with-data-parallel")),
    ("0.34.0", ("data-parallelism", "prefill-context-parallelism"), None),
    ("0.14.0", ("async-scheduling", "pipeline-parallelism"), ("conflict", "async-scheduling-pipeline-parallel")),
    ("0.15.0", ("async-scheduling", "pipeline-parallelism"), None),
    ("0.11.0", ("async-scheduling", "speculative-decoding"), ("conflict", "async-scheduling-speculative-decoding-any")),
    ("0.12.0", ("async-scheduling", "speculative-decoding"), ("conflict", "async-scheduling-speculative-method")),
    ("0.34.0", ("async-scheduling", "speculative-decoding"), None),
])
def test_a_refined_coupling_is_a_conflict_only_on_the_releases_its_rule_holds_for(catalog, rules, version, pair, rule):
    # newuser5 #11: at 0.34.0 the unversioned couplings were shown as conflicts under the refining rule's name
    c = cell(compatibility_matrix(catalog, rules, engine="vllm", version=version), *pair)
    assert (c and c["mark"], c and c["rule"]) == (rule or (None, None))
