"""Two false alarms of issue 27 stay fixed: an FP8 (e5m2) KV cache on an A100 is not said to need compute capability
8.9 (it runs, stored in FP8 and dequantised: the generated backend table lists FLASHINFER and TRITON_ATTN for it), and
DeepSeek-V4-Pro's routed experts are sized at FP4 (config.json expert_dtype), not FP8."""
from __future__ import annotations

import json

from conftest import run_cli


def _check(*argv: str) -> dict:
    code, out, err = run_cli("check", *argv, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def test_fp8_e5m2_kv_cache_on_an_a100_is_not_an_error_or_warning():
    d = _check("--vllm", "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype fp8_e5m2", "--gpu", "A100-80GB",
               "--engine-version", "0.34.0")
    assert not [f for f in d["findings"] if f["severity"] in ("error", "warning")
                and "compute_capability" in json.dumps(f.get("facts", {})) + f["message"]]
    # the coupling is an effect (latency), listed as in effect, not a requirement
    assert any(e["coupling"] == "kv-cache-quantization/causes/request_latency" for e in d["in_effect"])
    from kg import load_catalog, stack_from_command
    from kg.analyses.check import stack_facts
    st = stack_from_command("vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype fp8_e5m2", load_catalog(), engine="vllm")
    st.engine_version = "0.34.0"
    st.hardware = load_catalog().resolve_hardware("A100-80GB")
    assert stack_facts(st)[1]["attention_backend_candidates"] == ["FLASHINFER", "TRITON_ATTN"]


def test_deepseek_v4_pro_experts_are_sized_at_fp4():
    d = _check("--vllm", "vllm serve deepseek-ai/DeepSeek-V4-Pro -tp 8", "--gpu", "H200", "--engine-version", "0.34.0")
    per_gpu = d["derived"]["weight_bytes_per_gpu_estimate"] / 2**30
    assert round(per_gpu, 2) == 108.99  # was 187.85 with FP8 experts; the engine logged about 117 GiB
    assert "experts fp4" in d["derived"]["weight_quant_source"]
