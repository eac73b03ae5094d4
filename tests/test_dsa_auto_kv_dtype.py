"""--kv-cache-dtype auto on a DeepSeek-sparse-attention model (newuser5 #12): FP8 on an SM10x GPU in both engines.

vLLM >= 0.32.0 model_executor/models/config.py GlmMoeDsaForCausalLM (0.34.0 :163-175): auto -> fp8_e4m3 when
is_device_capability_family(100); absent in 0.31.0. SGLang 0.5.23 arg_groups/overrides.py:490-548: DSA (index_topk)
on CUDA major >= 10 -> fp8_e4m3; 0.5.5 server_args.py:1061-1083 the same for DeepseekV3/V32 only. vLLM keeps auto for
DeepseekV32ForCausalLM (:81-92). Bytes/token: GLM-5 has 78 layers; an fp8 sparse-MLA cell is sized as fp8_ds_mla
(656 B) + the indexer's 128 uint8 + 4 B scale = 788 B/layer -> 61,464 B/token; bf16: (512 + 64) x 2 + 132 = 1,284 B
-> 100,152. DeepSeek-V3.2 (61 layers): 788 x 61 = 48,068 (fp8), 1,284 x 61 = 78,324 (bf16)."""
import pytest

from kg.engines import get
from kg.engines.dsa_kv import sglang_dsa_kv, vllm_dsa_kv
from kg.inputs.modelcfg import resolve_model
from cli_helpers import check_json, fired


@pytest.fixture(scope="module")
def glm5():
    return resolve_model("zai-org/GLM-5-FP8")


@pytest.fixture(scope="module")
def v32():
    return resolve_model("deepseek-ai/DeepSeek-V3.2")


def test_vllm_glm5_auto_kv_is_fp8_on_sm10x_from_0_32(glm5):
    assert vllm_dsa_kv(glm5, "0.32.0", 10.0)["dtype"] == "fp8_e4m3"
    assert vllm_dsa_kv(glm5, "0.34.0", 10.0)["checkpoint"] == "GlmMoeDsaForCausalLM on SM100"
    assert vllm_dsa_kv(glm5, "0.31.0", 10.0) is None       # not in 0.29.0-0.31.0
    assert vllm_dsa_kv(glm5, "0.34.0", 9.0) is None        # Hopper keeps bfloat16
    assert vllm_dsa_kv(glm5, "0.34.0", 12.0) is None       # SM120 is another family
    assert get("vllm").auto_kv_cache_dtype(glm5, "0.34.0", "bfloat16", 10.0) is None  # a dtype given stays


def test_vllm_keeps_auto_for_deepseek_v32(v32):
    assert vllm_dsa_kv(v32, "0.34.0", 10.0) is None


def test_sglang_dsa_auto_kv_is_fp8_e4m3_on_blackwell(glm5, v32):
    assert sglang_dsa_kv(v32, "0.5.23", 10.0)["dtype"] == "fp8_e4m3"
    assert sglang_dsa_kv(glm5, "0.5.23", 10.0)["dtype"] == "fp8_e4m3"
    assert sglang_dsa_kv(v32, "0.5.5", 10.0)["dtype"] == "fp8_e4m3"   # is_deepseek_nsa covers V3.2
    assert sglang_dsa_kv(glm5, "0.5.5", 10.0) is None                  # GLM-5 joins the list later (read: 0.5.23)
    assert sglang_dsa_kv(v32, "0.5.23", 9.0) is None                   # Hopper: bfloat16


def test_check_sizes_glm5_b200_with_fp8_kv():
    _, d = check_json("--vllm", "vllm serve zai-org/GLM-5-FP8 -tp 8", "--gpu", "B200", "--count", "8")
    dv = d["derived"]
    assert dv["kv_cache_dtype_auto_reason"] == "dsa" and dv["kv_bytes_per_token_per_gpu"] == 61_464
    assert "no-attention-backend-for-stack" not in fired(d)  # FLASHINFER_MLA_SPARSE (SM10x, fp8_e4m3)
    _, d = check_json("--vllm", "vllm serve zai-org/GLM-5-FP8 -tp 8", "--gpu", "H200", "--count", "8")
    assert d["derived"]["kv_bytes_per_token_per_gpu"] == 100_152


def test_check_sizes_sglang_v32_b200_with_fp8_kv():
    _, d = check_json("--sglang", "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3.2 --tp 8",
                      "--gpu", "B200", "--count", "8")
    assert d["derived"]["kv_bytes_per_token_per_gpu"] == 48_068
