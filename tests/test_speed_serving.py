"""check's Speed section: aiconfigurator-core's estimate composed with optkg's startup verdict and KV capacity.

The estimator runs for real (aiconfigurator-core 0.12.0, pinned in pyproject's ``speed`` extra); the stacks
are the README demo stack and small variations of it, so one database (H200, vLLM) serves the module.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO = str(REPO / "examples" / "qwen3-235b-tp8.yaml")


@pytest.fixture(scope="module")
def demo(catalog, check_rules):
    import kg
    stack = kg.stack_from_file(DEMO)
    return stack, kg.check(stack, catalog, check_rules).to_dict()


def _speed(stack, report, **kw):
    from kg.speed.serving import Workload, speed_for_stack
    return speed_for_stack(stack, report, Workload(**kw))


def test_engine_release_maps_to_the_nearest_older_database_release():
    from kg.speed.estimator import database_release
    # aiconfigurator-core 0.12.0 systems/query_versions.yaml: vllm current 0.24.0, next derives to 0.27.0
    assert database_release("h200_sxm", "vllm", "0.24.0") == ("0.24.0", None)
    rel, note = database_release("h200_sxm", "vllm", "0.33.0")
    assert rel == "0.27.0" and "nearest older release" in note and "0.24.0, 0.27.0" in note
    rel, note = database_release("h200_sxm", "vllm", "0.19.0")  # older than every measured release
    assert rel == "0.24.0" and "nearest newer release" in note
    assert database_release("a100_sxm", "vllm", "0.33.0")[0] == "0.14.0"  # a100 has one frozen release
    rel, note = database_release("h200_sxm", "sglang", None)
    assert rel == "0.5.14" and note.startswith("no engine release given")


def test_demo_stack_gets_ttft_itl_and_tokens_per_second(demo):
    stack, report = demo
    sp = _speed(stack, report, isl=1024, osl=1024, concurrency=64)
    assert sp["status"] == "ok", sp
    assert sp["estimator"] == {"package": "aiconfigurator-core", "release": "0.12.0", "system": "h200_sxm",
                               "backend": "vllm", "database_release": "0.27.0",
                               "gemm_quant_mode": None}  # BF16: the estimator reads the checkpoint's own
    assert sp["parallel"] == {"tp_size": 8, "pp_size": 1, "attention_dp_size": 1, "moe_tp_size": 8,
                              "moe_ep_size": 1, "gpus": 8}
    # vLLM allocates KV blocks as a request grows: in a closed loop a running request holds isl + osl / 2 =
    # 1,536 tokens on average; 1,461,632 KV tokens (optkg's vLLM plan for this stack: 22,838 blocks of 64 tokens,
    # the latest release's default block) / 1,536 = 951 at most
    assert report["derived"]["kv_tokens_total"] == 1_461_632 == 22_838 * 64
    assert sp["cap"]["kv_requests_per_scheduler"] == 1_461_632 // 1536 == 951
    assert sp["running"] == 64 and sp["queued"] == 0 and sp["queue_wait_ms"] == 0
    assert sp["ttft_ms"] > 0 and sp["itl_ms"] > 0
    assert sp["tokens_per_s_per_request"] == pytest.approx(1000 / sp["itl_ms"])
    assert sp["tokens_per_s_per_gpu"] == pytest.approx(sp["output_tokens_per_s"] / 8)


def test_requests_beyond_the_kv_capacity_queue_and_wait(demo):
    stack, report = demo
    sp = _speed(stack, report, isl=1024, osl=1024, concurrency=2000)
    assert sp["running"] == 951 and sp["queued"] == 2000 - 951
    # closed loop: 951 requests finish per engine request latency L, so each waits L x (2000 / 951 - 1)
    engine_latency = sp["engine_ttft_ms"] + sp["itl_ms"] * 1023
    assert sp["queue_wait_ms"] == pytest.approx(engine_latency * (2000 / 951 - 1))
    assert sp["ttft_ms"] == pytest.approx(sp["engine_ttft_ms"] + sp["queue_wait_ms"])
    assert any("1,049 of 2,000 requests queue" in n for n in sp["notes"])


def test_a_stack_that_does_not_start_gets_no_speed_but_its_reasons(catalog, check_rules):
    import kg
    stack = kg.stack_from_command("vllm serve meta-llama/Meta-Llama-3.1-405B", catalog)
    stack.hardware, stack.gpu_count = catalog.resolve_hardware("H100-SXM"), 1
    report = kg.check(stack, catalog, check_rules).to_dict()
    sp = _speed(stack, report)
    assert sp["status"] == "infeasible"
    assert any(r.startswith("rule weights-do-not-fit") for r in sp["reasons"]), sp["reasons"]
    assert "ttft_ms" not in sp


def test_one_request_longer_than_the_kv_cache_is_infeasible(demo, monkeypatch):
    stack, report = demo
    # the second guard, behind admission's max_model_len (next test), which would refuse this request first
    import kg.speed.serving as serving
    monkeypatch.setattr(serving, "too_long", lambda *a: [])
    sp = _speed(stack, report, isl=1_000_000, osl=1_000_000, concurrency=1)
    assert sp["status"] == "infeasible"
    assert "one request of 2,000,000 tokens (isl + osl) does not fit in the KV cache (1,461,632" in sp["reasons"][0]


def test_a_request_longer_than_max_model_len_is_refused_not_timed(demo, cli):
    # newuser5 #21: the demo serves Qwen3-235B-A22B at max_model_len 32,768; 30,000 + 20,000 = 50,000 tokens is
    # refused at admission (vLLM 'maximum context length is 32768 tokens', HTTP 400): no TTFT of hours for it
    stack, report = demo
    sp = _speed(stack, report, isl=30_000, osl=20_000, concurrency=8)
    assert (sp["status"], sp.get("refuses_requests")) == ("infeasible", True)
    assert sp["reasons"] == ["a request of 30,000 prompt + 20,000 output tokens = 50,000 is longer than max_model_len "
                             "32,768: the engine refuses it at admission (HTTP 400, maximum context length), so it is "
                             "never timed (lower --isl / --osl, or raise the context length if the model allows it)"]
    assert _speed(stack, report, isl=16_000, osl=16_768, concurrency=8)["status"] == "ok"  # 32,768: admitted
    code, out, _ = cli("check", DEMO, "--isl", "30000", "--osl", "20000")
    assert "Speed (ISL 30,000, OSL 20,000, concurrency 64): none: the engine refuses requests this long" in out


@pytest.mark.parametrize("gpu,engine,why", [
    ("MI300X", "vllm", "GPU MI300X is not in the estimator's database"),
    ("H200", "lmdeploy", "no speed-estimator backend is mapped for engine 'lmdeploy'"),
])
def test_a_gpu_or_engine_outside_the_database_is_not_evaluable(catalog, check_rules, gpu, engine, why):
    import kg
    cmd = {"vllm": "vllm serve Qwen/Qwen3-32B -tp 2",
           "lmdeploy": "lmdeploy serve api_server Qwen/Qwen3-32B --tp 2"}[engine]
    stack = kg.stack_from_command(cmd, catalog)
    stack.hardware, stack.gpu_count = catalog.resolve_hardware(gpu), 2
    sp = _speed(stack, kg.check(stack, catalog, check_rules).to_dict())
    assert sp["status"] == "not_evaluable" and sp["reasons"][0].startswith(why), sp


def test_the_estimator_is_never_given_a_model_without_a_local_config(tmp_path):
    from kg.speed.estimator import NotEvaluable, Point, run_point
    p = Point(model="Qwen/Qwen3-32B", config_digest="x", system="h200_sxm", backend="vllm", release="0.24.0",
              tp_size=2, pp_size=1, attention_dp_size=1, moe_tp_size=1, moe_ep_size=1, gemm_quant_mode=None,
              moe_quant_mode=None, kvcache_quant_mode=None, batch_size=8, isl=1024, osl=128, ctx_tokens=8192)
    with pytest.raises(NotEvaluable, match="no local config.json"):
        run_point(p, str(tmp_path))  # an empty folder: the hub is never asked


def test_check_prints_the_speed_section_with_the_database_release(cli):
    code, out, _ = cli("check", DEMO, "--concurrency", "16")
    assert code in (0, 1)
    head = "Speed (ISL 1,024, OSL 1,024, concurrency 16)"
    assert head in out
    sec = out.split(head, 1)[1]
    assert "  estimator: aiconfigurator-core 0.12.0, vllm database release 0.27.0 on h200_sxm" in sec
    for label in ("TTFT", "ITL (TPOT)", "output tokens/s per GPU", "output tokens/s per request"):
        assert f"\n  {label:<42} " in sec
    assert max(len(line) for line in sec.split("\n\n", 1)[0].splitlines()) <= 100
    code, out, _ = cli("check", DEMO, "--format", "json", "--no-speed")
    assert "speed" not in json.loads(out)


@pytest.mark.parametrize("args,flag", [(("--isl", "0", "--osl", "8"), "--isl"), (("--isl", "8", "--osl", "1"), "--osl"),
                                       (("--concurrency", "-3"), "--concurrency")])
def test_a_workload_out_of_range_is_a_one_line_error(cli, args, flag):
    code, out, err = cli("check", DEMO, *args)
    assert code == 2 and flag in err and "Traceback" not in err


def test_a_warm_check_reads_the_estimate_from_the_cache_without_importing_the_estimator(demo, tmp_path):
    import os
    stack, report = demo
    assert _speed(stack, report)["status"] == "ok"  # the default workload's estimate is now in the cache
    # the same cache folder and HOME (the cache's entries are authenticated with a per-user key kept there)
    env = {**os.environ, "OPTKG_CACHE_DIR": os.environ["OPTKG_CACHE_DIR"]}
    probe = ("import sys, io, contextlib\nfrom kg.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()) as out: main(['check', sys.argv[1]])\n"
             "print('TTFT' in out.getvalue(), 'pandas' in sys.modules, 'aiconfigurator_core' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", probe, DEMO], env=env, capture_output=True, text=True, cwd=REPO)
    assert r.stdout.split() == ["True", "False", "False"], r.stderr


def test_two_layouts_at_the_same_batch_get_their_own_timings():
    # aiconfigurator-core's BaseBackend.run_agg memoises by (isl, osl, batch, ctx_tokens) only: one backend
    # object shared across layouts answered TP 8 with TP 4's timings. Each estimate gets a fresh backend.
    from kg.speed.estimator import Point, model_dir, run_point
    from kg.core.cache import cache_dir
    cfg = (REPO / "catalog" / "models" / "Qwen__Qwen3-32B.json").read_bytes()
    folder, digest = model_dir({"config.json": cfg}, cache_dir())
    kw = dict(model="Qwen/Qwen3-32B", config_digest=digest, system="h200_sxm", backend="vllm", release="0.27.0",
              pp_size=1, attention_dp_size=1, moe_tp_size=1, moe_ep_size=1, gemm_quant_mode=None,
              moe_quant_mode=None, kvcache_quant_mode=None, batch_size=16, isl=1024, osl=128, ctx_tokens=8192)
    tp2 = run_point(Point(tp_size=2, **kw), str(folder))
    tp4 = run_point(Point(tp_size=4, **kw), str(folder))
    assert tp4["tpot_ms"] < tp2["tpot_ms"]  # half the weights per GPU to read per token
    assert tp2 == run_point(Point(tp_size=2, **kw), str(folder))


def test_one_prompt_per_engine_step_chunked_at_the_engine_budget(demo):
    # the estimator's in-flight-batching model as its authors calibrate it: ctx_tokens = ISL (aiconfigurator
    # cli_estimate's default), chunked at the engine's prefill budget (vLLM max_num_batched_tokens 8,192 here)
    stack, report = demo
    assert _speed(stack, report, isl=1024, osl=256, concurrency=8)["prefill_tokens_per_step"] == 1024
    assert _speed(stack, report, isl=16000, osl=256, concurrency=8)["prefill_tokens_per_step"] == 8192


def test_a_wrong_output_failure_still_gets_a_speed_with_the_warning(catalog, check_rules):
    # vllm-mla-fp8-kv-garbled (vLLM >= 0.15.0, issue 38652): an MLA model with an FP8 KV cache starts and serves,
    # its answers are garbled; InferenceX measured Kimi-K2.5 that way on vLLM 0.17.0. Not "infeasible".
    import kg
    from kg.speed.serving import infeasible_reasons
    stack = kg.stack_from_command("vllm serve deepseek-ai/DeepSeek-R1 -tp 8 --kv-cache-dtype fp8", catalog,
                                  engine_version="0.17.0")
    stack.hardware, stack.gpu_count = catalog.resolve_hardware("H200"), 8
    report = kg.check(stack, catalog, check_rules).to_dict()
    fired = [f for f in report["findings"] if f["rule_id"] == "vllm-mla-fp8-kv-garbled"]
    assert fired and fired[0]["severity"] == "error" and fired[0]["failure"]["outcome"] == "wrong-output"
    assert not any("vllm-mla-fp8-kv-garbled" in r for r in infeasible_reasons(report))
    sp = _speed(stack, report, isl=1024, osl=1024, concurrency=8)
    assert sp["status"] != "infeasible"
    assert any(n.startswith("rule vllm-mla-fp8-kv-garbled") and "output is wrong" in n for n in sp["notes"]), sp


def test_the_calibration_is_not_extrapolated_beyond_its_measured_runs():
    import math
    from kg.speed.serving import Workload, calibration_factor, within_fit
    cell = {"ttft": [0.0, 1.0, 0.0], "concurrency": [2, 8], "isl": [1000, 8000]}
    at = within_fit(cell, Workload(20000, 100, 64))
    assert (at.isl, at.osl, at.concurrency) == (8000, 100, 8)
    assert calibration_factor(cell["ttft"], at) == pytest.approx(math.exp(3))  # exp(1 x log2 8), not exp(6)
    inside = within_fit(cell, Workload(1024, 100, 4))
    assert (inside.isl, inside.concurrency) == (1024, 4)


def test_a_calibration_with_a_fixed_time_adds_it_after_the_factor():
    import math
    from kg.speed.serving import Workload, calibration_factor, calibration_overhead_ms
    wl = Workload(1024, 100, 4)
    # [a, b, c, t0]: exp(0.5 + 0.25 x log2 4) = e, plus 60 ms per request (TTFT) or per step (TPOT)
    assert calibration_factor([0.5, 0.25, 0.0, 60.0], wl) == pytest.approx(math.e)
    assert calibration_overhead_ms([0.5, 0.25, 0.0, 60.0]) == 60.0
    assert calibration_overhead_ms([0.5, 0.25, 0.0]) == 0.0 and calibration_overhead_ms(None) == 0.0


def test_an_auto_kv_cache_is_timed_as_the_format_the_engine_stores_not_the_estimators_fp8_default():
    from types import SimpleNamespace
    from kg.speed.serving import auto_kv_cache_mode
    h200, b200 = {"compute_capability": "9.0"}, {"compute_capability": "10.0"}
    r1 = SimpleNamespace(quantization_config={"quant_method": "fp8"}, architecture="DeepseekV3ForCausalLM",
                         index_topk=None)
    # DeepSeek-R1's FP8 checkpoint names no KV format: SGLang 0.5.9 stores the model dtype (model_runner.py:1687);
    # aiconfigurator-core left unset would time FP8 (sdk/models/helpers.py:657-661)
    assert auto_kv_cache_mode("sglang", r1, h200, {})[0] == "bfloat16"
    assert auto_kv_cache_mode("trtllm", r1, h200, {})[0] == "bfloat16"
    # a DeepSeek-sparse-attention model (index_topk): FP8 from compute capability 10, BF16 below
    glm5 = SimpleNamespace(quantization_config={"quant_method": "fp8"}, architecture="GlmMoeDsaForCausalLM",
                           index_topk=2048)
    assert auto_kv_cache_mode("sglang", glm5, b200, {})[0] == "fp8"
    assert auto_kv_cache_mode("sglang", glm5, h200, {})[0] == "bfloat16"
    # a ModelOpt checkpoint naming kv_cache_quant_algo FP8 (hf_quant_config.json)
    mo = SimpleNamespace(quantization_config={"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}},
                         architecture="LlamaForCausalLM", index_topk=None)
    assert auto_kv_cache_mode("sglang", mo, h200, {})[0] == "fp8"
    # vLLM: optkg's vLLM reading already resolved auto to the checkpoint's format
    assert auto_kv_cache_mode("vllm", mo, h200, {"kv_cache_dtype_checkpoint": "kv_cache_quant_algo FP8"})[0] == "fp8"
    assert auto_kv_cache_mode("vllm", r1, h200, {})[0] == "bfloat16"


def test_the_calibration_applies_to_the_models_it_saw_and_to_others_only_where_it_carried_over():
    from kg.speed.serving import calibrated
    cell = {"ttft": [1.0, 0.0, 0.0], "tpot": [0.5, 0.0, 0.0], "models": {"aaa": "Qwen/Qwen3-32B"},
            "transfers": {"ttft": True, "tpot": False}}
    assert calibrated(cell, "tpot", "aaa", "h200_sxm") == ([0.5, 0.0, 0.0], None)  # fitted on this model
    coef, why = calibrated(cell, "tpot", "bbb", "h200_sxm")  # another model; leave-one-model-out said no
    assert coef is None and "TPOT not calibrated" in why and "leave-one-model-out" in why
    assert calibrated(cell, "ttft", "bbb", "h200_sxm") == ([1.0, 0.0, 0.0], None)  # it carried over for TTFT
    fallback = {**cell, "systems": ["b200_sxm"], "transfers_gpu": {"ttft": False, "tpot": False}}
    assert calibrated(fallback, "tpot", "aaa", "b200_sxm")[0] == [0.5, 0.0, 0.0]
    coef, why = calibrated(fallback, "tpot", "aaa", "gb200")  # an engine-wide factor on a GPU it never saw
    assert coef is None and "leave-one-GPU-out" in why


def test_tensorrt_llm_runs_an_mxfp4_checkpoint_with_mxfp8_activations_on_blackwell_only():
    # tensorrt_llm/_torch/model_config.py get_mxfp4_quant_algo: SM >= 100 and a MoE backend other than TRITON ->
    # W4A8_MXFP4_MXFP8; Hopper keeps the checkpoint's W4A16_MXFP4 (the estimator's reading of quant_method mxfp4)
    from kg.speed.estimator import tables
    from kg.speed.serving import execution_mode
    t = tables()
    assert execution_mode(t, "trtllm", "b200_sxm", "mxfp4", {}) == {"gemm": None, "moe": "w4a8_mxfp4_mxfp8"}
    assert execution_mode(t, "trtllm", "gb200", "mxfp4", {}) == {"gemm": None, "moe": "w4a8_mxfp4_mxfp8"}
    assert execution_mode(t, "trtllm", "h200_sxm", "mxfp4", {}) is None
    assert execution_mode(t, "trtllm", "b200_sxm", "mxfp4", {"moe_backend": "TRITON"}) is None
    # vLLM 0.16.0 on SM 100 runs MXFP4 with BF16 activations unless VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1
    # (vllm/model_executor/layers/quantization/mxfp4.py get_mxfp4_backend): the label stands
    assert execution_mode(t, "vllm", "b200_sxm", "mxfp4", {}) is None
    # with it set (read as bool(int(...)), envs.py 0.15.0:1254-1256), MXFP8 activations (mxfp4.py 0.15.0:127-132),
    # which InferenceX's gpt-oss B200 scripts export; "0" and Hopper keep the label
    on = {"VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8": "1"}
    assert execution_mode(t, "vllm", "b200_sxm", "mxfp4", {}, on) == {"gemm": None, "moe": "w4a8_mxfp4_mxfp8"}
    assert execution_mode(t, "vllm", "b200_sxm", "mxfp4", {}, {"VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8": "0"}) is None
    assert execution_mode(t, "vllm", "h200_sxm", "mxfp4", {}, on) is None


def test_a_model_signature_is_its_shapes_not_its_quantisation_or_metadata():
    import json
    from kg.speed.serving import model_signature
    base = {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 5120, "num_hidden_layers": 64,
            "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 25600, "vocab_size": 151936}
    fp8 = {**base, "quantization_config": {"quant_method": "fp8"}, "transformers_version": "4.57.0"}
    assert model_signature(json.dumps(base).encode()) == model_signature(json.dumps(fp8).encode())
    assert model_signature(json.dumps({**base, "num_hidden_layers": 32}).encode()) != model_signature(
        json.dumps(base).encode())
    wrapped = {"architectures": ["X"], "text_config": {k: v for k, v in base.items() if k != "architectures"}}
    assert model_signature(json.dumps(wrapped).encode()) != model_signature(json.dumps(base).encode())


def test_tensorrt_llm_attention_dp_ranks_each_keep_a_whole_kv_pool(catalog, check_rules):
    # TensorRT-LLM attention DP: every rank schedules its own requests and keeps their KV; optkg's kv_tokens_total
    # counts the 8 ranks' pools (as SGLang's --dp total; KVCacheManager sizes each at TP 1), so each of the 8
    # schedulers admits against one rank's whole pool, kv_tokens_per_gpu
    import kg
    stack = kg.stack_from_command("trtllm-serve deepseek-ai/DeepSeek-R1 --tp_size 8 --ep_size 8 --max_seq_len 4096",
                                  catalog, engine_version="1.1.0rc2.post2")
    stack.hardware, stack.gpu_count = catalog.resolve_hardware("H200"), 8
    stack.settings["enable_dp_attention"] = True
    report = kg.check(stack, catalog, check_rules).to_dict()
    sp = _speed(stack, report, isl=1024, osl=1024, concurrency=256)
    assert sp["status"] == "ok", sp
    assert sp["parallel"]["attention_dp_size"] == 8
    assert sp["cap"]["kv_tokens_per_scheduler"] == int(report["derived"]["kv_tokens_total"]) // 8 \
        == report["derived"]["kv_tokens_per_gpu"]


def test_an_attention_dp_rank_holds_every_gqa_kv_head_but_the_same_mla_latent():
    # Qwen3-235B-A22B (4 KV heads) at TP 8: 1 head per GPU, 1,631,328 tokens (optkg's TRT-LLM pool); under
    # attention DP 8 each rank runs attention at TP 1 and holds all 4 heads: 1,631,328 / 4 = 407,832 tokens
    from types import SimpleNamespace
    from kg.speed.serving import _attention_dp_rank_pool
    gqa = SimpleNamespace(is_mla=False, num_key_value_heads=4)
    assert _attention_dp_rank_pool(gqa, {"kv_tokens_total": 1_631_328, "kv_heads_per_rank": 1}, 8, 8) == 407_832
    # attention DP 2: TP 4 per rank still holds 1 of the 4 heads per GPU: the pool is unchanged
    assert _attention_dp_rank_pool(gqa, {"kv_tokens_total": 1_631_328, "kv_heads_per_rank": 1}, 8, 2) == 1_631_328
    mla = SimpleNamespace(is_mla=True, num_key_value_heads=128)
    assert _attention_dp_rank_pool(mla, {"kv_tokens_total": 1_339_936}, 8, 8) == 1_339_936


def test_estimator_missing_data_reason_is_one_readable_sentence():
    # the raw aiconfigurator-core 0.12.0 message (Rust PerfDatabase) ran on into its install path and was cut there;
    # the reason names the missing measurement and the database, and a reason cached in the old wording reads the same
    from types import SimpleNamespace
    from kg.speed.estimator import tidy_reason
    raw = ('the estimator has no data for this point: perf database error: MoE data missing for MoeKey { quant: "fp8",'
           ' distribution: "uniform", topk: 8, num_experts: 256, hidden_size: 7168, inter_size: 2048, moe_tp_size: 8,'
           ' moe_ep_size: 1 } at /x/.venv/lib/python3.11/site-packag')
    p = SimpleNamespace(system="h200_sxm", backend="sglang", release="0.5.16")
    want = ("the estimator has no data for this point: no measured MoE data for quant fp8, distribution uniform, topk 8,"
            " num_experts 256, hidden_size 7168, inter_size 2048, moe_tp_size 8, moe_ep_size 1 in the h200_sxm sglang"
            " 0.5.16 database")
    assert tidy_reason(raw, p) == want and tidy_reason(want, p) == want
    gemm = ("perf database error: GEMM perf data missing for quant 'int4_wo' at /x/site-packages/a.py available: "
            '["bfloat16", "fp8", "fp8_block"]')
    assert tidy_reason(gemm) == "no measured GEMM data for quant 'int4_wo' (it has bfloat16, fp8, fp8_block)"


def _timed_modes(monkeypatch, catalog, check_rules, cmd, gpu):
    """The (gemm, moe) quant modes speed_for_stack gives the estimator for ``cmd`` (the estimator not run)."""
    import kg
    import kg.speed.serving as serving
    seen = []
    monkeypatch.setattr(serving, "cached", lambda kind, key, build: build())
    monkeypatch.setattr(serving, "run_point", lambda p, folder: seen.append(p) or {"not_evaluable": "stub"})
    stack = kg.stack_from_command(cmd, catalog)
    stack.hardware = catalog.resolve_hardware(gpu)
    _speed(stack, kg.check(stack, catalog, check_rules).to_dict(), isl=1024, osl=1024, concurrency=64)
    return (seen[0].gemm_quant_mode, seen[0].moe_quant_mode) if seen else None


@pytest.mark.parametrize("cmd,gpu,modes", [
    # weight_block_size [128, 128] in config.json's quantization_config: aiconfigurator-core 0.12.0 classifies the
    # checkpoint as fp8_block itself (sdk/utils.py:1205-1207, sdk/models/helpers.py:538-540)
    ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8", "H200", ("fp8_block", "fp8_block")),
    ("trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8", "B200", ("fp8_block", "fp8_block")),
    # vLLM: block-FP8 experts as fp8_block, the linear layers on the graph-timed per-tensor FP8 GEMM rows (the
    # estimator's vLLM fp8_block GEMM rows were timed eagerly; kg/speed/tables.yaml fp8_block_modes)
    ("vllm serve Qwen/Qwen3-32B-FP8", "H100", ("fp8", None)),
    ("vllm serve deepseek-ai/DeepSeek-V3 -tp 8", "H200", ("fp8", "fp8_block")),
    ("vllm serve Qwen/Qwen3-235B-A22B-FP8 -tp 8", "H200", ("fp8", "fp8_block")),
    # online --quantization fp8 on a BF16 checkpoint is per-tensor (vLLM 0.33.0 model_loader/weight_utils.py:355-362)
    ("vllm serve Qwen/Qwen3-32B --quantization fp8", "H100", ("fp8", None)),
])
def test_a_block_scaled_fp8_checkpoint_is_timed_with_the_block_kernels_each_engine_runs(monkeypatch, catalog,
                                                                                        check_rules, cmd, gpu, modes):
    assert _timed_modes(monkeypatch, catalog, check_rules, cmd, gpu) == modes


def test_vllm_015_and_016_block_fp8_experts_at_expert_parallel_1_on_hopper_are_not_timed_as_triton():
    # vLLM 0.16.0 fused_moe/oracle/fp8.py:154-166 picks FlashInfer CUTLASS on SM90 at any expert-parallel size, 0.17.0
    # :86-95 Triton at EP 1; the estimator's h200 vLLM fp8_block MoE rows are Triton at EP 1, FlashInfer CUTLASS above
    from kg.speed.estimator import NotEvaluable, tables
    from kg.speed.serving import block_fp8_modes
    t = tables()
    with pytest.raises(NotEvaluable, match=r"^vLLM 0\.15 and 0\.16 run block-FP8 experts on Hopper with FlashInfer "
                                           r"CUTLASS at expert-parallel 1 \(Triton from 0\.17\.0\)"):
        block_fp8_modes(t, "vllm", "h200_sxm", "fp8", {}, "0.16.0", 1)
    timed = {"gemm": "fp8", "moe": "fp8_block"}
    assert block_fp8_modes(t, "vllm", "h200_sxm", "fp8", {}, "0.16.0", 4)[0] == timed
    assert block_fp8_modes(t, "vllm", "h200_sxm", "fp8", {}, "0.17.0", 1)[0] == timed
    assert block_fp8_modes(t, "vllm", "h200_sxm", "fp8", {}, "0.14.0", 1)[0] == timed
    assert block_fp8_modes(t, "vllm", "b200_sxm", "fp8", {}, "0.16.0", 1)[0] == timed


def test_vllm_says_its_block_fp8_linear_layers_are_timed_on_per_tensor_fp8_rows(monkeypatch, catalog, check_rules):
    notes = _speed_stubbed(monkeypatch, catalog, check_rules, "vllm serve Qwen/Qwen3-235B-A22B-FP8 -tp 4", "H200")
    assert any(n.startswith("vLLM's block-FP8 linear layers are timed with the estimator's per-tensor FP8 GEMM rows: "
                            "its vLLM fp8_block GEMM rows were timed without CUDA graphs") for n in notes["notes"])


@pytest.mark.parametrize("backend,gpu,timed", [("TRTLLM", "B200", None), ("DEEPGEMM", "B200", ("fp8_block", "fp8_block")),
                                               ("TRTLLM", "H200", ("fp8_block", "fp8_block"))])
def test_trtllm_gen_block_fp8_experts_on_blackwell_are_not_timed_as_deepgemm(monkeypatch, catalog, check_rules,
                                                                             tmp_path, backend, gpu, timed):
    # the estimator's TensorRT-LLM b200 fp8_block MoE rows are kernel_source deepgemm only; moe_config.backend TRTLLM
    # runs trtllm-gen kernels there (InferenceX dsr1_fp8_b200_trt.sh @ ec7bafaae:30); Hopper has no such rule
    cfg = tmp_path / "extra.yaml"
    cfg.write_text(f"moe_config:\n  backend: {backend}\n")
    cmd = f"trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8 --extra_llm_api_options {cfg}"
    assert _timed_modes(monkeypatch, catalog, check_rules, cmd, gpu) == timed
    if timed is None:
        sp = _speed_stubbed(monkeypatch, catalog, check_rules, cmd, gpu)
        assert sp["status"] == "not_evaluable" and sp["reasons"] == [
            "TensorRT-LLM runs block-FP8 experts under moe_config.backend TRTLLM with its trtllm-gen kernels "
            "(TRTLLMGenFusedMoE); the estimator's TensorRT-LLM fp8_block MoE rows for this GPU time DeepGEMM "
            "(DeepGemmFusedMoE, moe_config.backend DEEPGEMM) only"]


def test_an_unaligned_block_fp8_expert_shard_is_not_evaluable_in_words():
    # aiconfigurator-core 0.12.0 sdk/models/moe.py:371-376 refuses Qwen3-235B-A22B-FP8 at moe_tp 8:
    # 1,536 / 8 = 192 columns, 192 % 128 = 64; the reason says so and that per-tensor FP8 is not put in its place
    from kg.speed.estimator import tidy_reason
    raw = ("the estimator has no data for this point: Invalid quantized MoE configuration: (moe_intermediate_size=1536"
           " / moe_tp_size=8) % weight_block_size=128 != 0. ")
    want = ("block-scaled FP8 experts (fp8_block): moe_intermediate_size 1,536 / moe_tp_size 8 = 192 columns per GPU is"
            " not a multiple of the 128-wide weight block, a shape the estimator does not time; per-tensor FP8 timings"
            " are not substituted")
    assert tidy_reason(raw) == want and tidy_reason(want) == want


def _speed_stubbed(monkeypatch, catalog, check_rules, cmd, gpu="H100"):
    """speed_for_stack for ``cmd`` with the estimator stubbed out (its notes and reasons, no timing)."""
    import kg
    import kg.speed.serving as serving
    monkeypatch.setattr(serving, "cached", lambda kind, key, build: build())
    monkeypatch.setattr(serving, "run_point", lambda p, folder: {"not_evaluable": "stub"})
    stack = kg.stack_from_command(cmd, catalog)
    stack.hardware = catalog.resolve_hardware(gpu)
    return _speed(stack, kg.check(stack, catalog, check_rules).to_dict(), isl=1024, osl=1024, concurrency=64)


@pytest.mark.parametrize("cmd,what", [
    ("vllm serve meta-llama/Llama-3.1-8B --speculative-config "
     "'{\"method\":\"eagle3\",\"model\":\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\",\"num_speculative_tokens\":3}'",
     "eagle3, 3 draft tokens per step"),
    ("vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --speculative-config '{\"method\":\"deepseek_mtp\",\"num_speculative_tokens\":1}'",
     "deepseek_mtp, 1 draft token per step"),
])
def test_speculative_decoding_is_said_to_be_untimed_never_silently_left_out(monkeypatch, catalog, check_rules, cmd, what):
    # aiconfigurator-core 0.12.0 has no draft-model timing and its MTP (nextn) needs an acceptance rate applied above
    # it (sdk/engine.py:75-76, :406-408): the numbers are the stack's without speculation, and the Speed section says so
    sp = _speed_stubbed(monkeypatch, catalog, check_rules, cmd, "H200")
    assert sp["notes"][0] == (f"speculative decoding ({what}) is not timed: these are the numbers of the same stack "
                              "without it (the estimator has no draft-model timing, and its MTP timing needs an "
                              "acceptance rate optkg does not know)")
    plain = _speed_stubbed(monkeypatch, catalog, check_rules, "vllm serve meta-llama/Llama-3.1-8B", "H200")
    assert not any(n.startswith("speculative decoding") for n in plain["notes"])


def test_weights_offloaded_to_the_host_are_not_timed(monkeypatch, catalog, check_rules):
    # --cpu-offload-gb 40 at TP 2: 40 GiB of each GPU's weights cross the host link every forward pass, which per-op
    # GPU timings leave out: not evaluable, with the amount
    sp = _speed_stubbed(monkeypatch, catalog, check_rules, "vllm serve meta-llama/Llama-3.1-70B -tp 2 --cpu-offload-gb 40")
    assert sp["status"] == "not_evaluable"
    assert sp["reasons"] == ["40.00 GiB of weights per GPU are read from host memory in every forward pass "
                             "(--cpu-offload-gb); the estimator times GPU-resident weights only"]


def test_a_calibration_with_an_osl_term_scales_with_the_output_length_inside_its_range():
    import math
    from kg.speed.serving import Workload, calibration_factor, calibration_overhead_ms, within_fit
    cell = {"tpot": [0.0, 0.0, 0.0, 2.0, 1.0], "concurrency": [4, 64], "isl": [1024, 8192], "osl": [128, 1024]}
    # [a, b, c, t0, d]: exp(1 x log2 512) = exp(9), plus 2 ms per step
    assert calibration_factor(cell["tpot"], within_fit(cell, Workload(1024, 512, 8))) == pytest.approx(math.exp(9))
    assert calibration_overhead_ms(cell["tpot"]) == 2.0
    # OSL 8,192 is taken at the edge of the measured runs, 1,024: exp(10), not exp(13)
    assert within_fit(cell, Workload(1024, 8192, 8)).osl == 1024
    assert calibration_factor(cell["tpot"], within_fit(cell, Workload(1024, 8192, 8))) == pytest.approx(math.exp(10))


def test_a_model_whose_own_train_rows_the_factor_made_worse_is_not_calibrated():
    from kg.speed.serving import calibrated
    kf = {"tpot": [-0.5, 0.0, 0.0], "models": {"aaa": "gap-analysis model", "bbb": "InferenceX model"},
          "transfers": {"tpot": False}, "worse_for": {"tpot": {"bbb": "InferenceX model"}}}
    assert calibrated(kf, "tpot", "aaa", "h200_sxm") == ([-0.5, 0.0, 0.0], None)
    coef, why = calibrated(kf, "tpot", "bbb", "h200_sxm")
    assert coef is None and "raised the error of this model's own measured train rows" in why


def test_attention_dp_balance_holds_a_prompt_for_the_mean_of_its_wait_window():
    # TensorRT-LLM attention_dp_config.enable_balance (kg.speed.mapping.adp_balance_hold_steps). Worked by hand for 2
    # ranks, 10 running requests per rank, OSL 100 (mu = 0.1 arrivals per rank and step), timeout 10, no batching
    # wait: the window H = min(10, Exp(0.1)): E[H] = (1 - e^-1) / 0.1 = 6.3212, E[H^2] = 2 (100 - 200 / e) = 52.848;
    # arrivals at 2 mu = 0.2: (6.3212 + 0.2 x 52.848 / 2) / (1 + 0.2 x 6.3212) = 11.6060 / 2.2642 = 5.1258 steps
    from kg.speed.mapping import adp_balance_hold_steps as hold
    assert hold(2, 10, 100, 10, 0) == pytest.approx(5.1258, abs=1e-3)
    assert hold(1, 10, 100, 10, 0) == 0.0  # one rank: nothing to balance
    # no other rank ever gets a request: every prompt waits out the timeout
    assert hold(8, 1, 10**9, 60, 0) == pytest.approx(60.0, rel=1e-4)
    # every rank has one at once: the batching wait alone, which the prompts arriving during it wait half of
    assert hold(8, 10**6, 1, 60, 10) == pytest.approx(5.0, rel=1e-3)


def test_tensorrt_llm_attention_dp_balance_read_from_the_llm_api_yaml_adds_its_held_steps_to_ttft(
        catalog, check_rules, tmp_path):
    # InferenceX's DeepSeek-R1 TensorRT-LLM launches (benchmarks/dsr1_fp8_h200_trt.sh @ b30c3398a:49-54) write
    # attention_dp_config {batching_wait_iters: 0, enable_balance: true, timeout_iters: 60} into the LLM-API YAML
    import kg
    from kg.speed.mapping import adp_balance_hold_steps
    runs = {}
    for name, extra in (("plain", ""), ("balanced", "attention_dp_config:\n  batching_wait_iters: 0\n"
                                                     "  enable_balance: true\n  timeout_iters: 60\n")):
        f = tmp_path / f"{name}.yaml"
        f.write_text("enable_attention_dp: true\n" + extra)
        stack = kg.stack_from_command(f"trtllm-serve deepseek-ai/DeepSeek-R1 --tp_size 8 --ep_size 8 --max_seq_len 4096 "
                                      f"--extra_llm_api_options {f}", catalog, engine_version="1.1.0rc2.post2")
        stack.hardware, stack.gpu_count = catalog.resolve_hardware("H200"), 8
        runs[name] = (stack, _speed(stack, kg.check(stack, catalog, check_rules).to_dict(), isl=1024, osl=1024,
                                    concurrency=256))
    stack, sp = runs["balanced"]
    assert (stack.settings["attention_dp_enable_balance"], stack.settings["attention_dp_timeout_iters"],
            stack.settings["attention_dp_batching_wait_iters"]) == (True, 60, 0)
    plain = runs["plain"][1]
    assert plain["status"] == sp["status"] == "ok" and plain["context_hold_steps"] == 0.0
    # 8 ranks of 32 running requests, each finishing after 1,024 decode steps
    assert sp["context_hold_steps"] == pytest.approx(adp_balance_hold_steps(8, 32, 1024, 60, 0))
    assert sp["ttft_ms"] - plain["ttft_ms"] == pytest.approx(sp["context_hold_steps"] * sp["itl_ms"])
    assert any("enable_balance" in n and "timeout_iters 60" in n for n in sp["notes"])


def test_sglang_scheduler_recv_interval_holds_a_prompt_half_its_polling_period(monkeypatch, catalog, check_rules):
    # --scheduler-recv-interval k: the scheduler takes new requests once every k decode steps (sglang 0.5.9
    # srt/managers/scheduler_recv_skipper.py:26-38, decode weight 1: environ.py:233): a prompt waits k / 2 steps.
    # InferenceX's B200 SGLang scripts pass 10 below 16 clients, else 30 (single_node/qwen3.5_fp8_b200.sh @ efd49e50b:32-35)
    import kg
    import kg.speed.serving as serving
    from kg.speed.mapping import _sglang_context_hold
    assert _sglang_context_hold({"scheduler_recv_interval": "30"}, None, 64, 1024)[0] == 15.0
    assert _sglang_context_hold({}, None, 64, 1024) == (0.0, "")  # the default, 1: every step
    monkeypatch.setattr(serving, "cached", lambda kind, key, build: build())
    monkeypatch.setattr(serving, "run_point", lambda p, folder: {"ttft_ms": 100.0, "tpot_ms": 20.0, "release": "0.5.14",
                                                                 "output_tokens_per_s": 800.0, "memory_gib": 40.0})
    runs = {}
    for k in ("1", "30"):
        stack = kg.stack_from_command("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2 "
                                      f"--scheduler-recv-interval {k}", catalog, engine_version="0.5.9")
        stack.hardware, stack.gpu_count = catalog.resolve_hardware("H100"), 2
        runs[k] = _speed(stack, kg.check(stack, catalog, check_rules).to_dict(), isl=1024, osl=1024, concurrency=16)
    plain, held = runs["1"], runs["30"]
    assert (plain["context_hold_steps"], held["context_hold_steps"]) == (0.0, 15.0)
    # 15 steps at the 20 ms TPOT (uncalibrated here: sglang/h100_sxm's factor was fitted on 0.5.1.post1 rows only)
    assert (held["itl_ms"], held["ttft_ms"] - plain["ttft_ms"]) == (20.0, pytest.approx(300.0))
    assert any("--scheduler-recv-interval 30" in n and "~15 decode steps" in n for n in held["notes"])


def test_sglang_prefill_budget_left_unset_is_the_one_sglang_picks_from_the_gpu_memory(catalog):
    # newuser5 #8: SGLang picks chunked_prefill_size from the GPU's memory (0.5.5 srt/server_args.py:689-770: 8,192
    # below 160 GiB, 16,384 above) and divides it by the DP size under DP attention (:1382); Speed assumed 8,192
    from types import SimpleNamespace
    from kg.speed.mapping import Parallel, _sglang_ctx_default
    b200, h200 = catalog.resolve_hardware("B200"), catalog.resolve_hardware("H200")
    one = Parallel(2, 1, 1, 2, 1, 2)
    stack = lambda hw, tech: SimpleNamespace(hardware=hw, techniques=tech, engine_version="0.5.9")  # noqa: E731
    assert _sglang_ctx_default(stack(b200, {}), one)[0] == 16384  # 183,359 MiB visible
    assert _sglang_ctx_default(stack(h200, {}), one)[0] == 8192  # 143,771 MiB
    dp8 = Parallel(1, 1, 8, 8, 1, 8)  # --tp 8 --dp 8 --enable-dp-attention
    got, why = _sglang_ctx_default(stack(b200, {"dp-attention": {}}), dp8)
    assert got == 2048 and "16,384 / 8 DP-attention ranks = 2,048" in why
    assert _sglang_ctx_default(stack(b200, {}), dp8)[0] == 16384  # --dp 8 replicas: each keeps the whole budget


def test_a_model_with_its_own_factor_takes_it_and_the_others_the_cells(monkeypatch):
    import kg.speed.serving as serving
    cal = {"vllm/h100_sxm": {"ttft": [0.0, 0.0, 0.0, 10.0], "tpot": None, "train_rows": 40, "concurrency": [4, 64],
                             "isl": [1024, 8192], "osl": [1024, 1024], "models": {"m1": "one", "m2": "two"},
                             "per_model": {"m2/fp8": {"model": "two", "ttft": [0.69315, 0.0, 0.0], "tpot": None,
                                                  "train_rows": 20, "concurrency": [4, 64], "isl": [1024, 1024],
                                                  "osl": [1024, 1024]}}}}
    monkeypatch.setattr(serving, "calibration", lambda: cal)
    notes: list[str] = []
    (k1, t1), _ = serving._factors("vllm", "h100_sxm", "m1", serving.Workload(1024, 1024, 8), notes)
    assert (k1, t1) == (1.0, 10.0)  # the cell's: factor 1, + 10 ms
    notes = []
    (k2, t2), _ = serving._factors("vllm", "h100_sxm", "m2", serving.Workload(1024, 1024, 8), notes, "fp8")
    assert k2 == pytest.approx(2.0, rel=1e-4) and t2 == 0.0
    assert any("this model's own factor" in n for n in notes)
    # the same shapes timed with other kernels (BF16 GEMMs, or its experts expert-parallel): the cell's factor
    (k3, t3), _ = serving._factors("vllm", "h100_sxm", "m2", serving.Workload(1024, 1024, 8), [], None)
    (k4, t4), _ = serving._factors("vllm", "h100_sxm", "m2", serving.Workload(1024, 1024, 8), [], "fp8", True)
    assert (k3, t3) == (k4, t4) == (1.0, 10.0)


def test_the_isl_limits_are_the_longest_prompts_the_installed_estimator_measured():
    # kg/speed/context_isl.yaml is generated from aiconfigurator-core's own parquet files (tools/speed_context_isl.py):
    # 0.12.0 measures GQA / MHA prefill attention to 16,384 tokens everywhere, MLA to 32,768 except TensorRT-LLM
    # 1.0.0's tables on A100 and L40S (16,384)
    pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("aiconfigurator_core")
    import importlib.util
    spec = importlib.util.spec_from_file_location("speed_context_isl", REPO / "tools" / "speed_context_isl.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.render() == (REPO / "kg" / "speed" / "context_isl.yaml").read_text(encoding="utf-8")
    from kg.speed.serving import context_isl_max
    assert context_isl_max("h100_sxm", "vllm", "gqa") == 16384
    assert context_isl_max("h200_sxm", "trtllm", "mla") == 32768
    assert context_isl_max("a100_sxm", "trtllm", "mla") == context_isl_max("l40s", "trtllm", "mla") == 16384
    assert context_isl_max("a100_sxm", "sglang", "mla") == 16384  # no MLA table there: the fallback, the smallest


@pytest.mark.parametrize("isl, status", [(32768, "ok"), (32769, "not_evaluable")])
def test_an_mla_prompt_past_the_estimators_mla_tables_is_not_evaluable(catalog, check_rules, isl, status):
    # DeepSeek-V3 (MLA) on 8 x H200 under TensorRT-LLM: its MLA context tables reach 32,768 tokens on h200_sxm.
    # Before, MLA models were never limited, and ISL 100,000 got an extrapolated TTFT
    import kg
    stack = kg.stack_from_command("trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8", catalog)
    stack.hardware = catalog.resolve_hardware("H200")
    out = _speed(stack, kg.check(stack, catalog, check_rules).to_dict(), isl=isl, osl=100, concurrency=1)
    assert out["status"] == status
    why = ("ISL 32,769 is past the longest prompt the estimator's MLA context-attention tables measure on h200_sxm "
           "for trtllm (32,768 tokens)")
    assert (out.get("reasons") or [""])[0].startswith(why) is (status == "not_evaluable"), out


@pytest.mark.parametrize("isl, status", [(16384, "ok"), (16385, "not_evaluable")])
def test_an_isl_past_the_estimators_measured_prompts_is_not_evaluable(demo, isl, status):
    # newuser7 #4: at ISL 100,000 a TTFT was printed like any other; the prefill attention past 16,384 would be
    # the estimator's extrapolation, and a number outside the data's coverage is not evaluable
    stack, report = demo
    out = _speed(stack, report, isl=isl, osl=100, concurrency=1)
    assert out["status"] == status
    why = ("ISL 16,385 is past the longest prompt the estimator's GQA context-attention tables measure on h200_sxm "
           "for vllm (16,384 tokens)")
    assert (out.get("reasons") or [""])[0].startswith(why) is (status == "not_evaluable"), out


def test_sglang_prefill_budget_with_chunked_prefill_off_is_max_prefill_tokens(catalog):
    # newuser8: `--chunked-prefill-size -1` was reported as "not given" and timed with the 8,192-token chunk; with
    # chunking off SGLang's prefill batch takes whole prompts up to --max-prefill-tokens (default 16,384; sglang
    # 0.5.23 srt/managers/schedule_policy.py:883-890), not divided under DP attention
    from types import SimpleNamespace
    from kg.speed.mapping import Parallel, _sglang_ctx_default
    h100 = catalog.resolve_hardware("H100")
    one = Parallel(1, 1, 1, 1, 1, 1)
    stack = lambda s: SimpleNamespace(hardware=h100, techniques={}, engine_version="0.5.23", settings=s)  # noqa: E731
    got, why = _sglang_ctx_default(stack({"chunked_prefill_size": -1}), one)
    assert got == 16384 and why.startswith("chunked prefill off (chunked_prefill_size -1)")
    assert _sglang_ctx_default(stack({"chunked_prefill_size": -1, "max_prefill_tokens": 4096}), one)[0] == 4096
    assert _sglang_ctx_default(stack({}), one)[0] == 8192  # not given: the GPU's default chunk


def test_sglang_max_running_requests_is_split_over_the_dp_attention_ranks(monkeypatch, catalog, check_rules):
    # newuser8: SGLang divides --max-running-requests by the DP-attention size, one share per rank's scheduler
    # (sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:3126-3129; 0.5.5 managers/tp_worker.py:281-289); Speed
    # capped each rank at the whole 16, so 64 clients all ran. Now 16 // 8 = 2 per rank: 16 run, 48 queue.
    import kg
    import kg.speed.serving as serving
    from kg.speed.mapping import Parallel, _sglang_running_per_scheduler
    dp8 = Parallel(1, 1, 8, 8, 1, 8)
    per, why = _sglang_running_per_scheduler(16, dp8, {"dp-attention": {}})
    assert per == 2 and why.startswith("--max-running-requests 16 is split over the 8 DP-attention ranks: 2 running")
    assert _sglang_running_per_scheduler(4, dp8, {"dp-attention": {}})[0] == 1  # at least one per rank
    assert _sglang_running_per_scheduler(16, Parallel(2, 1, 2, 2, 1, 4), {}) == (16, "")  # --dp replicas keep 16 each
    batches, cached = [], serving.cached  # the estimate itself is not cached; the database's releases are
    monkeypatch.setattr(serving, "cached", lambda kind, key, build: build() if kind == "speed-point" else
                        cached(kind, key, build))
    monkeypatch.setattr(serving, "run_point", lambda p, folder: batches.append(p.batch_size) or {"not_evaluable": "x"})
    stack = kg.stack_from_command("python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp 4 "
                                  "--enable-dp-attention --dp 4 --max-running-requests 16", catalog)
    stack.hardware, stack.gpu_count = catalog.resolve_hardware("H100"), 4
    sp = _speed(stack, kg.check(stack, catalog, check_rules).to_dict(), isl=1024, osl=1024, concurrency=64)
    assert batches == [4]  # requests per rank the estimator times: 16 // 4 (was 16: 64 clients over 4 ranks)
    assert any(n.startswith("--max-running-requests 16 is split over the 4 DP-attention ranks: 4 running per rank")
               for n in sp["notes"])


def test_tensorrt_llm_ttft_queueing_keeps_growing_past_the_estimators_cap_of_four_prefills():
    # aiconfigurator-core 0.12.0 sdk/backends/base_backend.py:130-139: 2 + (steps - 3) / 20 prefill times, capped at
    # 4; steps = ceil(isl x batch / ctx_tokens). Worked by hand: 16 prompts of 1,024 tokens, one per step: 16 steps,
    # 2 + 13 / 20 = 2.65 (under the cap); 64 prompts: 2 + 61 / 20 = 5.05, capped at 4; 64 prompts, 8 per step of
    # 8,192 tokens: 8 steps, 2.25
    from kg.speed.mapping import ENGINES, ttft_queue_factors
    assert ttft_queue_factors(16, 1024, 1024) == (pytest.approx(2.65), pytest.approx(2.65))
    assert ttft_queue_factors(64, 1024, 1024) == (4.0, pytest.approx(5.05))
    assert ttft_queue_factors(64, 1024, 8192) == (pytest.approx(2.25), pytest.approx(2.25))
    # only TensorRT-LLM's train rows showed the uncapped factor lowers the left-out TTFT error
    assert [e for e, m in sorted(ENGINES.items()) if m.ttft_queue_uncapped] == ["trtllm"]


def test_batch_waiting_holds_a_prompt_for_the_mean_of_its_wait_window():
    # TensorRT-LLM batch_wait_timeout_iters / batch_wait_max_tokens_ratio (kg.speed.mapping.batch_wait_hold_steps).
    from kg.speed.mapping import batch_wait_hold_steps as hold
    # InferenceX's Llama-70B 1k/1k below TP 8 (ratio 0.9 of max_num_tokens 16,384, 20 steps): 15 prompts of 1,000
    # tokens would release it, and at 4 / 1,000 arrivals per step the timeout always comes first, H = 20:
    # (20 + 0.004 x 400 / 2) / (1 + 0.004 x 20) = 20.8 / 1.08 = 19.259 steps
    assert hold(4, 1000, 1000, 16384, 20, 0.9) == pytest.approx(19.259, abs=1e-3)
    # one more prompt releases it (0.5 x 1,000 - 10 running = 490 tokens, prompts of 300): H = min(10, Exp(0.1)),
    # E[H] = 6.3212, E[H^2] = 52.848 (as the attention-DP test): (6.3212 + 2.6424) / 1.63212 = 5.4920 steps
    assert hold(10, 100, 300, 1000, 10, 0.5) == pytest.approx(5.4920, abs=1e-3)
    assert hold(10, 100, 600, 1000, 10, 0.5) == 0.0  # one prompt fills the threshold: released at once
    # either value at 0 releases at once (py_executor._waiting_requests: count >= 0, tokens >= 0)
    assert hold(4, 1000, 1000, 16384, 20, 0.0) == hold(4, 1000, 1000, 16384, 0, 0.9) == 0.0


def test_tensorrt_llm_batch_waiting_read_from_the_llm_api_yaml_adds_its_held_steps_to_ttft(
        catalog, check_rules, tmp_path):
    # InferenceX's Llama-70B TensorRT-LLM 1k/1k launches below TP 8 (benchmarks/70b_fp8_h200_trt_slurm.sh @ 9596d23d7:
    # 23-34) write batch_wait_max_tokens_ratio 0.9 and batch_wait_timeout_iters 20 into the LLM-API YAML
    import kg
    from kg.speed.mapping import batch_wait_hold_steps
    runs = {}
    for name, extra in (("plain", ""), ("waiting", "batch_wait_max_tokens_ratio: 0.9\nbatch_wait_timeout_iters: 20\n")):
        f = tmp_path / f"{name}.yaml"
        f.write_text("stream_interval: 10\n" + extra)
        stack = kg.stack_from_command(f"trtllm-serve deepseek-ai/DeepSeek-R1 --tp_size 8 --ep_size 8 --max_seq_len 4096 "
                                      f"--max_num_tokens 16384 --extra_llm_api_options {f}", catalog,
                                      engine_version="1.1.0rc2.post2")
        stack.hardware, stack.gpu_count = catalog.resolve_hardware("H200"), 8
        runs[name] = (stack, _speed(stack, kg.check(stack, catalog, check_rules).to_dict(), isl=1024, osl=1024,
                                    concurrency=64))
    stack, sp = runs["waiting"]
    assert (stack.settings["batch_wait_max_tokens_ratio"], stack.settings["batch_wait_timeout_iters"]) == (0.9, 20)
    plain = runs["plain"][1]
    assert plain["status"] == sp["status"] == "ok" and plain["context_hold_steps"] == 0.0
    assert sp["context_hold_steps"] == pytest.approx(batch_wait_hold_steps(64, 1024, 1024, 16384, 20, 0.9))
    assert sp["ttft_ms"] - plain["ttft_ms"] == pytest.approx(sp["context_hold_steps"] * sp["itl_ms"])
    assert any("batch_wait_timeout_iters 20" in n for n in sp["notes"])


def test_a_model_of_a_cell_without_a_factor_takes_the_engine_wide_one_only_where_it_carried(monkeypatch):
    # calibration.yaml engine_for (tools/accuracy/run.py _engine_for): vllm/h200 refused a TTFT factor of its own
    # (NVIDIA gap rows beside InferenceX rows); the engine-wide factor carried to MiniMax's train rows there
    import kg.speed.serving as serving
    engine = {"ttft": [0.69315, 0.0, 0.0], "tpot": None, "train_rows": 400, "concurrency": [4, 64],
              "isl": [1024, 8192], "osl": [1024, 8192], "models": {"m1": "one", "m2": "two"}, "systems": ["b200_sxm"],
              "transfers": {"ttft": True}, "transfers_gpu": {"ttft": True}}
    cell = {"ttft": None, "tpot": None, "train_rows": 60, "concurrency": [4, 64], "isl": [1024, 8192],
            "osl": [1024, 8192], "models": {"m1": "one", "m2": "two"},
            "engine_for": {"ttft": {"m1": {"model": "one", "left_out_mape": {"engine": 18.7, "uncalibrated": 27.3}}}}}
    monkeypatch.setattr(serving, "calibration", lambda: {"vllm/*": engine, "vllm/h200_sxm": cell})
    notes: list[str] = []
    (k1, t1), _ = serving._factors("vllm", "h200_sxm", "m1", serving.Workload(1024, 1024, 8), notes)
    assert k1 == pytest.approx(2.0, rel=1e-4) and t1 == 0.0
    assert any("vllm/*'s is taken for this model" in n and "18.7 % vs 27.3 %" in n for n in notes)
    (k2, t2), _ = serving._factors("vllm", "h200_sxm", "m2", serving.Workload(1024, 1024, 8), [])
    assert (k2, t2) == (1.0, 0.0)  # not shown to carry: uncalibrated
