"""MTP draft layers load beside the target's and cost memory (newuser5 #9).

vLLM 0.34.0 deepseek_mtp.py:148-159 builds layers num_hidden_layers .. + num_nextn_predict_layers for the drafter
(deepseek_v2.py:1650-1651 skips them for the target), each with eh_proj (2h x h, :84). DeepSeek-V3 (h 7,168, MLA
q_lora 1,536, kv_lora 512, 128 heads x (128 nope + 64 rope), v 128; 256 experts of 2,048 + 1 shared; FP8 128x128
blocks = 1 + 4/16,384 B per linear weight, router and eh_proj 2 B), one MTP layer:
attention 48,758,784 + 20,905,984 + 117,440,512 = 187,105,280; experts 256 x 3 x 7,168 x 2,048 = 11,274,289,152;
shared 44,040,192; router 1,835,008; eh_proj 102,760,448 -> 11,610,030,080 parameters;
bytes 11,505,434,624 x 1.000244140625 + 1,835,008 x 2 + 102,760,448 x 2 = 11,717,434,480, / TP 8 = 1,464,679,310."""
from cli_helpers import check_json
from kg.derive.drafts import mtp_weights
from kg.inputs.modelcfg import resolve_model


def test_deepseek_v3_mtp_layer_weights_by_hand():
    assert mtp_weights(resolve_model("deepseek-ai/DeepSeek-V3"), 1, 8) == (11_610_030_080, 1_464_679_310.0)


def test_check_budget_subtracts_the_mtp_layer():
    spec = '{"method":"deepseek_mtp","num_speculative_tokens":2}'
    _, d = check_json("--vllm", f"vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --speculative-config '{spec}'",
                      "--gpu", "H200", "--count", "8")
    assert d["derived"]["draft_weight_bytes_per_gpu_estimate"] == 1_464_679_310
