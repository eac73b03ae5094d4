"""What the measured rows of silicon_sample.csv really ran (tools/accuracy/measured.py): the layout corrections
hold exactly where the CSV's own ids and duplicate measurements say so, the benchmark's request lengths, and the
InferenceX launch flags read from its scripts (tools/accuracy/launches.yaml)."""
from __future__ import annotations

import csv
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "accuracy"))

import measured  # noqa: E402


@lru_cache(maxsize=1)
def rows() -> tuple[dict, ...]:
    import run
    with (run.package_dir() / "systems" / "silicon_sample.csv").open(newline="") as f:
        return tuple(csv.DictReader(f))


def row(row_id: str) -> dict:
    return next(r for r in rows() if r["id"] == row_id)


def test_an_inferencex_tp8_ep8_run_recorded_on_64_gpus_is_read_as_8_gpus():
    # recorded tp 64, moe_tp 8 x moe_ep 8; the id (and the 2026-03-25 dump's copy of the same measurement) say tp 8, ep 8
    r = row("2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_8192x1024_c8_tp8_ep8_960")
    assert (r["tp_size"], r["moe_tp_size"], r["moe_ep_size"]) == ("64", "8", "8")
    run = measured.run_of(r)
    assert (run.tp, run.adp, run.moe_tp, run.moe_ep, run.gpus) == (8, 1, 1, 8, 8)
    assert run.concurrency == 8 and run.batch_per_rank == 8


def test_dp_attention_rows_recorded_with_n_squared_ranks_get_n_ranks_and_the_clients_per_rank():
    # c128 on tp 8 / ep 8 with DP attention: recorded attention_dp 64 and batch_size 2 (= 128 / 64)
    r = row("2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_8192x1024_c128_tp8_ep8_942")
    assert (r["attention_dp_size"], r["batch_size"]) == ("64", "2")
    run = measured.run_of(r)
    assert (run.tp, run.adp, run.moe_tp, run.moe_ep) == (1, 8, 1, 8)
    assert (run.batch_per_rank, run.concurrency) == (16, 128)


def test_vllm_ep_rows_recorded_with_tp_times_ep_gpus_are_read_as_tp_gpus():
    # vLLM tp 4 / ep 4 recorded as tp 4, attention_dp 4, moe_ep 16
    r = next(x for x in rows() if x["id"].startswith("2026_04_06_kimi_k2_5_b200_sxm_vllm_fp4_agg_1024x1024_c64"))
    assert (r["tp_size"], r["attention_dp_size"], r["moe_ep_size"], r["batch_size"]) == ("4", "4", "16", "16")
    run = measured.run_of(r)
    assert (run.tp, run.adp, run.moe_tp, run.moe_ep, run.concurrency) == (4, 1, 1, 4, 64)


def test_the_layout_signature_fires_exactly_on_the_rows_whose_id_names_another_world_size():
    fired = wrong = 0
    for r in rows():
        m = re.search(r"_tp(\d+)(?:_\d+)?_ep(\d+)", r["id"])
        if r["mode"] != "agg" or not m or not r["silicon_data_source"].startswith("source_file=2026-04-06.csv"):
            continue
        n, e = int(m.group(1)), int(m.group(2))
        world = int(r["tp_size"] or 1) * int(r["attention_dp_size"] or 1)
        fix = measured.signature_correction(r)
        assert (fix is not None) == (world != n), r["id"]
        if fix is not None:
            fired += 1
            assert fix[0] * fix[1] == n and fix[3] == e, r["id"]
        wrong += world != n
    assert fired == wrong == 234


def test_a_consistent_row_and_a_gap_analysis_row_are_not_corrected():
    assert measured.signature_correction(row("2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x8192_c16_tp8_0_ep8_0_1260")) is None
    # NVIDIA gap analysis: a real TP 4 = moe_tp 2 x moe_ep 2 layout, not the InferenceX encoding
    gap = next(r for r in rows() if r["model_path"] == "Qwen/Qwen3-235B-A22B-FP8" and r["backend"] == "trtllm"
               and r["moe_tp_size"] == "2" and r["moe_ep_size"] == "2")
    assert measured.source_of(gap) == "nvidia-gap-analysis" and measured.signature_correction(gap) is None


def test_a_moe_row_whose_expert_group_spans_more_gpus_than_its_attention_runs_data_parallel_attention():
    r = row("qwen_qwen3_235b_a22b_fp8_qwen_qwen3_235b_a22b_fp8_h200_sxm_vllm_agg_1000x100_c8_tp1_epnone_2")
    assert (r["tp_size"], r["attention_dp_size"], r["moe_tp_size"], r["batch_size"]) == ("1", "", "2", "8")
    run = measured.run_of(r, is_moe=True)
    assert (run.tp, run.adp, run.moe_tp, run.moe_ep, run.batch_per_rank, run.concurrency) == (1, 2, 2, 1, 4, 8)
    assert measured.attention_dp_correction(r, is_moe=False) is None


def test_gb200_deepseek_rows_of_the_april_dump_are_disaggregated_runs_not_one_engine():
    flagged = [r for r in rows() if measured.disaggregated_as_aggregated(r)]
    assert len(flagged) == 55
    assert {r["tp_size"] for r in flagged} == {"12", "20", "24", "28", "32", "36", "40", "48", "52", "64", "72"}
    run = measured.run_of(row("2026_04_06_deepseek_r1_gb200_trtllm_fp4_agg_1024x1024_c32_tp36_ep1_11"))
    assert "disaggregated" in run.not_evaluable


@pytest.mark.parametrize("nominal, source, mean", [(1024, "inferencex", 922), (8192, "inferencex", 7373),
                                                    (1024, "nvidia-gap-analysis", 1024)])
def test_inferencex_requests_average_the_uniform_draw_from_0_8_l_to_l(nominal, source, mean):
    # bench_serving sample_uniform: randint(int(0.8 L), L + 1); 1024 -> 819..1024, mean 921.5
    assert measured.mean_length(nominal, source) == mean


def test_launch_flags_follow_the_script_of_the_measurement_day():
    # MiniMax-M2.5 FP8 on B200, vLLM 0.17.0 (2026-03-11): `if [ "$EP_SIZE" -ge 1 ]` -> expert parallel at ep 1
    early = measured.run_of(next(r for r in rows() if r["id"].startswith(
        "2026_03_25_minimax_m2_5_b200_sxm_vllm_fp8_agg_8192x1024_c64_tp2_0_ep1") and r["backend_version"] == "0.17.0"))
    assert early.flags == "--gpu-memory-utilization 0.95 --block-size 32 --no-enable-prefix-caching --enable-expert-parallel"
    late = measured.run_of(row("minimaxm2_5_b200_vllm_fp8_agg_8192x1024_c64_cfg633"))
    assert late.flags == ("--gpu-memory-utilization 0.90 --block-size 32 --kv-cache-dtype fp8 "
                          "--max-num-batched-tokens 16384 --no-enable-prefix-caching")
    # DeepSeek-R1 FP8 SGLang on 4 B200s: the script's TP-4 branch raises mem_fraction_static to 0.95
    tp4 = measured.run_of(next(r for r in rows() if r["model_path"] == "deepseek-ai/DeepSeek-R1" and r["backend"] == "sglang"
                               and r["backend_version"] == "0.5.9" and r["tp_size"] == "4" and r["precision"] == "fp8"))
    assert "--mem-fraction-static 0.95" in tp4.flags and "--max-running-requests 32" in tp4.flags


def test_the_qwen3_5_and_glm_5_sglang_runs_are_read_as_launched():
    # Qwen3.5-397B FP8 on 8 H200s: qwen3.5_fp8_h200.sh @ f65d6b4b1:50-51 sets a bf16 SSM state and no radix cache,
    # which size SGLang's Mamba / GDN state pool (kg.engines.sglang.pools) out of the KV budget
    qwen = measured.run_of(next(r for r in rows() if r["model_path"] == "Qwen/Qwen3.5-397B-A17B" and r["backend"] == "sglang"
                                and r["system"] == "h200_sxm" and r["isl"] == "1024" and r["osl"] == "1024"
                                and "measured=" in r["silicon_data_source"]))
    assert qwen.flags.endswith("--mamba-ssm-dtype bfloat16 --disable-radix-cache")
    # GLM-5 FP8 on H200: the custom image lmsysorg/sglang:glm5-hopper, built on the measurement day (2026-03-19), is
    # read as the newest final release before it (0.5.9, PyPI 2026-02-23), not as the newest release optkg knows
    glm = measured.run_of(next(r for r in rows() if r["model_path"] == "zhipuai/GLM-5" and r["system"] == "h200_sxm"))
    assert glm.row["backend_version"] == "glm5-hopper" and glm.release == "0.5.9"


def test_a_row_outside_the_sweep_config_of_its_day_keeps_the_engine_defaults():
    # Qwen3.5-397B FP8 on 4 B200s, SGLang 0.5.9, 256 clients: InferenceX's config swept TP 4 only with EP 4 and up to
    # 128 clients (nvidia-master.yaml @ 35d4bb367 / 1cb92d21d): another sweep's run (qwen3.5-fp8-b200-sglang-mtp,
    # so also not evaluable: test_a_day_only_the_mtp_sweep_ran_makes_its_rows_not_evaluable)
    r = next(r for r in rows() if r["model_path"] == "Qwen/Qwen3.5-397B-A17B" and r["backend"] == "sglang"
             and r["tp_size"] == "4" and r["moe_ep_size"] == "1" and r["isl"] == "1024" and r["osl"] == "1024"
             and "silicon_concurrency=256;" in r["silicon_data_source"] and "2026-04-06" in r["silicon_data_source"])
    run = measured.run_of(r)
    assert run.flags == "" and run.launch_evidence is None and "qwen3.5-fp8-b200-sglang" in run.outside_sweep
    # DeepSeek-R1 FP8 on 8 B200s at 64 clients (inside the config's 4-64) keeps the script's flags
    inside = measured.run_of(next(r for r in rows() if r["model_path"] == "deepseek-ai/DeepSeek-R1"
                                  and r["backend"] == "sglang" and r["backend_version"] == "0.5.9"
                                  and r["system"] == "b200_sxm"
                                  and r["tp_size"] == "8" and r["precision"] == "fp8" and r["isl"] == "1024"
                                  and r["osl"] == "1024" and "silicon_concurrency=64;" in r["silicon_data_source"]))
    assert "--max-running-requests 128" in inside.flags and inside.outside_sweep is None


def test_a_day_only_the_mtp_sweep_ran_makes_its_rows_not_evaluable():
    # DeepSeek-R1 FP8, TensorRT-LLM 1.1.0rc2.post2 on 8 H200s, 1k/1k at 4 clients: measured 2026-01-14, the day of
    # InferenceX #392 (bf3456727), whose dsr1-fp8-h200-trt-mtp sweep is the only one that ran 1k/8k at 128 clients that
    # day; the same point on 2025-12-15 (dsr1-fp8-h200-trt, no speculation) stays evaluable
    mtp = measured.run_of(row("2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c4_tp8_0_ep8_0_1252"))
    assert mtp.speculative == mtp.not_evaluable == (
        "speculative decoding (MTP, 3 draft layers (1 with attention DP)): InferenceX's dsr1-fp8-h200-trt-mtp sweep on "
        "2026-01-14; the estimate does not time it")
    plain = measured.run_of(row("dsr1_h200_trtllm_fp8_agg_1024x1024_c4_cfg181"))
    assert plain.speculative is None and plain.not_evaluable is None and plain.launch_evidence


def test_a_day_both_sweeps_ran_leaves_its_rows_undecided():
    # SGLang DeepSeek-R1 FP8 on 8 B200s, 1k/1k at 4 clients: two different measurements on 2026-03-25 (rows _265 and
    # _284), one per config (dsr1-fp8-b200-sglang-mtp beside dsr1-fp8-b200-sglang); neither can be told apart
    for rid in ("2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_265",
                "2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp8_0_ep1_0_284"):
        assert measured.run_of(row(rid)).not_evaluable.startswith(
            "speculative decoding or not: on 2026-03-25 InferenceX ran both dsr1-fp8-b200-sglang-mtp")


def test_another_dump_of_an_mtp_run_is_that_run():
    # NVIDIA's qwen3.5-397b-gap-analysis.csv holds the 2026-03-20 qwen3.5-fp8-b200-sglang-mtp runs to 0.01 ms
    twins = measured.speculative_twins(list(rows()), lambda model: True)
    gap = row("qwen3_5_397b_gap_analysis_qwen3_5_397b_gap_analysis_b200_sxm_sglang_fp8_agg_1024x1024_c4_tp4_ep1_16")
    assert measured.measurement_of(gap) == ("b200_sxm", "1024", "1024", 338.34, 6.33)
    assert twins[measured.measurement_of(gap)].startswith("the same measurement (GPU, lengths, TTFT, TPOT) as "
                                                          "InferenceX row 2026_03_25_qwen3_5_397b_b200_sxm_sglang_fp8")
    assert measured.measurement_of(row("dsr1_h200_trtllm_fp8_agg_1024x1024_c4_cfg181")) not in twins


def test_the_h100_gpt_oss_runs_whose_client_ran_512_against_the_sweeps_server_are_not_evaluable():
    # gptoss_fp4_h100_docker.sh from d22bf9ca9 (2025-11-21) until #310 (4e135fd3f, 2025-12-08): client
    # --max-concurrency 512, server --max-num-seqs $CONC (4-64): the row says 512, the engine served CONC
    bad = measured.run_of(row("2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024x8192_c512_tp8_ep1_1128"))
    assert bad.not_evaluable.startswith("the launch script ran the client at --max-concurrency 512 against a server")
    # the same model x GPU measured in 2026 (0.18.0, --max-num-seqs {conc} and the client at conc) stays evaluable
    ok = measured.run_of(next(r for r in rows() if r["id"].startswith("2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_1024")
                              and r["backend_version"] == "0.18.0"))
    assert ok.not_evaluable is None
    for e in measured.misrecorded():
        assert e["evidence"] and e["reason"] and e["match"]["until"], e


def test_gap_analysis_rows_that_record_no_client_count_are_not_evaluable():
    # Dynamo job 23364591: ids "..._c_tp<N>_...", no silicon_concurrency; batch_size is the planned batch
    flagged = [r for r in rows() if measured.clients_unrecorded(r)]
    assert len(flagged) == 12
    assert {(r["backend"], r["system"]) for r in flagged} == {("vllm", "h100_sxm"), ("trtllm", "h100_sxm"),
                                                              ("trtllm", "gb200")}
    assert all("gtl_job_id=23364591" in r["silicon_data_source"] for r in flagged)
    run = measured.run_of(row("qwen3_32b_qwen3_32b_h100_sxm_vllm_agg_4000x1000_c_tp2_0_epnone_3"), is_moe=False)
    assert run.not_evaluable.startswith("the row records no client count (no c<N> in its id, no silicon_concurrency)")
    # the same job's disaggregated rows and a gap-analysis row naming its clients are left alone
    assert measured.clients_unrecorded(row("qwen3_32b_qwen3_32b_h100_sxm_vllm_disagg_4000x1000_c_tp_epnone_2")) is None
    assert measured.clients_unrecorded(
        row("qwen_qwen3_32b_qwen_qwen3_32b_h100_sxm_vllm_agg_1024x128_c8_tp2_epnone_1")) is None


def test_launch_conditions_are_data_not_code():
    assert measured.evaluate("max(8192, ((conc + isl + 64 + 63) // 64) * 64)", {"conc": 512, "isl": 8192}) == 8768  # (512 + 8192 + 127) // 64 = 137 blocks of 64
    for bad in ("__import__('os')", "conc.real", "[x for x in ()]", "open('f')"):
        with pytest.raises(ValueError):
            measured.evaluate(bad, {"conc": 1})


def test_every_launch_entry_names_its_evidence():
    for e in measured.launches():
        assert e["evidence"] and e["match"]["backend"] in ("vllm", "sglang", "trtllm"), e
        for item in e["flags"]:
            assert set(item) <= {"args", "when", "settings", "env"}, item  # env: variables the launch script exports
    for e in measured.speculative_sweeps():
        assert e["evidence"] and e["decoding"] and e["config"].endswith("-mtp") and e["match"]["days"], e


@pytest.mark.parametrize("backend, version, measured_on, release", [
    ("sglang", "nightly-dev-20260216-d3bae71e", "2026-02-20", "0.5.8"),    # tag day: 0.5.8 (01-23), 0.5.9 on 02-23
    ("sglang", "nightly-dev", "2026-03-20", "0.5.9"),                      # no day in the tag: the measurement day
    ("sglang", "nightly-dev-20260402-d7256eb6", "2026-04-08", "0.5.9"),    # 0.5.10 reached PyPI on 04-05
    ("vllm", "nightly-5b8c30d62b754b57", "2026-04-03", "0.18.1"),          # 0.19.0 appeared that same day
    ("vllm", "0.17.0", "2026-03-11", None),                                # a release is not a nightly
])
def test_a_nightly_image_is_read_as_the_newest_release_published_before_its_day(backend, version, measured_on, release):
    row = {"backend": backend, "backend_version": version, "silicon_data_source": f"x; measured={measured_on}; y"}
    assert measured.nightly_release(row) == release


def test_an_fp8_tagged_run_of_a_block_scaled_checkpoint_is_read_as_that_checkpoint():
    # Fp8Config reads the checkpoint's weight_block_size (SGLang 0.5.9 layers/quantization/fp8.py:179, vLLM 0.19.0
    # :162): DeepSeek-R1, GLM-5-FP8, MiniMax-M2.5 and Qwen3-235B-A22B-FP8 ship [128, 128] blocks, so the row is timed as
    # check times the checkpoint (no quant passed); NVIDIA's Llama FP8 is ModelOpt per-tensor, Qwen3.5's bundled config
    # is the BF16 release
    import run
    import yaml
    models = yaml.safe_load(run.MODELS.read_text())
    served = lambda model, quant: run.served_files({"model_path": model, "gemm_quant_mode": quant}, models)  # noqa: E731
    assert run._block_fp8(served("deepseek-ai/DeepSeek-R1", "fp8")) is True
    assert run._block_fp8(served("zhipuai/GLM-5", "fp8")) is True
    assert run._block_fp8(served("MiniMaxAI/MiniMax-M2.5", "fp8")) is True
    assert run._block_fp8(served("Qwen/Qwen3-235B-A22B-FP8", "fp8")) is True
    assert run._block_fp8(served("meta-llama/Llama-3.1-70B", "fp8")) is False
    assert run._block_fp8(served("Qwen/Qwen3.5-397B-A17B", "fp8")) is False
