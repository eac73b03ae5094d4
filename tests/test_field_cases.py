"""The 17 field cases of shared/cases/field_cases.yaml, each as a stack fixture, caught by general rules.

Every case lives in tests/fixtures/field_cases/<case id>.yaml (a plain stack file: `optkg check` runs
it). Each test asserts the finding's rule id, its severity and the numbers the case states, with the
arithmetic written next to the assertion, and a neighbouring stack on which the rule must stay quiet.
Several cases are also checked from the pasted `vllm serve` / `sglang.launch_server` command.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from kg.knowledge.catalog import load_catalog
from kg.analyses.check import check_stack
from kg.engine.expr import names_in
from kg.engine.rules import load_ruleset
from kg.engines.launch import parse_command
from kg.inputs.stack import stack_from_doc
from kg.core.yamlio import YamlDoc

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIX = REPO / "tests" / "fixtures" / "field_cases"
CASE_IDS = [c["id"] for c in yaml.safe_load((SHARED / "cases" / "field_cases.yaml").read_text())]
GIB = 1024**3


@pytest.fixture(scope="module")
def rules():
    return load_ruleset("check")


@pytest.fixture(scope="module")
def run(catalog, rules):
    """run(case_id, edit=None) -> Report; ``edit(data)`` may change the stack mapping first."""
    def _run(case_id, edit=None):
        data = yaml.safe_load((FIX / f"{case_id}.yaml").read_text())
        if edit:
            data = copy.deepcopy(data)
            edit(data)
        stack = stack_from_doc(YamlDoc(str(FIX / f"{case_id}.yaml"), data, {}), catalog, FIX)
        return check_stack(stack, catalog, rules)
    return _run


@pytest.fixture(scope="module")
def command(catalog, rules):
    """command(engine, cmd, config=None, version=None) -> Report for a pasted launch command."""
    def _cmd(engine, cmd, config=None, version=None):
        stack = parse_command(cmd, catalog, engine, str(config) if config else None)
        if version:
            stack.engine_version = version
        return check_stack(stack, catalog, rules)
    return _cmd


def finding(report, rule_id):
    got = [f for f in report.findings if f.rule_id == rule_id]
    assert got, f"{rule_id} did not fire; fired: {[f.rule_id for f in report.findings]}; " \
                f"why not: {[n['reason'] for n in report.not_fired if n['rule'] == rule_id]}"
    return got[0]


def fired(report):
    return {f.rule_id for f in report.findings}


def set_tp(tp):
    def edit(d):
        d["techniques"] = [t for t in d["techniques"] if not (isinstance(t, dict) and "tensor-parallelism" in t)]
        d["techniques"].append({"tensor-parallelism": {"tp_size": tp}})
    return edit


# ------------------------------------------------------------------------------------------------

def test_every_case_has_a_stack_fixture():
    assert len(CASE_IDS) == 17
    missing = [c for c in CASE_IDS if not (FIX / f"{c}.yaml").is_file()]
    assert not missing


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_every_case_is_caught(run, case_id):
    # each case produces at least one warning/error finding from the shipped rules
    report = run(case_id)
    assert any(f.severity in ("warning", "error") for f in report.findings), case_id


def test_rules_are_general(rules):
    # a rule keyed to a model name or an issue number is not a rule: no condition reads the model's
    # name, and no condition text carries an issue number or a model name from the cases
    issue_numbers = {n for c in CASE_IDS for n in re.findall(r"\d{4,}", c)}
    model_words = ("qwen3-", "qwen2", "internvl", "kimi", "deepseek", "mistral", "llama-3", "gemma")
    for r in rules.rules:
        texts = [r.condition or ""] + list(r.numbers.values()) + [b["when"] for b in r.severity_bands]
        for t in texts:
            assert "model_name" not in names_in(t) if t else True, r.id
            assert not any(n in t for n in issue_numbers), (r.id, t)
            # a comparison with config.json's `model_type` (an architecture id the engine itself branches on,
            # e.g. SGLang 0.5.23 model_hook.py:1097 `hf_config.model_type != "deepseek_v41"`) is not a model name
            general = re.sub(r"model_type\s*[!=]=\s*'[^']*'", "model_type == <architecture>", t)
            assert not any(w in general.lower() for w in model_words), (r.id, t)


# 1 ----------------------------------------------------------------------------------------------
def test_vllm_21695_awq_group_size(run):
    report = run("vllm-21695-awq-tp2-groupsize")
    f = finding(report, "quant-group-size-misaligned")
    assert f.severity == "error"
    # down_proj is row-parallel: 29568 / 2 = 14784 input channels per rank; 14784 / 128 = 115.5 groups
    assert f.numbers["intermediate_size_per_rank"] == 14784
    assert f.numbers["quant_group_size"] == 128
    assert f.numbers["groups_per_rank"] == 115.5
    # 29568 / 128 = 231 = 3 x 7 x 11 shares no factor with the divisors of 64 heads except 1
    assert f.numbers["valid_tp_sizes"] == [1]
    # --dtype half is what AWQ needs: no dtype finding
    assert "awq-requires-float16" not in fired(report)
    assert "quant-group-size-misaligned" not in fired(run("vllm-21695-awq-tp2-groupsize", set_tp(1)))


# 2 ----------------------------------------------------------------------------------------------
def test_vllm_17569_fp8_block_moe_tp8(run):
    report = run("vllm-17569-qwen3-235b-fp8-tp8")
    f = finding(report, "fp8-block-moe-misaligned")
    assert f.severity == "error"
    # 1536 / 8 = 192, 192 % 128 = 64 -> fails
    assert f.numbers["moe_intermediate_size_per_rank"] == 192
    assert f.numbers["weight_block_n"] == 128
    assert f.numbers["remainder"] == 64
    assert f.numbers["valid_tp_sizes"] == [1, 2, 4]
    # TP 8 > 4 KV heads: each KV head held by 8 / 4 = 2 ranks
    kv = finding(report, "kv-head-replication")
    assert kv.severity == "warning" and kv.numbers["replication_factor"] == 2
    # 1536 / 4 = 384 = 3 x 128 passes
    assert "fp8-block-moe-misaligned" not in fired(run("vllm-17569-qwen3-235b-fp8-tp8", set_tp(4)))
    # expert parallelism keeps each expert whole (the workaround tried in the issue)
    ep = run("vllm-17569-qwen3-235b-fp8-tp8", lambda d: d["techniques"].append("expert-parallelism"))
    assert "fp8-block-moe-misaligned" not in fired(ep)


def test_vllm_17569_from_the_command(command):
    cfg = FIX / "configs" / "qwen3-235b-a22b-fp8.json"
    # vLLM 0.8.5, the release line of the issue (0.29.0 refines the FP8 block grid instead of failing)
    report = command("vllm", "vllm serve Qwen/Qwen3-235B-A22B-FP8 --tensor-parallel-size 8 "
                             "--gpu-memory-utilization 0.98 --max-model-len 32768", config=cfg, version="0.8.5")
    assert finding(report, "fp8-block-moe-misaligned").numbers["moe_intermediate_size_per_rank"] == 192
    report = command("vllm", "vllm serve Qwen/Qwen3-235B-A22B-FP8 --tensor-parallel-size 8 --enable-expert-parallel",
                     config=cfg, version="0.8.5")
    assert "fp8-block-moe-misaligned" not in fired(report)


# 3 ----------------------------------------------------------------------------------------------
def test_sglang_10852_shared_expert_and_kv_replication(run, command):
    report = run("sglang-10852-qwen3-next-fp8-tp8")
    f = finding(report, "fp8-block-shared-expert-misaligned")
    assert f.severity == "error"
    # shared expert is split over TP even with EP: 512 / 8 = 64, 64 % 128 = 64
    assert f.numbers["shared_expert_intermediate_size_per_rank"] == 64
    assert f.numbers["remainder"] == 64
    # 512 / 128 = 4 -> TP among divisors of 16 heads dividing 4: {1, 2, 4}
    assert f.numbers["valid_tp_sizes"] == [1, 2, 4]
    # TP 8 > 2 KV heads: 8 / 2 = 4 copies (max(1, 2 // 8) = 1 head per rank)
    kv = finding(report, "kv-head-replication")
    assert kv.numbers["replication_factor"] == 4
    # routed experts are on EP (moe_tp_size 1), so the routed-expert rule stays quiet
    assert "fp8-block-moe-misaligned" not in fired(report)
    # the pasted SGLang command gives the same two findings
    cmd = command("sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct-FP8 "
                            "--tp 8 --ep-size 8 --port 30000", config=FIX / "configs" / "qwen3-next-80b-a3b-instruct-fp8.json")
    assert {"fp8-block-shared-expert-misaligned", "kv-head-replication"} <= fired(cmd)
    assert cmd.ignored_flags == ["--port 30000"]


# 4 ----------------------------------------------------------------------------------------------
def test_vllm_17604_gptq_moe_kernel_block(run):
    report = run("vllm-17604-gptq-moe-tp8-runtime")
    f = finding(report, "quantized-moe-kernel-misaligned")
    assert f.severity == "error"
    # A800 is compute capability 8.0 -> GPTQ runs Marlin; expert K per rank 1536 / 8 = 192;
    # kernel block max(64, group 128) = 128; 192 % 128 = 64
    assert f.numbers["moe_intermediate_size_per_rank"] == 192
    assert f.numbers["kernel_block"] == 128
    assert f.numbers["remainder"] == 64
    assert f.numbers["valid_tp_sizes"] == [1, 2, 4]
    assert "surface" not in f.message and "first request" in f.message  # a runtime failure, stated as such
    assert "quantized-moe-kernel-misaligned" not in fired(run("vllm-17604-gptq-moe-tp8-runtime", set_tp(4)))


# 5 ----------------------------------------------------------------------------------------------
def test_vllm_11797_heads_not_divisible(run):
    report = run("vllm-11797-heads-not-divisible-by-tp")
    f = finding(report, "heads-not-divisible-by-tp")
    assert f.severity == "error"
    # 28 % 8 = 4 != 0; divisors of 28 {1, 2, 4, 7, 14, 28}, minus 7 and 14 (neither divides 4 KV heads nor is a
    # multiple of 4) and 28 (does not divide intermediate_size 18944 = 2^9 x 37)
    assert f.numbers["valid_tp_sizes"] == [1, 2, 4]
    # TP 8 also exceeds the 4 KV heads: 8 / 4 = 2
    assert finding(report, "kv-head-replication").numbers["replication_factor"] == 2
    assert "heads-not-divisible-by-tp" not in fired(run("vllm-11797-heads-not-divisible-by-tp", set_tp(4)))


# 6 ----------------------------------------------------------------------------------------------
def test_kimi_k2_recipe_mla_duplication(run):
    report = run("vllm-recipe-kimi-k2-thinking-tp8-mla-dup")
    f = finding(report, "mla-kv-duplication")
    assert f.severity == "warning"
    # one latent of 512 + 64 = 576 elements per token per layer on every rank: 61 x 576 x 2 B = 70,272 B
    assert f.numbers["kv_bytes_per_token_per_gpu"] == 61 * 576 * 2 == 70272
    assert f.numbers["replication_factor"] == 8
    assert f.numbers["max_dcp_size"] == 8
    # 46.80 GiB / 70,272 B = 715,094.6 tokens, rounded down to whole 64-token blocks (the latest release's default
    # block, vLLM 0.34.0 config/cache.py; FlashMLA's own block on Hopper too) = 11,173 x 64 = 715,072: the recipe's
    # logged number. With 0.33.0's 16-token blocks it was 715,088 (within 0.1 %)
    tokens = report.derived["kv_tokens_per_gpu"]
    assert tokens == 715072
    assert abs(tokens - 715072) / 715072 < 0.001
    # DCP 8 removes the duplication and multiplies the scheduler-wide capacity by 8 (recipe: 5,721,088)
    dcp = run("vllm-recipe-kimi-k2-thinking-tp8-mla-dup",
              lambda d: d["techniques"].append({"decode-context-parallelism": {"dcp_size": 8}}))
    assert "mla-kv-duplication" not in fired(dcp)
    assert dcp.derived["kv_tokens_total"] == 8 * 715072
    assert abs(dcp.derived["kv_tokens_total"] - 5721088) / 5721088 < 0.001
    # the other suggested fix, DP attention (SGLang): 8 replicas of attention-TP 8 / 8 = 1 hold no copies
    dpa = run("vllm-recipe-kimi-k2-thinking-tp8-mla-dup",
              lambda d: (d.update(engine={"name": "sglang"}), d["techniques"].append({"dp-attention": {"dp_size": 8}})))
    assert "mla-kv-duplication" not in fired(dpa)
    assert dpa.derived["kv_replication"] == 1


# 7 ----------------------------------------------------------------------------------------------
def test_vllm_28407_dcp_backend_is_versioned(run):
    report = run("vllm-28407-dcp-flashinfer-no-lse")
    f = finding(report, "dcp-flashinfer-before-support")
    assert f.severity == "error" and f.numbers["dcp_size"] == 2
    # the same stack on the first release with FlashInfer DCP (0.11.1 sets can_return_lse_for_decode = True in
    # FlashInferImpl): out of the rule's range, and --explain says so
    newer = run("vllm-28407-dcp-flashinfer-no-lse", lambda d: d["engine"].update(version="0.11.1"))
    assert "dcp-flashinfer-before-support" not in fired(newer)
    why = [n["reason"] for n in newer.not_fired if n["rule"] == "dcp-flashinfer-before-support"]
    assert why == ["applies to vllm >=0.10.2,<0.11.1; the stack runs 0.11.1"]
    # a backend without the LSE is rejected on every DCP-capable release, by the rule of that release range
    triton = run("vllm-28407-dcp-flashinfer-no-lse",
                 lambda d: (d["engine"].update(version="0.13.0"), d["settings"].update(attention_backend="TRITON_ATTN")))
    assert "dcp-attention-backend-no-lse-0-11-1" in fired(triton)
    latest = run("vllm-28407-dcp-flashinfer-no-lse",
                 lambda d: (d["engine"].update(version="0.33.0"), d["settings"].update(attention_backend="TRITON_ATTN")))
    assert "dcp-attention-backend-no-lse" in fired(latest)


# 8 ----------------------------------------------------------------------------------------------
def test_vllm_41623_dcp_needs_tp_above_kv_heads(run):
    report = run("vllm-41623-dcp-gqa-tp-le-kv-heads")
    f = finding(report, "dcp-invalid-size")
    assert f.severity == "error"
    # TP 4 is not > 4 KV heads: no DCP at all
    assert f.numbers["valid_dcp_sizes"] == [1]
    # at TP 8 only DCP 2: 8 > 4, dcp <= 8 // 4 = 2, (64 // 4) % 2 == 0
    tp8 = run("vllm-41623-dcp-gqa-tp-le-kv-heads", lambda d: d.update(techniques=[
        {"tensor-parallelism": {"tp_size": 8}}, {"decode-context-parallelism": {"dcp_size": 8}}]))
    assert finding(tp8, "dcp-invalid-size").numbers["valid_dcp_sizes"] == [1, 2]


# 9 ----------------------------------------------------------------------------------------------
def test_lmcache_1732_dcp_with_kv_connector(run):
    report = run("lmcache-1732-dcp-kv-connector")
    f = finding(report, "dcp-kv-connector")
    assert f.severity == "error"
    # each rank holds 1/4 of every request's tokens
    assert f.numbers["dcp_size"] == 4
    assert "LMCacheConnectorV1" in f.message
    no_dcp = run("lmcache-1732-dcp-kv-connector", lambda d: d["techniques"].remove({"decode-context-parallelism": {"dcp_size": 4}}))
    assert "dcp-kv-connector" not in fired(no_dcp)


# 10 ---------------------------------------------------------------------------------------------
def test_vllm_3781_prefix_caching_sliding_window_v0(run):
    report = run("vllm-3781-prefix-caching-sliding-window")
    f = finding(report, "prefix-caching-sliding-window-v0")
    assert f.severity == "error"
    # the window is 4096 tokens and --disable-sliding-window caps max_model_len at it
    assert f.numbers["sliding_window"] == 4096
    assert f.numbers["capped_max_model_len"] == 4096
    # the V1 engine supports both
    v1 = run("vllm-3781-prefix-caching-sliding-window", lambda d: d["engine"].update(version="0.9.0"))
    assert "prefix-caching-sliding-window-v0" not in fired(v1)
    assert [n["reason"] for n in v1.not_fired if n["rule"] == "prefix-caching-sliding-window-v0"] == \
        ["condition is false: engine_uses_v0"]


def test_effective_sliding_window_is_used(run):
    # Qwen2-7B's config carries sliding_window 131072 but use_sliding_window false: no window
    report = run("vllm-11797-heads-not-divisible-by-tp", lambda d: (d["engine"].update(version="0.4.0"),
                                                                   d["techniques"].append("prefix-caching")))
    assert "prefix-caching-sliding-window-v0" not in fired(report)
    assert not report.stack["settings"].get("disable_sliding_window")


# 11 ---------------------------------------------------------------------------------------------
def test_vllm_pr14221_fp8_kv_ignored(run, command):
    report = run("vllm-pr14221-v1-fp8-kv-silently-ignored")
    f = finding(report, "fp8-kv-ignored-by-flash-attn")
    assert f.severity == "error"
    # expected fp8: 32 layers x 8 KV heads x (128 + 128) x 1 B = 65,536 B/token; kept bf16: 131,072
    assert f.numbers["kv_bytes_per_token_per_gpu_expected"] == 32 * 8 * 256 * 1 == 65536
    assert f.numbers["kv_bytes_per_token_per_gpu_actual"] == 131072
    assert f.numbers["capacity_factor_lost"] == 2
    # the PR's own command (V1 on a pre-0.8 release: FLASH_ATTN is the only non-MLA backend)
    cmd = command("vllm", "VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-8B-Instruct --port 9000 --kv-cache-dtype fp8",
                  config=REPO / "catalog" / "models" / "meta-llama__Meta-Llama-3.1-8B.json", version="0.7.3")
    assert finding(cmd, "fp8-kv-ignored-by-flash-attn").numbers["capacity_factor_lost"] == 2
    # on 0.8.2+ with FA3 on Hopper the pair is supported
    ok = run("vllm-pr14221-v1-fp8-kv-silently-ignored",
             lambda d: (d["engine"].update(version="0.8.2"), d.update(hardware={"gpu": "H100-SXM"})))
    assert not {"fp8-kv-ignored-by-flash-attn", "attention-backend-no-fp8-kv"} & fired(ok)


# 12 ---------------------------------------------------------------------------------------------
def test_vllm_12543_fa3_fp8_kv_pair(run):
    report = run("vllm-12543-fa3-fp8-kv-dsr1")
    f = finding(report, "fp8-kv-ignored-by-flash-attn")
    assert f.severity == "error"
    # MLA latent: 61 x 576 x 1 B = 35,136 B/token in fp8 vs 70,272 in bf16
    assert f.numbers["kv_bytes_per_token_per_gpu_expected"] == 35136
    assert f.numbers["kv_bytes_per_token_per_gpu_actual"] == 70272
    # the pair is checked against the backend's KV-dtype list on later releases too: FA2 on A100
    later = run("vllm-12543-fa3-fp8-kv-dsr1", lambda d: (d["engine"].update(version="0.9.0"),
                                                          d.update(hardware={"gpu": "A100-80GB"}),
                                                          d["settings"].pop("flash_attn_version"),
                                                          d.update(model="meta-llama/Llama-3.1-8B")))
    assert finding(later, "attention-backend-no-fp8-kv").severity == "error"


# 13 ---------------------------------------------------------------------------------------------
def test_trtllm_2699_fp8_kv_with_reuse(run):
    report = run("trtllm-2699-fp8-kv-with-block-reuse")
    f = finding(report, "fp8-kv-cache-reuse-accuracy")
    assert f.severity == "warning"
    off = run("trtllm-2699-fp8-kv-with-block-reuse", lambda d: d["techniques"].remove("prefix-caching"))
    assert "fp8-kv-cache-reuse-accuracy" not in fired(off)


# 14 ---------------------------------------------------------------------------------------------
def test_trtllm_2166_int8_kv_with_reuse(run):
    report = run("trtllm-2166-int8-kv-with-block-reuse")
    assert finding(report, "int8-kv-cache-reuse").severity == "error"
    # the same pair on vLLM is not this engine's rule
    vllm = run("trtllm-2166-int8-kv-with-block-reuse", lambda d: d.update(engine={"name": "vllm"}))
    assert "int8-kv-cache-reuse" not in fired(vllm)
    assert [n["reason"] for n in vllm.not_fired if n["rule"] == "int8-kv-cache-reuse"] == \
        ["applies to trtllm; the stack's engine is vllm"]


# 15 ---------------------------------------------------------------------------------------------
def test_sglang_12372_trtllm_mha_fp8_versioned(run, command):
    report = run("sglang-12372-trtllm-mha-fp8-kv")
    assert finding(report, "sglang-trtllm-mha-fp8-kv-regression").severity == "warning"
    fixed = run("sglang-12372-trtllm-mha-fp8-kv", lambda d: d["engine"].update(version="0.5.5"))
    assert "sglang-trtllm-mha-fp8-kv-regression" not in fired(fixed)
    # the issue's command
    cmd = command("sglang", "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp 8 "
                            "--kv-cache-dtype fp8_e4m3 --attention-backend trtllm_mha",
                  config=REPO / "catalog" / "models" / "meta-llama__Meta-Llama-3.1-8B.json", version="0.5.4")
    assert "sglang-trtllm-mha-fp8-kv-regression" in fired(cmd)
    # Llama-3.1-8B has 8 KV heads: TP 8 replicates nothing
    assert "kv-head-replication" not in fired(cmd)


# 16 ---------------------------------------------------------------------------------------------
def test_vllm_10276_sd_chunked_prefill_draft_tp(run, command):
    report = run("vllm-10276-sd-draft-tp-chunked-prefill")
    f = finding(report, "speculative-chunked-prefill-draft-tp")
    assert f.severity == "error"
    # the draft's TP defaults to the target's 8
    assert f.numbers["draft_tp_size"] == 8
    one = run("vllm-10276-sd-draft-tp-chunked-prefill", lambda d: d["settings"].update(draft_tp_size=1))
    assert "speculative-chunked-prefill-draft-tp" not in fired(one)
    cmd = command("vllm", "vllm serve meta-llama/Llama-3.1-405B-Instruct-FP8 --tensor-parallel-size 8 "
                          "--speculative-model meta-llama/Llama-3.1-8B-Instruct --num-speculative-tokens 8 "
                          "--enable-chunked-prefill --max-num-batched-tokens 4096 --block-size 32 "
                          "--max-model-len 32768 --distributed-executor-backend ray",
                  config=REPO / "catalog" / "models" / "meta-llama__Meta-Llama-3.1-405B.json", version="0.6.4")
    assert finding(cmd, "speculative-chunked-prefill-draft-tp").numbers["draft_tp_size"] == 8


# 17 ---------------------------------------------------------------------------------------------
def test_vllm_14117_pp_with_mtp(run, command):
    report = run("vllm-14117-pp-with-mtp")
    f = finding(report, "speculative-decoding-pipeline-parallel")
    assert f.severity == "error" and f.numbers["pp_size"] == 2
    cmd = command("vllm", "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 --pipeline-parallel-size 2 "
                          "--num-speculative-tokens 1 --quantization fp8 --max-model-len 32768 --max-num-seqs 16",
                  config=REPO / "catalog" / "models" / "deepseek-ai__DeepSeek-V3.json", version="0.7.3")
    assert "speculative-decoding-pipeline-parallel" in fired(cmd)
    # V1 drafts on the last PP rank; from 0.14.0 to 0.29.x the MTP class lacks SupportsPP (issue 52069)
    v26 = run("vllm-14117-pp-with-mtp", lambda d: d["engine"].update(version="0.26.0"))
    assert "mtp-draft-without-pipeline-parallel-support" in fired(v26) and "speculative-decoding-pipeline-parallel" not in fired(v26)


def test_rules_chain_tp_divisibility_to_pp_to_speculative_decoding(run):
    # "a driver for PP is TP-divisibility failures, so rules chain": 28 heads at TP 8 fail and the
    # fix suggests pipeline parallelism; taking it (TP 4 x PP 2) with speculative decoding hits the PP x SD rule
    sd = {"speculative-decoding": {"speculative_method": "eagle", "num_speculative_tokens": 3}}
    first = run("vllm-11797-heads-not-divisible-by-tp", lambda d: d["techniques"].append(sd))
    f = finding(first, "heads-not-divisible-by-tp")
    assert [x["technique"] for x in f.fixes] == ["pipeline-parallelism"]
    # the PP x SD refusal is the V0 spec-decode worker's (0.6.5-0.9.x): the chain is checked on 0.7.3
    second = run("vllm-11797-heads-not-divisible-by-tp", lambda d: d.update(techniques=[
        {"tensor-parallelism": {"tp_size": 4}}, {"pipeline-parallelism": {"pp_size": 2}}, sd], engine={"name": "vllm", "version": "0.7.3"}))
    assert "heads-not-divisible-by-tp" not in fired(second)
    assert finding(second, "speculative-decoding-pipeline-parallel").numbers["pp_size"] == 2


def test_field_case_stacks_run_from_the_cli(cli):
    # the fixtures are plain stack files: `optkg check` reads them and exits 1 on the error findings
    code, out, err = cli("check", str(FIX / "vllm-17569-qwen3-235b-fp8-tp8.yaml"), "--format", "json")
    assert code == 1, err
    d = json.loads(out)
    assert {"fp8-block-moe-misaligned", "kv-head-replication"} <= {f["rule_id"] for f in d["findings"]}


# pasted launch commands of the cases (hub ids of fine-tuned/quantised variants are not bundled, so the
# case's config is passed as --config would be)
MODELS = REPO / "catalog" / "models"
COMMANDS = [
    ("vllm-21695-awq-tp2-groupsize", "vllm",
     "vllm serve OpenGVLab/InternVL3-78B-AWQ --tensor-parallel-size 2 --quantization awq --dtype half --enforce-eager "
     "--max-model-len 32768 --trust-remote-code", FIX / "configs" / "internvl3-78b-awq-llm.json", None,
     "quant-group-size-misaligned"),
    ("vllm-11797-heads-not-divisible-by-tp", "vllm", "vllm serve Qwen/Qwen2-7B --tensor-parallel-size 8",
     FIX / "configs" / "qwen2-7b.json", None, "heads-not-divisible-by-tp"),
    ("vllm-41623-dcp-gqa-tp-le-kv-heads", "vllm", "vllm serve Qwen/Qwen3-235B-A22B-FP8 -tp 4 -dcp 2",
     FIX / "configs" / "qwen3-235b-a22b-fp8.json", None, "dcp-invalid-size"),
    ("lmcache-1732-dcp-kv-connector", "vllm",
     "vllm serve deepseek-ai/DeepSeek-R1-0528 -tp 8 -dcp 8 --enable-prefix-caching "
     "--kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\"}'",
     MODELS / "deepseek-ai__DeepSeek-V3.json", "0.10.2", "dcp-kv-connector"),
    ("vllm-3781-prefix-caching-sliding-window", "vllm",
     "vllm serve mistralai/Mistral-7B-v0.1 --enable-prefix-caching --max-model-len 4096",
     FIX / "configs" / "mistral-7b-v0.1.json", "0.4.0", "prefix-caching-sliding-window-v0"),
    ("vllm-12543-fa3-fp8-kv-dsr1", "vllm",
     "VLLM_ATTENTION_BACKEND=FLASH_ATTN VLLM_FLASH_ATTN_VERSION=3 vllm serve deepseek-ai/DeepSeek-R1 -tp 8 "
     "--kv-cache-dtype fp8", MODELS / "deepseek-ai__DeepSeek-V3.json", "0.7.0", "fp8-kv-ignored-by-flash-attn"),
    ("vllm-28407-dcp-flashinfer-no-lse", "vllm",
     "VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve Qwen/Qwen3-235B-A22B -tp 8 -dcp 2", None, "0.11.0",
     "dcp-flashinfer-before-support"),
]


@pytest.mark.parametrize("case_id,engine,cmd,config,version,rule", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_case_commands(command, case_id, engine, cmd, config, version, rule):
    report = command(engine, cmd, config=config, version=version)
    assert finding(report, rule).severity == "error"


def test_sglang_flags_named_in_the_issue(catalog):
    cmd = ("python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp-size 8 --dp-size 2 --ep-size 8 "
           "--kv-cache-dtype fp8_e4m3 --quantization fp8 --disable-radix-cache --chunked-prefill-size 4096 "
           "--speculative-algorithm EAGLE3 --attention-backend fa3 --enable-dp-attention --mem-fraction-static 0.85 "
           "--context-length 32768 --host 0.0.0.0")
    st = parse_command(cmd, catalog, "sglang")
    s = st.settings
    assert (s["tp_size"], s["dp_size"], s["ep_size"]) == (8, 2, 8)
    assert s["kv_cache_dtype"] == "fp8_e4m3" and s["quantization"] == "fp8"
    assert s["chunked_prefill_size"] == 4096 and s["speculative_method"] == "EAGLE3"
    assert s["attention_backend"] == "fa3" and s["enable_dp_attention"] is True
    assert s["gpu_memory_utilization"] == 0.85 and s["max_model_len"] == 32768
    assert "prefix-caching" not in st.techniques  # --disable-radix-cache
    # --quantization fp8 on the unquantised Qwen3-235B-A22B checkpoint is online per-tensor FP8 (SGLang 0.5.23
    # layers/quantization/fp8.py:302-305: block-wise needs an fp8-serialised checkpoint), not block FP8
    assert {"tensor-parallelism", "data-parallelism", "expert-parallelism", "kv-cache-quantization",
            "fp8-inference-kernels", "chunked-prefill", "speculative-decoding", "dp-attention"} <= set(st.techniques)
    assert "fp8-block-quantization" not in st.techniques
    assert st.ignored == ["--host 0.0.0.0"]
    # --tp is the short form
    assert parse_command("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 4", catalog, "sglang").settings["tp_size"] == 4
