"""The quantisation method vLLM's ModelConfig settles on (kg.analyses.quantclass, read at 0.33.0 / 0.34.0
config/model.py _verify_quantization) and what its class declares per release (catalog/support/
vllm-quantization-capability.yaml: VllmConfig._get_quantization_config's minimum capability and activation dtypes)."""
from __future__ import annotations

import pytest

from kg.analyses.quantclass import resolved_method
from kg.knowledge.support import support_facts

ONLINE = ["fp8_per_tensor", "online"]
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128}


@pytest.mark.parametrize("explicit, qcfg, model_type, want", [
    (None, AWQ, "qwen2", "auto_awq"),  # AutoAWQConfig.override_quantization_method (auto_awq.py:265-287)
    ("awq_marlin", AWQ, "qwen2", "auto_awq"),  # a name it accepts: the override's name replaces it
    ("gptq", AWQ, "qwen2", None),  # no override claims it: "does not match" (model.py:1476) is refused first
    (None, {"quant_method": "GPTQ"}, "llama", "auto_gptq"),  # lower-cased first (model_arch_config_convertor.py:274)
    ("awq", {"quant_method": "mxfp4"}, "gpt_oss", "gpt_oss_mxfp4"),  # mxfp4.py:130-147 ignores --quantization
    (None, {"quant_method": "mxfp4"}, "llama", "mxfp4"),
    (None, {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}}, "llama", "modelopt_fp4"),
    (None, {"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}, "llama", "modelopt"),
    (None, {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "W4A8_AWQ"}}, "llama", None),
    (None, {"quant_method": "fp8"}, "deepseek_v4", None),  # DeepseekV4FP8Config: not in the table
    (None, {"quant_method": "auto-round"}, "llama", "inc"),
    ("moe_wna16", {"quant_method": "gptq"}, "qwen3_moe", None),  # claims by bits and GPU: not told
    ("fp8", None, "llama", "fp8"),  # online FP8 (weight_utils.py:380-387 at 0.34.0)
    ("fp8_per_tensor", None, "llama", "fp8_per_tensor"),
    ("awq", None, "llama", None),  # reads the method's own config file first
])
def test_the_method_vllm_settles_on(explicit, qcfg, model_type, want):
    assert resolved_method(explicit, qcfg, model_type, ONLINE) == want


def test_the_release_table_gives_each_method_its_class_minimum_and_dtypes():
    f = support_facts("vllm", "0.34.0", {"architecture": None})
    assert f["quant_method_min_capability"]["gpt_oss_mxfp4"] == 8.0  # mxfp4.py:72-73, inherited
    assert f["quant_method_act_dtypes"]["gpt_oss_mxfp4"] == ["bfloat16"]  # mxfp4.py:80-81
    assert f["quant_method_min_capability"]["awq_marlin"] == 7.5  # method_to_config: AutoAWQConfig
    assert f["quant_method_act_dtypes"]["compressed-tensors"] == ["float32", "float16", "bfloat16"]
    assert "w4afp8" in f["quant_method_min_capability"]
    assert "lut_b_moe" in f["quant_online_methods"] and "mxfp4" not in f["quant_online_methods"]
    old = support_facts("vllm", "0.33.0", {"architecture": None})
    assert old["quant_method_min_capability"]["fp_quant"] == 10.0 and "w4afp8" not in old["quant_method_min_capability"]


def _spec_lines(cmd: str, release: str, catalog, gpu: str = "H100-SXM") -> list[int]:
    import kg
    from kg.analyses.check import stack_facts
    from kg.analyses.enginechecks import generated_refusals
    st = kg.stack_from_command(cmd, catalog)
    st.engine_version = release
    st.hardware, st.gpu_count = catalog.resolve_hardware(gpu), 1
    got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)["engine_check_refusals"]
    return [r["line"] for r in got if r["path"] == "vllm/config/speculative.py"]


@pytest.mark.parametrize("rates, refused", [("[0.9, 0.8, 0.8]", False), ("[0.8, 0.9, 0.5]", True)])
def test_synthetic_acceptance_rates_that_rise_are_refused_pair_by_pair(rates, refused, catalog):
    """speculative.py:671 (0.34.0; :623 at 0.33.0): any(rates[i] > rates[i - 1] for i in range(1, n)) after :662
    made len(rates) == n, read as the pairs of the list (tools/vllm_pairs.py)."""
    cmd = ("vllm serve meta-llama/Llama-3.1-8B --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\""
           f": 3, \"prompt_lookup_max\": 4, \"rejection_sample_method\": \"synthetic\", \"synthetic_acceptance_rates\""
           f": {rates}}}'")
    for release, line in (("0.34.0", 671), ("0.33.0", 623)):
        assert (line in _spec_lines(cmd, release, catalog)) is refused, release


@pytest.mark.parametrize("change, lines", [
    ({}, {}),
    ({"target_layer_ids": [1, 23, 12, 34, 45]}, {"0.34.0": 324, "0.33.0": 282}),  # out of order
    ({"target_layer_ids": [1, 12, 12, 34, 45]}, {"0.34.0": 324, "0.33.0": 282}),  # repeated
    ({"num_key_value_heads": 8}, {"0.34.0": 299, "0.33.0": 257}),  # not the thinker's 4
])
def test_dspark_draft_layer_ids_and_attention_shape_are_read_from_its_config_json(change, lines, catalog, tmp_path):
    """speculative.py:322-325 (0.34.0; :281-284 at 0.33.0): list(ids) != sorted(set(ids)), read as a pair that does
    not ascend; :268-301 (:226-259): the loop over the target's / draft's attention-shape dicts, walked once per key
    (tools/vllm_pairs.py), on the draft's own config.json (tools/vllm_draft_walk.py)."""
    import json
    from pathlib import Path
    here = Path(__file__).resolve().parent / "fixtures" / "model_configs"
    cfg = json.loads((here / "qwen3-omni-dspark-draft" / "config.json").read_text())
    cfg.update(change)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    cmd = (f"vllm serve {here / 'qwen3-omni-30b-a3b'} --speculative-config '{{\"method\": \"dspark\", \"model\": "
           f"\"{tmp_path}\", \"num_speculative_tokens\": 7}}'")
    for release in ("0.34.0", "0.33.0"):
        assert _spec_lines(cmd, release, catalog) == ([lines[release]] if lines else []), release
