"""vLLM --enable-lora allocates its adapter slots at start-up, out of the KV budget (newuser5 #14).

vLLM 0.34.0 lora/layers/base_linear.py:104-155: per linear and slice lora_a (max_loras, 1, rank, input) and lora_b
(max_loras, 1, output, rank); column-parallel input unsharded / output per rank, row-parallel input per rank / output
full. Llama-3.1-70B (h 8,192, 64 heads, 8 KV heads, head_dim 128, intermediate 28,672, 80 layers) at TP 4, rank 64:
qkv 3 x 64 x 8,192 + (2,048 + 256 + 256) x 64 = 1,736,704; o 64 x 2,048 + 8,192 x 64 = 655,360;
gate_up 2 x 64 x 8,192 + 2 x 7,168 x 64 = 1,966,080; down 64 x 7,168 + 8,192 x 64 = 983,040 -> 5,341,184 per layer per
slot; x 80 layers x 4 slots x 2 B = 3,418,357,760 B per GPU."""
from cli_helpers import check_json
from kg.derive.lora import vllm_lora_slot_bytes
from kg.inputs.modelcfg import resolve_model


def test_llama70b_tp4_four_rank64_slots_by_hand():
    m = resolve_model("meta-llama/Llama-3.1-70B")
    assert vllm_lora_slot_bytes(m, 4, 4, 64) == 3_418_357_760.0
    assert vllm_lora_slot_bytes(m, 4) == 3_418_357_760.0 / 4 / 4  # defaults: 1 slot of rank 16
    assert vllm_lora_slot_bytes(resolve_model("deepseek-ai/DeepSeek-V3"), 8) is None  # MoE / MLA: not sized


def test_check_takes_the_slots_from_the_kv_budget():
    cmd = "vllm serve meta-llama/Llama-3.1-70B -tp 4"
    _, base = check_json("--vllm", cmd, "--gpu", "H100", "--count", "4")
    _, lora = check_json("--vllm", cmd + " --enable-lora --max-loras 4 --max-lora-rank 64", "--gpu", "H100",
                         "--count", "4")
    drop = base["derived"]["kv_budget_bytes_per_gpu"] - lora["derived"]["kv_budget_bytes_per_gpu"]
    assert abs(drop - 3_418_357_760) < 1
