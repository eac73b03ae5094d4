"""`optkg fit` end to end: formats, plot, errors with line numbers, --verbose partial output, exit codes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

# make test (xdist --dist loadgroup) runs this module's tests on one worker:
# the Mooncake report (module fixture) is built once
pytestmark = pytest.mark.xdist_group("fit-cli")

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "traces"
MOONCAKE = str(TRACES / "mooncake_fast25_conversation_trace.jsonl")
AZURE = str(TRACES / "azure_llm_inference_2023_code.csv")
SMALL = str(REPO / "rules" / "fixtures" / "traces" / "small_prefix.jsonl")


@pytest.fixture(scope="module")
def mooncake_json():
    # its wall time is measured by `make bench` (tests/bench/run_bench.py, item 7), not asserted here
    # vLLM 0.33.0's budget (utilisation 0.92): 0.34.0 sizes the KV cache after warm-up at 1.0
    return run_cli("fit", MOONCAKE, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--format", "json",
                   "--engine-version", "0.33.0")


def test_mooncake_json(mooncake_json):
    code, out, err = mooncake_json
    assert code == 0, err
    d = json.loads(out)
    assert d["schema_version"] == "1.0" and d["kind"] == "fit"
    m = d["measurements"]
    assert m["requests"] == 12_031
    assert m["prefix_reuse"]["blocks_hit"] == 105_710 and m["prefix_reuse"]["blocks_total"] == 288_500
    # H100-SXM (issue 13: the budget of kg.derive.budget, as check prints it): ceil(81,559 MiB x 0.92) =
    # 78,679,145,186 B - 16,059,990,016 B weights - activation max(8,192 x 110,592, 1,024 x 128,256 x 14) =
    # 1,838,678,016 B - CUDA graphs 268,435,456 B - non-torch 1.79 GiB (80 GB GPU, TP 1) = 58,590,043,833 B of KV;
    # one 512-token block of Llama-3.1-8B is 64 MiB -> floor(58,590,043,833 / 67,108,864) = 873 blocks
    assert d["gpu"]["kv_budget_bytes_per_gpu"] == 58_590_043_833
    assert d["capacities"]["gpu_capacity"]["blocks"] == 873
    fired = {r["id"] for r in d["rules"] if r["fired"]}
    assert {"fit-prefix-caching", "fit-host-kv-cache", "fit-memory-first", "fit-causal-dependency",
            "fit-compact-kv-pattern"} <= fired
    assert {p["id"]: p["recommended"] for p in d["patterns"]} == {"pattern-1": True, "pattern-2": True, "pattern-3": False}


def test_json_is_deterministic(mooncake_json):
    code, out, _ = run_cli("fit", MOONCAKE, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--format", "json",
                           "--engine-version", "0.33.0")
    assert code == 0 and out == mooncake_json[1]


def test_text_and_markdown():
    code, out, err = run_cli("fit", SMALL)
    assert code == 0, err
    assert "tokens: 3,072 of 5,036 hit = 61.00 %" in out
    assert "Context Fit Checklist" in out and "Triangle" in out and "Patterns" in out
    assert "Definitions" not in out
    code, md, err = run_cli("fit", SMALL, "--format", "markdown")
    assert code == 0, err
    assert md.startswith("# optkg fit: `small_prefix.jsonl`")
    assert "| capacity (blocks)" in md and "## Context Fit Checklist" in md


def test_verbose_explains_rules_and_definitions():
    code, out, err = run_cli("fit", SMALL, "--verbose")
    assert code == 0, err
    assert "Definitions" in out and "stack_distance:" in out
    assert "Thresholds (data in rules/fit.yaml" in out and "prefix_reuse_high = 0.3" in out
    # issue 12: a pattern on a fact kind the input lacks is "not evaluable", and says which kind
    assert "fit-token-level-parallelism: needs dependency facts, which this input does not provide" in out
    assert "measured in" in out


def test_azure_says_prefix_reuse_is_not_measurable():
    code, out, err = run_cli("fit", AZURE, "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["measurements"]["prefix_reuse"]["measurable"] is False
    assert d["measurements"]["lengths"]["input"]["p50"] > 0
    fired = [r["id"] for r in d["rules"] if r["fired"]]
    assert fired == ["fit-prefix-reuse-unmeasurable"]
    code, out, _ = run_cli("fit", AZURE)
    assert "Prefix reuse\n  not measurable: the trace carries token counts only" in out
    assert "Not measurable from this trace" in out


def test_plot_written_atomically_and_never_overwritten(tmp_path):
    png = tmp_path / "fit.png"
    code, _, err = run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "0.125",
                           "--plot", str(png))
    assert code == 0, err
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert [p.name for p in tmp_path.iterdir()] == ["fit.png"]  # no temp files left behind
    code, _, err = run_cli("fit", SMALL, "--plot", str(png))
    assert code == 2 and "exists; refusing to overwrite (pass --force" in err
    assert png.read_bytes() == data
    code, _, err = run_cli("fit", SMALL, "--plot", str(png), "--force")
    assert code == 0, err
    assert png.read_bytes() != data  # one panel now (no model)


def test_plot_with_nothing_to_draw(tmp_path):
    code, _, err = run_cli("fit", AZURE, "--plot", str(tmp_path / "x.png"))
    assert code == 2 and "--plot: nothing to draw" in err
    assert not (tmp_path / "x.png").exists()


def test_bad_line_error_and_verbose_partial_output(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text(Path(SMALL).read_text() + "{not json}\n")
    code, out, err = run_cli("fit", str(p))
    assert code == 2
    assert err.startswith(f"optkg: error: {p}:5: not a JSON object")
    assert out == ""
    code, out, err = run_cli("fit", str(p), "--verbose")
    assert code == 2 and f"{p}:5:" in err
    # nothing computed before the bad line is lost
    assert "partial measurements" in out and "requests: 4" in out
    assert "blocks: 6 of 12 hit = 50.00 %" in out


@pytest.mark.parametrize("args,words", [
    (["--gpu", "H100-SXM"], "--gpu/--kv-budget-gib need --model or --config"),
    (["--model", "meta-llama/Llama-3.1-8B", "--tp", "4", "--dcp", "2"], "--dcp: 2 is not valid"),
    (["--model", "meta-llama/Llama-3.1-8B", "--gpu", "Z9000"], "unknown GPU 'Z9000'"),
    (["--model", "no/such-model"], "unknown model 'no/such-model'"),
    (["--session-length", "0"], "--session-length: expected a number of turns >= 1"),
    (["--threshold", "nope=1"], "unknown fit threshold 'nope'"),
    (["--threshold", "prefix_reuse_high"], "--threshold: expected NAME=NUMBER"),
    (["--plot", "out.svg"], "--plot: expected a .png file name"),
])
def test_flag_errors(args, words):
    code, _, err = run_cli("fit", SMALL, *args)
    assert code == 2 and words in err, err
    assert "Traceback" not in err


def test_causal_flag_and_threshold_override():
    code, out, err = run_cli("fit", SMALL, "--causal", "no", "--format", "json",
                             "--threshold", "prefix_reuse_high=0.7")
    assert code == 0, err
    d = json.loads(out)
    assert d["triangle"]["parallel_granularity"]["value"] == "token"
    # reuse 0.61 < 0.7 now: lifetime medium, prefix caching in the info band
    assert d["triangle"]["state_lifetime"]["value"] == "medium"
    assert next(r for r in d["rules"] if r["id"] == "fit-prefix-caching")["severity"] == "info"
    assert d["thresholds"]["prefix_reuse_high"]["value"] == 0.7


def test_fail_on():
    args = ["fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "0.125"]
    # the 0.125 GiB budget holds no p99 request (2,000 tokens x 128 KiB = 250 MiB): an error finding
    assert run_cli(*args)[0] == 0
    assert run_cli(*args, "--fail-on", "error")[0] == 1
    assert run_cli(*args, "--kv-budget-gib", "64", "--fail-on", "error")[0] == 0


def test_output_file(tmp_path):
    out = tmp_path / "r.json"
    code, stdout, err = run_cli("fit", SMALL, "--format", "json", "-o", str(out))
    assert code == 0 and stdout == "" and json.loads(out.read_text())["kind"] == "fit"
    code, _, err = run_cli("fit", SMALL, "--format", "json", "-o", str(out))
    assert code == 2 and "refusing to overwrite" in err


def test_model_given_as_a_config_path():
    # --model accepts a config.json path (and --config the same file): an MHA model of 524,288 B/token
    # (32 layers x 32 KV heads x 256 x 2 B); 16 GiB holds 2,048 blocks of 16 tokens, one sequence all but vLLM's
    # null block: 2,047 x 16 = 32,752 tokens
    cfg = str(REPO / "rules" / "fixtures" / "configs" / "llama2-7b-like-mha.json")
    outs = []
    for flag in ("--model", "--config"):
        code, out, err = run_cli("fit", SMALL, flag, cfg, "--kv-budget-gib", "16", "--format", "json",
                                 "--engine-version", "0.33.0")  # 16-token blocks (64 from 0.34.0)
        assert code == 0, err
        d = json.loads(out)
        assert d["model"]["attention"] == "mha" and d["model"]["kv_bytes_per_token_per_gpu"] == 524_288
        assert d["cost_curve"]["knee_seq_len"] == 32_752
        # causal from the config's architectures (LlamaForCausalLM)
        assert d["triangle"]["parallel_granularity"]["value"] == "layer"
        outs.append(d["features"]["knee_batch_p50"])
    # p50 request 1,150 tokens x 524,288 B = 602,931,200 B -> floor(17,179,869,184 / 602,931,200) = 28
    assert outs == [28, 28]


def test_scheduler_and_context_limits_in_the_text():
    from report_text import unwrap  # the text is wrapped at 100 columns
    code, out, err = run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "16",
                             "--max-num-seqs", "8", "--engine-version", "0.33.0")  # 16-token blocks
    out = unwrap(out)
    assert code == 0, err
    assert max(len(line) for line in run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib",
                                             "16")[1].splitlines()) <= 100
    # Llama-3.1-8B: 131,072 B/token -> 16 GiB holds 8,192 blocks = 131,072 tokens; one sequence all but the null
    # block: 131,056, just under max_position_embeddings 131,072
    assert ("knee: one sequence up to 131,056 tokens (KV memory binds; the model's max_position_embeddings would "
            "allow 131,072)") in out
    assert "scheduler limit: 8 sequences (given with --max-num-seqs)" in out
    flat = " ".join(out.split())
    assert "throughput: at up to 8 concurrent requests (the scheduler limit; the KV knee is 113 median requests)" in flat
    code, out, err = run_cli("fit", SMALL, "--model", "meta-llama/Llama-3.1-8B", "--kv-budget-gib", "16",
                             "--max-model-len", "8192", "--engine-version", "0.33.0")
    out = unwrap(out)
    assert ("knee: one sequence up to 8,192 tokens (--max-model-len binds; KV memory alone would hold 131,056, the "
            "GPU KV cache's 131,072 tokens less vLLM's null block)") in out
    assert run_cli("fit", SMALL, "--max-num-seqs", "0")[0] == 2
