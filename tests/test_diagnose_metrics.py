"""kg.inputs.metrics: every real sample in shared/data/metrics parses, with exact values; merging; scrape windows; errors.

Expected values are read off the files by eye (quoted in the comments), not computed by the parser.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kg.core.errors import OptkgError
from kg.inputs.metrics.detect import detect_format
from kg.inputs.metrics.load import load_snapshot
from kg.inputs.metrics.snapshot import Histogram

from conftest import REPO, SHARED

M = SHARED / "data" / "metrics"
FX = REPO / "tests" / "fixtures" / "metrics"
H100 = "nvidia-h100-80gb-hbm3__590.48.01"
L40S = "nvidia-l40s__595.80"


def snap(*names: str, **kw):
    return load_snapshot([M / n for n in names], **kw)


def test_every_file_in_shared_metrics_parses():
    files = sorted(p for p in M.iterdir() if p.suffix != ".md")
    assert len(files) == 18  # 20 files minus SOURCES.md and METRIC_NAMES.md
    for f in files:
        s = load_snapshot([f])
        assert s.sources and s.sources[0].path == str(f)
        # a field list has no readings; everything else yields at least one engine or device
        assert s.engines or s.devices or s.collector_fields, f


def test_formats_are_detected_from_content():
    expect = {
        "vllm_metrics_datadog_fixture_opt125m.prom": "prometheus",
        "dcgm_exporter_dra166_a100_mig_excerpt.prom": "prometheus",
        "nvidia_gpu_exporter_h100_load.prom": "prometheus",
        f"nvidia_smi_query-gpu_load__{H100}.csv": "nvidia-smi-csv",
        f"nvidia_smi_dmon_load__{H100}.txt": "nvidia-smi-dmon",
        f"nvidia_smi_capture_linux-x86_64__{H100}.txt": "nvidia-smi-capture",
        "dcgm_exporter_default-counters.csv": "dcgm-fields",
    }
    for name, fmt in expect.items():
        assert detect_format((M / name).read_text(), name) == fmt, name


def test_vllm_sample():
    s = snap("vllm_metrics_datadog_fixture_opt125m.prom")
    e = s.engines["vllm"]
    # vllm:prefix_cache_hits_total 64.0, vllm:prefix_cache_queries_total 117.0 -> hit rate 64/117
    assert e.counters["prefix_cache_hits_total"] == 64.0
    assert e.counters["prefix_cache_queries_total"] == 117.0
    assert e.gauges["kv_cache_usage"] == 0.0 and e.gauges["requests_waiting"] == 0.0 and e.gauges["requests_running"] == 0.0
    # the current name wins over the deprecated vllm:gpu_cache_usage_perc, and the note says both are present
    assert e.where["kv_cache_usage"].startswith("vllm:kv_cache_usage_perc ")
    assert any("also present: vllm:gpu_cache_usage_perc" in n for n in s.notes)
    # inter-token latency: V1 name preferred over time_per_output_token_seconds (count 6)
    itl = e.histograms["itl_seconds"]
    assert itl.count == 144.0 and itl.sum == 0.6237391703762114
    # cache_config_info labels: block_size="16", num_gpu_blocks="7281", cache_dtype="auto", gpu_memory_utilization="0.9"
    assert e.config["block_size"] == 16 and e.config["num_gpu_blocks"] == 7281
    assert e.config["cache_dtype"] == "auto" and e.config["gpu_memory_utilization"] == 0.9
    assert e.config["enable_prefix_caching"] is False and e.config["sliding_window"] is None
    # vllm:request_success_total{finished_reason="length"} 1.0; no abort series
    assert e.counters["requests_finished_total"] == 1.0 and "requests_aborted_total" not in e.counters
    unknown = s.unknown_metrics[str(M / "vllm_metrics_datadog_fixture_opt125m.prom")]
    assert "python_gc_objects_collected_total" in unknown and "vllm:engine_sleep_state" in unknown
    assert "vllm:kv_cache_usage_perc" not in unknown


def test_vllm_histogram_quantiles_match_promql():
    h = snap("vllm_metrics_datadog_fixture_opt125m.prom").engines["vllm"].histograms
    # TTFT: 1 observation; buckets le=0.25 -> 0, le=0.5 -> 1. p50 rank 0.5 falls in (0.25, 0.5]:
    # 0.25 + (0.5 - 0.25) * 0.5 / 1 = 0.375
    assert h["ttft_seconds"].quantile(0.5) == pytest.approx(0.375)
    assert h["ttft_seconds"].mean() == 0.31326723098754883
    # ITL: le=0.01 -> 141, le=0.1 -> 144. p50 rank 72 in (0, 0.01]: 0.01 * 72 / 141;
    # p99 rank 142.56 in (0.01, 0.1]: 0.01 + 0.09 * (142.56 - 141) / 3
    assert h["itl_seconds"].quantile(0.5) == pytest.approx(0.01 * 72 / 141)
    assert h["itl_seconds"].quantile(0.99) == pytest.approx(0.01 + 0.09 * 1.56 / 3)


def test_histogram_edge_cases():
    # a rank in the +Inf bucket returns the highest finite bound; no +Inf bucket -> None; empty -> None
    h = Histogram([(1.0, 1.0), (float("inf"), 10.0)], 50.0, 10.0)
    assert h.quantile(0.9) == 1.0
    assert Histogram([(1.0, 3.0)], 1.0, 3.0).quantile(0.5) is None
    assert Histogram([(1.0, 0.0), (float("inf"), 0.0)], 0.0, 0.0).quantile(0.5) is None
    # window: bucket-wise difference
    before = Histogram([(1.0, 2.0), (float("inf"), 4.0)], 3.0, 4.0)
    w = h.minus(before)
    assert w.buckets == [(1.0, -1.0), (float("inf"), 6.0)] and w.sum == 47.0 and w.count == 6.0


def test_sglang_sample():
    e = snap("sglang_metrics_datadog_fixture_opt125m.prom").engines["sglang"]
    # sglang:token_usage 0.25, num_queue_reqs 0, num_running_reqs 0, gen_throughput 425.5,
    # cache_hit_rate 0.2, max_total_num_tokens 430839, num_retracted_reqs 0
    assert e.gauges["kv_cache_usage"] == 0.25
    assert e.gauges["requests_waiting"] == 0 and e.gauges["requests_running"] == 0
    assert e.gauges["generation_tokens_per_s"] == 425.5
    assert e.gauges["prefix_cache_hit_rate"] == 0.2
    assert e.gauges["kv_capacity_tokens"] == 430839
    assert e.gauges["retracted_requests"] == 0
    assert e.histograms["itl_seconds"].count == 31 and e.histograms["itl_seconds"].sum == 0.05


def test_dcgm_t4_datadog_sample():
    s = snap("dcgm_exporter_datadog_fixture_t4.prom")
    d = s.devices["0"]
    # FB_FREE 15109, FB_USED 0, POWER_USAGE 8.969000, POWER_MGMT_LIMIT 70.000000, GPU_UTIL 0 (percent -> fraction)
    assert d.readings["fb_free_mib"] == 15109 and d.readings["fb_used_mib"] == 0
    assert d.readings["power_w"] == 8.969 and d.readings["power_limit_w"] == 70.0
    assert d.readings["gpu_util"] == 0.0
    # the last DRAM_ACTIVE line is an A10G labelled gpu="0": 0.000003; the file mixes devices and says so
    assert d.readings["dram_active"] == 0.000003
    assert "Tesla T4" in d.name and "NVIDIA A10G" in d.name
    assert any("labelled both 'Tesla T4' and 'NVIDIA A10G'" in n for n in s.notes)
    # the dummy profiling lines carry no labels at all
    assert s.devices["unlabelled"].readings["sm_active"] == 0.0


def test_dcgm_mig_excerpts_are_per_instance():
    a100 = snap("dcgm_exporter_dra166_a100_mig_excerpt.prom")
    # GPU_I_ID 8, 9, 10: GR_ENGINE_ACTIVE 0.029399, 0.033893, 0.000000
    assert {k: d.readings["gr_engine_active"] for k, d in a100.devices.items()} == {
        "0/mig8": 0.029399, "0/mig9": 0.033893, "0/mig10": 0.0}
    assert a100.devices["0/mig8"].name == "NVIDIA A100 80GB PCIe"
    h100 = snap("dcgm_exporter_issue512_h100_mig_excerpt.prom")
    assert sorted(h100.devices) == ["0/mig7", "0/mig8", "0/mig9"]
    assert all(d.readings["gr_engine_active"] == 0.0 for d in h100.devices.values())


def test_nvidia_gpu_exporter_sample():
    s = snap("nvidia_gpu_exporter_h100_load.prom")
    assert list(s.devices) == ["0"]  # the uuid label is mapped to index="0" through nvidia_smi_gpu_info
    d = s.devices["0"]
    # nvidia_smi_memory_used_bytes 2.0780679168e+10 = 19818 MiB exactly; total 8.5520809984e+10 = 81559 MiB
    assert d.readings["fb_used_mib"] == 19818 and d.readings["fb_total_mib"] == 81559
    assert d.readings["gpu_util"] == 1.0 and d.readings["mem_copy_util"] == 0.11
    # nvidia_smi_power_draw_watts 631.95 (not the average/instant), enforced limit 700
    assert d.readings["power_w"] == 631.95 and d.readings["power_limit_w"] == 700
    assert d.name == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("name, util, used, total, power, limit", [
    # values as printed in the CSV rows: utilization.gpu, memory.used, memory.total, power.draw, enforced.power.limit
    (f"nvidia_smi_query-gpu_load__{H100}.csv", 100, 19818, 81559, 631.95, 700.0),
    (f"nvidia_smi_query-gpu_idle__{H100}.csv", 0, 0, 81559, 69.85, 700.0),
    (f"nvidia_smi_query-gpu_idle__{L40S}.csv", 100, 0, 46068, 144.97, 350.0),
    (f"nvidia_smi_query-gpu_load__{L40S}.csv", 9, 1235, 46068, 110.23, 350.0),
])
def test_nvidia_smi_query_gpu_csv(name, util, used, total, power, limit):
    d = snap(name).devices["0"]
    assert d.readings["gpu_util"] == pytest.approx(util / 100)
    assert d.readings["fb_used_mib"] == used and d.readings["fb_total_mib"] == total
    assert d.readings["power_w"] == power and d.readings["power_limit_w"] == limit
    assert d.where["power_w"].startswith("power.draw ")  # not power.draw.average / .instant


def test_nvidia_smi_dmon_is_averaged_over_samples():
    d = snap(f"nvidia_smi_dmon_load__{H100}.txt").devices["0"]
    # pwr 631 634 633 634 636 -> 633.6 W; sm 100 x5; mem 10 10 9 9 9 -> 9.4 %
    assert d.readings["power_w"] == pytest.approx(633.6)
    assert d.readings["gpu_util"] == 1.0 and d.readings["mem_copy_util"] == pytest.approx(0.094)
    l40s = snap(f"nvidia_smi_dmon_load__{L40S}.txt").devices["0"]
    # enc 67 59 63 59 67 -> 63 %; sm 10 9 9 9 10 -> 9.4 %
    assert l40s.readings["encoder_util"] == pytest.approx(0.63) and l40s.readings["gpu_util"] == pytest.approx(0.094)
    idle = snap(f"nvidia_smi_dmon_idle__{L40S}.txt").devices["0"]  # mtemp column is '-'
    assert idle.readings["power_w"] == pytest.approx((66 + 65 + 65 + 51 + 37) / 5)


@pytest.mark.parametrize("gpu", [H100, L40S])
@pytest.mark.parametrize("phase", ["load", "idle"])
def test_capture_phase_equals_the_extracted_sections(gpu, phase):
    cap = snap(f"nvidia_smi_capture_linux-x86_64__{gpu}.txt", phase=phase).devices["0"]
    csv_ = snap(f"nvidia_smi_query-gpu_{phase}__{gpu}.csv").devices["0"]
    dmon = snap(f"nvidia_smi_dmon_{phase}__{gpu}.txt").devices["0"]
    for r, v in csv_.readings.items():
        assert cap.readings[r] == v, r  # the query-gpu section wins over dmon
    assert set(dmon.readings) <= set(cap.readings)


def test_capture_without_the_phase_is_an_error(tmp_path):
    text = (M / f"nvidia_smi_capture_linux-x86_64__{H100}.txt").read_text()
    cut = tmp_path / "cap.txt"
    cut.write_text(text[: text.index("# idle :: nvidia-smi (default table)")])
    with pytest.raises(OptkgError, match=r"cap.txt: no 'load :: query-gpu' or 'load :: dmon' section"):
        load_snapshot([cut])


def test_dcgm_field_lists():
    for name in ("dcgm_exporter_default-counters.csv", "dcgm_exporter_dcp-metrics-included.csv"):
        text = (M / name).read_text()
        s = snap(name)
        f = s.collector_fields
        # '# DCGM_FI_PROF_SM_ACTIVE, gauge, ...' is commented out; TENSOR and DRAM are on
        assert f["DCGM_FI_PROF_SM_ACTIVE"] is False and f["DCGM_FI_PROF_SM_OCCUPANCY"] is False
        assert f["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] is True and f["DCGM_FI_PROF_DRAM_ACTIVE"] is True
        enabled = [ln for ln in text.splitlines() if ln.startswith("DCGM_")]
        assert sum(f.values()) == len(enabled)


def test_merge_prefers_query_gpu_over_dmon_and_notes_disagreement():
    s = snap(f"nvidia_smi_dmon_load__{H100}.txt", f"nvidia_smi_query-gpu_load__{H100}.csv")
    d = s.devices["0"]
    # utilization.memory 11 % (CSV) vs dmon mean 9.4 %: the CSV wins, and the disagreement is noted
    assert d.readings["mem_copy_util"] == 0.11 and d.where["mem_copy_util"].startswith("utilization.memory")
    assert any("mem_copy_util: inputs disagree" in n for n in s.notes)
    # power 631.95 vs 633.6 is within 2 %: no note
    assert not any("power_w" in n for n in s.notes)


def test_directory_input_skips_docs():
    s = load_snapshot([M])
    assert any("skipped METRIC_NAMES.md, SOURCES.md" in n for n in s.notes)
    assert {"vllm", "sglang"} <= set(s.engines)


def test_before_after_give_window_rates():
    s = load_snapshot([FX / "vllm_kv_pressure.prom"], before=[FX / "vllm_kv_pressure_before.prom"], window_s=60)
    d = s.deltas("vllm")
    # generation tokens 100,000 -> 160,000; preemptions 3 -> 9; prefix hits 64 -> 4,064 of queries 117 -> 10,117
    assert d["generation_tokens_total"] == 60000 and d["preemptions_total"] == 6
    assert d["prefix_cache_hits_total"] == 4000 and d["prefix_cache_queries_total"] == 10000
    assert s.window_s == 60 and s.window_source == "--window"
    ttft = s.window_histograms("vllm")["ttft_seconds"]
    assert ttft.count == 200 and ttft.sum == 100.0  # 500 - 300 requests, 250 s - 150 s


def test_two_scrapes_in_one_directory_use_sample_timestamps(tmp_path):
    # the later scrape gets the alphabetically earlier name: timestamps (ms in the text) decide, not names
    def stamp(src: Path, ms: int) -> str:
        out = []
        for ln in src.read_text().splitlines():
            out.append(ln if ln.startswith("#") or not ln.strip() else f"{ln} {ms}")
        return "\n".join(out) + "\n"
    (tmp_path / "a_later.prom").write_text(stamp(FX / "vllm_kv_pressure.prom", 1_700_000_090_000))
    (tmp_path / "b_earlier.prom").write_text(stamp(FX / "vllm_kv_pressure_before.prom", 1_700_000_000_000))
    s = load_snapshot([tmp_path])
    assert s.window_s == pytest.approx(90.0) and s.window_source == "sample timestamps"
    assert s.deltas("vllm")["generation_tokens_total"] == 60000
    assert s.engines["vllm"].file.endswith("a_later.prom")


def test_counter_reset_between_scrapes_uses_the_later_value(tmp_path):
    restarted = tmp_path / "after.prom"
    restarted.write_text((FX / "vllm_kv_pressure_before.prom").read_text()
                         .replace("vllm:num_preemptions_total{model_name=\"facebook/opt-125m\"} 3.0",
                                  "vllm:num_preemptions_total{model_name=\"facebook/opt-125m\"} 1.0"))
    s = load_snapshot([restarted], before=[FX / "vllm_kv_pressure.prom"], window_s=10)
    assert s.deltas("vllm")["preemptions_total"] == 1.0  # 9 -> 1 is a restart: the increase is 1, not -8


# ---- malformed input: one OptkgError naming file and line

@pytest.mark.parametrize("text, line, what", [
    ("# HELP a x\n# TYPE a gauge\na 1\nb{x=\"1\" 2\n", 4, "not valid Prometheus text"),
    ("vllm:num_requests_waiting 3\nvllm:num_requests_running abc\n", 2, "not valid Prometheus text"),
    ("index, name, memory.used [MiB]\n0, H100, 19818 MiB\n1, H100\n", 3, "expected 3 columns"),
    ("index, name, memory.used [MiB]\n0, H100, lots MiB\n", 2, "column 'memory.used': expected a number in MiB"),
    ("# gpu pwr sm mem\n# Idx W % %\n 0 100 50 x\n", 3, "column 'mem': expected a number or '-'"),
    ("# gpu pwr sm mem\n 0 100 50\n", 2, "expected 4 columns"),
    ("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\nDCGM_FI_DEV_FB_USED gauge\n", 2, "expected 'DCGM_FI_<FIELD>"),
    ('{"not": "metrics"}\n', 1, "unrecognised metrics format"),
])
def test_malformed_files_name_file_and_line(tmp_path, text, line, what):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(OptkgError) as e:
        load_snapshot([f])
    msg = str(e.value)
    assert msg.startswith(f"{f}:{line}: ") and what in msg and "\n" not in msg


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "empty.prom").write_text("\n")
    with pytest.raises(OptkgError, match="empty.prom: empty file"):
        load_snapshot([tmp_path / "empty.prom"])
    with pytest.raises(OptkgError, match="nope.prom: file not found"):
        load_snapshot([tmp_path / "nope.prom"])


def test_out_of_range_utilisation_is_dropped_with_a_note(tmp_path):
    # DCGM_FI_DEV_GPU_UTIL 4294967295 (UINT32 max, NVIDIA/DCGM issue 199) and a ratio of 93 instead of 0.93
    f = tmp_path / "dcgm.prom"
    f.write_text('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 4294967295\nDCGM_FI_PROF_SM_ACTIVE{gpu="0"} 93\n'
                 'DCGM_FI_PROF_DRAM_ACTIVE{gpu="0"} 0.5\n')
    s = load_snapshot([f])
    assert s.devices["0"].readings == {"dram_active": 0.5}
    assert any("DCGM_FI_PROF_SM_ACTIVE for GPU 0 reads 93 as a fraction, outside 0-1" in n for n in s.notes)
    assert any("DCGM_FI_DEV_GPU_UTIL for GPU 0 reads 4.29497e+07" in n for n in s.notes)
    # ... and kept as invalid readings (4294967295 x 0.01 = 42949672.95; 93 as a ratio)
    assert sorted((i.reading, i.value) for i in s.invalid) == [("gpu_util", 42949672.95), ("sm_active", 93.0)]


def test_unknown_names_are_ignored_not_errors():
    # the trimmed CSV holds only columns diagnose reads (or identity columns): nothing unknown
    s = load_snapshot([FX / "nvidia_smi_h100_load.csv"])
    assert str(FX / "nvidia_smi_h100_load.csv") not in s.unknown_metrics
    full = snap(f"nvidia_smi_query-gpu_load__{H100}.csv")
    names = full.unknown_metrics[str(M / f"nvidia_smi_query-gpu_load__{H100}.csv")]
    assert "pcie.link.gen.current" in names and "utilization.gpu" not in names
    assert full.devices["0"].readings["gpu_util"] == 1.0


# ---- quantiles consistent with the mean (Histogram.summary) -----------------------------------

def test_summary_of_one_observation_is_exact():
    h = snap("vllm_metrics_datadog_fixture_opt125m.prom").engines["vllm"].histograms["prompt_length_tokens"]
    # vllm:request_prompt_tokens: le=2 -> 0, le=5 -> 1, count 1, sum 5.0. PromQL interpolates inside (2, 5]:
    # p50 = 2 + 3 x 0.5 / 1 = 3.5, p99 = 2 + 3 x 0.99 = 4.97 -- below the mean 5 of a single observation.
    assert h.quantile(0.5) == pytest.approx(3.5) and h.quantile(0.99) == pytest.approx(4.97)
    s = h.summary()
    # one observation: every quantile is that observation, the _sum
    assert (s["count"], s["mean"], s["p50"], s["p90"], s["p99"], s["estimate"]) == (1.0, 5.0, 5.0, 5.0, 5.0, "exact")
    assert s["promql"]["p50"] == pytest.approx(3.5)


def test_summary_caps_quantiles_the_mean_contradicts():
    h = snap("vllm_metrics_datadog_fixture_opt125m.prom").engines["vllm"].histograms["queue_time_seconds"]
    # vllm:request_queue_time_seconds: le=0.3 -> 6, +Inf -> 6, count 6, sum 7.358146831393242e-05 (mean 1.23e-05 s).
    # PromQL: every rank in the lowest bucket (0, 0.3]: p50 = 0.3 x 3/6 = 0.15, p90 = 0.3 x 5.4/6 = 0.27,
    # p99 = 0.3 x 5.94/6 = 0.297.
    assert h.quantile(0.5) == pytest.approx(0.15) and h.quantile(0.99) == pytest.approx(0.297)
    s = h.summary()
    total = 7.358146831393242e-05
    # n = 6 non-negative observations. p50 = 3rd smallest (ceil(0.5 x 6) = 3); the 4 observations from it up
    # are each >= it, so p50 <= sum / 4. p90 and p99 = the 6th (ceil(5.4) = ceil(5.94) = 6): p <= sum / 1.
    assert s["estimate"] == "capped" and s["capped"] == ["p50", "p90", "p99"]
    assert s["p50"] == pytest.approx(total / 4) and s["p90"] == pytest.approx(total) and s["p99"] == pytest.approx(total)
    assert s["promql"] == {"p50": pytest.approx(0.15), "p90": pytest.approx(0.27), "p99": pytest.approx(0.297)}


def test_summary_keeps_promql_when_the_mean_allows_it():
    itl = snap("vllm_metrics_datadog_fixture_opt125m.prom").engines["vllm"].histograms["itl_seconds"]
    # ITL: count 144, sum 0.6237 -> p50 bound = 0.6237 / (144 - 72 + 1) = 0.00854 >= 0.01 x 72/141 = 0.0051
    s = itl.summary()
    assert s["estimate"] == "promql" and s["p50"] == pytest.approx(0.01 * 72 / 141) and "promql" not in s
    # a bucket filled evenly: 6 observations of 0.2 s in (0, 0.3] -> p50 0.15 <= 1.2 / 4 = 0.3: not capped
    even = Histogram([(0.3, 6.0), (float("inf"), 6.0)], 1.2, 6.0).summary()
    assert even["estimate"] == "promql" and even["p50"] == pytest.approx(0.15)


# ---- invalid readings are reported, not dropped silently ------------------------------------------

def test_invalid_readings_are_kept_with_the_reason(tmp_path):
    (tmp_path / "dcgm.prom").write_text('DCGM_FI_PROF_SM_ACTIVE{gpu="0"} 1.5\nDCGM_FI_PROF_DRAM_ACTIVE{gpu="0"} 0.2\n')
    (tmp_path / "vllm.prom").write_text('vllm:kv_cache_usage_perc{model_name="m"} NaN\n'
                                        'vllm:num_requests_waiting{model_name="m"} -5\n'
                                        'vllm:num_requests_running{model_name="m"} +Inf\n'
                                        'vllm:prompt_tokens_total{model_name="m"} 10\n')
    s = load_snapshot([tmp_path / "dcgm.prom", tmp_path / "vllm.prom"])
    got = sorted((i.metric, i.entity, i.reading, i.why) for i in s.invalid)
    assert got == [
        ("DCGM_FI_PROF_SM_ACTIVE", "GPU 0", "sm_active", "outside the 0-1 range of a fraction"),
        ("vllm:kv_cache_usage_perc", "vllm", "kv_cache_usage", "not a number"),
        ("vllm:num_requests_running", "vllm", "requests_running", "infinite"),
        ("vllm:num_requests_waiting", "vllm", "requests_waiting", "negative"),
    ]
    # the valid readings stay; the invalid ones are not readings
    assert s.devices["0"].readings == {"dram_active": 0.2}
    assert s.engines["vllm"].gauges == {} and s.engines["vllm"].counters == {"prompt_tokens_total": 10.0}


def test_invalid_samples_in_csv_and_dmon_are_left_out_of_the_mean(tmp_path):
    # two CSV rows for GPU 0: power 100 W and -5 W; the mean is taken over the valid sample only
    (tmp_path / "smi.csv").write_text("index, name, power.draw [W], utilization.gpu [%]\n"
                                      "0, NVIDIA L40S, 100 W, 150 %\n0, NVIDIA L40S, -5 W, 40 %\n")
    s = load_snapshot([tmp_path / "smi.csv"])
    assert s.devices["0"].readings == {"power_w": 100.0, "gpu_util": 0.4}
    assert sorted((i.path.rsplit("/", 1)[-1], i.metric, i.value) for i in s.invalid) == [
        ("smi.csv:2", "utilization.gpu", 1.5), ("smi.csv:3", "power.draw", -5.0)]
    (tmp_path / "dmon.txt").write_text("# gpu pwr sm mem\n# Idx W % %\n 0 100 nan 10\n 0 110 50 12\n")
    d = load_snapshot([tmp_path / "dmon.txt"])
    # sm: nan dropped, 50 % kept; pwr (100 + 110) / 2 = 105 W
    assert d.devices["0"].readings["gpu_util"] == 0.5 and d.devices["0"].readings["power_w"] == 105.0
    assert [(i.metric, i.why) for i in d.invalid] == [("dmon sm", "not a number")]


def test_invalid_histogram_is_left_out(tmp_path):
    f = tmp_path / "h.prom"
    f.write_text('# TYPE vllm:time_to_first_token_seconds histogram\n'
                 'vllm:time_to_first_token_seconds_bucket{le="0.5",model_name="m"} NaN\n'
                 'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 3\n'
                 'vllm:time_to_first_token_seconds_count{model_name="m"} 3\n'
                 'vllm:time_to_first_token_seconds_sum{model_name="m"} 1.0\n')
    s = load_snapshot([f])
    assert "ttft_seconds" not in s.engines["vllm"].histograms
    assert [(i.reading, i.why) for i in s.invalid] == [("ttft_seconds", "a bucket, _sum or _count is NaN")]


# ---- which machine, which model, which scrape --------------------------------------------------

def test_gpu_models_hosts_and_served_model_names():
    s = snap(f"nvidia_smi_query-gpu_load__{H100}.csv", f"nvidia_smi_query-gpu_load__{L40S}.csv",
             "vllm_metrics_datadog_fixture_opt125m.prom")
    # name column of each CSV; the vLLM file names no GPU
    assert s.gpu_models() == {"NVIDIA H100 80GB HBM3": [str(M / f"nvidia_smi_query-gpu_load__{H100}.csv")],
                              "NVIDIA L40S": [str(M / f"nvidia_smi_query-gpu_load__{L40S}.csv")]}
    assert s.hosts() == {}
    assert s.engines["vllm"].model_names == ["facebook/opt-125m"]  # model_name label of every vllm: series
    # the T4 datadog sample labels GPU 0 both 'Tesla T4' and 'NVIDIA A10G': both models are named
    assert sorted(snap("dcgm_exporter_datadog_fixture_t4.prom").gpu_models()) == ["NVIDIA A10G", "Tesla T4"]


def test_before_and_after_the_same_file_is_an_error(tmp_path):
    f = FX / "vllm_kv_pressure.prom"
    with pytest.raises(OptkgError, match=r"vllm_kv_pressure.prom and the later scrape .* are the same file"):
        load_snapshot([], before=[f], after=[f])
    # a copy under another name: allowed, but the note says every increase is 0
    (tmp_path / "copy.prom").write_text(f.read_text())
    s = load_snapshot([], before=[tmp_path / "copy.prom"], after=[f], window_s=60)
    assert any("have the same content" in n for n in s.notes)
    assert s.deltas("vllm")["generation_tokens_total"] == 0
