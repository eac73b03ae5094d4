"""A ModelOpt NVFP4 checkpoint is not FP8 (newuser5 #16): nvidia/Qwen3-235B-A22B-NVFP4 (hf_quant_config.json
quant_algo NVFP4) on an A100 got the FP8 W8A16 warning; vLLM 0.34.0 runs it as FP4 Marlin W4A16 below Blackwell
(ModelOptNvFp4Config min capability 75, modelopt.py:795-796; CUTLASS FP4 needs SM100/SM120)."""
from cli_helpers import check_json, fired

CMD = "vllm serve nvidia/Qwen3-235B-A22B-NVFP4 -tp 4"


def test_nvfp4_on_ampere_gets_the_fp4_marlin_warning_not_the_fp8_one():
    _, d = check_json("--vllm", CMD, "--gpu", "A100-80GB", "--count", "4")
    f = fired(d)
    assert "fp8-weights-without-fp8-hardware" not in f
    assert f["nvfp4-weights-without-fp4-hardware"]["severity"] == "warning"


def test_nvfp4_on_blackwell_gets_no_fp4_warning():
    _, d = check_json("--vllm", CMD, "--gpu", "B200", "--count", "4")
    assert "nvfp4-weights-without-fp4-hardware" not in fired(d)
