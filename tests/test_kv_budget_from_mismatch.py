"""check --kv-budget-from refuses a log of another stack (tester-3 item 18): one line, exit 2, unless
--accept-log-mismatch. The logs are tests/fixtures/logs (SOURCES.md); kg.analyses.reconcile.log_stack_mismatch."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from kg.engines.logs import read_startup_log

LOGS = Path(__file__).resolve().parent / "fixtures" / "logs"
QWEN_LOG = str(LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log")
LLAMA_LOG = str(LOGS / "vllm-10517-llama31-8b-rtx3090-29k.log")


def test_a_qwen3_235b_log_for_a_llama_8b_stack_is_refused():
    # the log: 8.11 GiB for 178,880 tokens = 8,708,224,860 / 178,880 = 48,681 B per token per GPU;
    # Llama-3.1-8B at TP 1 stores 32 layers x 8 heads x 256 x 2 B = 131,072 B: 2.7x apart
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--kv-budget-from", QWEN_LOG)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert ("the log holds 178,880 tokens (line 2) in 8.11 GiB, 48,681 B per token per GPU; the stack's "
            "meta-llama/Meta-Llama-3.1-8B at tp 1 stores 131,072 (another model, TP size or KV dtype) "
            "(--accept-log-mismatch takes it anyway)") in err
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B", "--kv-budget-from", QWEN_LOG,
                             "--accept-log-mismatch", "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    assert any(n.startswith("--kv-budget-from log of another stack, taken (--accept-log-mismatch)") for n in d["notes"])


def test_a_tp_mismatch_is_refused():
    # vLLM issue 10517 ran TP 1: 2.89 GiB / (1,478 blocks x 16) = 131,221 B per token; at TP 2 the stack stores 65,536
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B -tp 2 --max-model-len 29000",
                             "--kv-budget-from", LLAMA_LOG)
    assert code == 2 and err.count("\n") == 1
    assert "1,478 blocks (line 3) in 2.89 GiB, 131,221 B per token per GPU; the stack's" in err and "at tp 2 stores 65,536" in err
    # the same model at the log's TP: taken (131,221 / 131,072 = +0.1 %)
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 29000",
                             "--kv-budget-from", LLAMA_LOG)
    assert code in (0, 1), err


def test_the_sglang_log_of_another_model_is_refused():
    # SGLang's K + V: 8.23 + 8.23 GB (GiB) for 367,404 tokens = 48,105 B per token
    code, out, err = run_cli("check", "--sglang", "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B",
                             "--kv-budget-from", str(LOGS / "sglang-21348-qwen3-235b-fp8-tp4.log"))
    assert code == 2 and "367,404 tokens (line 1) in 16.46 GiB, 48,105 B per token per GPU" in err
    code, out, err = run_cli("check", "--sglang", "python3 -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp 4",
                             "--kv-budget-from", str(LOGS / "sglang-21348-qwen3-235b-fp8-tp4.log"))
    assert code in (0, 1), err


def _config_log(tmp_path: Path) -> Path:
    # vLLM V1's engine line (v1/engine/core.py: "Initializing a V1 LLM engine (v%s) with config: %s"), as a public
    # 0.10.2 log prints it for Qwen3-235B-A22B-Instruct-2507-FP8 at TP 8 (shortened), and 21348's memory line
    p = tmp_path / "named.log"
    p.write_text("(EngineCore_DP0 pid=1944) INFO 09-24 20:45:58 [core.py:76] Initializing a V1 LLM engine (v0.10.2) with "
                 "config: model='Qwen/Qwen3-235B-A22B-Instruct-2507-FP8', speculative_config=None, tokenizer='Qwen/"
                 "Qwen3-235B-A22B-Instruct-2507-FP8', dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=8, "
                 "pipeline_parallel_size=1, data_parallel_size=1\nAvailable KV cache memory: 8.11 GiB\n")
    return p


def test_the_logged_model_and_tp_are_compared(tmp_path):
    log = _config_log(tmp_path)
    parsed = read_startup_log(log)
    assert parsed.model.text == "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8" and parsed.get("tp_size") == 8
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B -tp 8", "--kv-budget-from", str(log))
    assert code == 2 and ("the log's model is 'Qwen/Qwen3-235B-A22B-Instruct-2507-FP8' (line 1), the stack runs "
                          "meta-llama/Meta-Llama-3.1-8B") in err
    code, out, err = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 4", "--kv-budget-from", str(log))
    assert code == 2 and "the log's tensor_parallel_size is 8 (line 1), the stack's tp_size 4" in err
    # the FP8 instruct checkpoint of the stack's model at the log's TP: taken
    code, out, err = run_cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--kv-budget-from", str(log))
    assert code in (0, 1), err


def test_sglang_server_args_name_the_model_and_tp(tmp_path):
    # SGLang 0.5.23 logs server_args as a dict (entrypoints/engine.py:311), older releases as ServerArgs(...)
    for line in ("server_args={'model_path': 'Qwen/Qwen3-235B-A22B-FP8', 'attn_tp_size': 2, 'tp_size': 4}",
                 "server_args=ServerArgs(model_path='Qwen/Qwen3-235B-A22B-FP8', attn_tp_size=2, tp_size=4, dp_size=1)"):
        p = tmp_path / "s.log"
        p.write_text(line + "\nKV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB\n")
        log = read_startup_log(p)
        assert (log.model.text, log.get("tp_size")) == ("Qwen/Qwen3-235B-A22B-FP8", 4)


def test_a_v0_log_without_a_release_says_how_to_size_it_as_v0():
    # tester-4 #16: the 10517 V0 log (1,478 blocks) on a stack without --engine-version was sized as V1 (23,657
    # tokens) with no word why; the note names the logged blocks and the flag
    from conftest import REPO, run_cli
    log = REPO / "tests" / "fixtures" / "logs" / "vllm-10517-llama31-8b-rtx3090-29k.log"
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 29000",
                             "--gpu", "RTX-3090", "--count", "1", "--kv-budget-from", str(log))
    assert "the log is from vLLM's V0 engine (1,478 GPU blocks" in out and "--engine-version 0.6.4" in out
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 29000",
                             "--gpu", "RTX-3090", "--count", "1", "--kv-budget-from", str(log), "--engine-version", "0.6.4",
                             "--format", "json")
    import json
    d = json.loads(out)
    assert d["derived"]["kv_tokens_per_gpu"] == 23_648  # 1,478 blocks x 16 tokens, as the log says
