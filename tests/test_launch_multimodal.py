"""Multimodal configs (issue 15): the language model from text_config / llm_config, the vision tower from
vision_config, and vision heads vs TP where vLLM shards the tower (vllm 0.33.0 qwen2_5_vl.py:374, siglip.py:377,
clip.py:402: divide(num_heads, tp_size) asserts; --mm-encoder-tp-mode data avoids it, vision.py:141-156).
Config: rules/fixtures/configs/qwen2.5-vl-7b-instruct.json (source in rules/fixtures/configs/SOURCES.md)."""
import json

from conftest import REPO

from kg.inputs.modelcfg import load_config_file, parse_config
from kg.inputs.vision import vision_facts

QWEN_VL = REPO / "rules/fixtures/configs/qwen2.5-vl-7b-instruct.json"


def test_qwen25_vl_language_and_vision():
    m = load_config_file(QWEN_VL)
    assert (m.num_attention_heads, m.num_key_value_heads, m.num_hidden_layers, m.head_dim) == (28, 4, 28, 128)
    assert (m.vision_model_type, m.vision_num_attention_heads, m.vision_hidden_size, m.vision_num_hidden_layers) == \
        ("qwen2_5_vl", 16, 1280, 32)
    assert m.vision_tp_split is True


def test_llm_config_and_tower_names():
    # InternVL keeps the language model under llm_config and InternViT under vision_config (OpenGVLab configs);
    # InternViT is not in the split list: vLLM falls back to data parallel itself (intern_vit.py:146)
    cfg = {"model_type": "internvl_chat",
           "llm_config": {"model_type": "qwen2", "num_attention_heads": 40, "num_key_value_heads": 8,
                          "hidden_size": 5120, "num_hidden_layers": 64, "torch_dtype": "bfloat16"},
           "vision_config": {"model_type": "intern_vit_6b", "num_attention_heads": 25, "hidden_size": 3200,
                             "num_hidden_layers": 45}}
    m = parse_config(cfg, "internvl")
    assert (m.num_attention_heads, m.num_hidden_layers) == (40, 64)
    assert m.vision_num_attention_heads == 25 and m.vision_tp_split is False
    # SigLIP (Gemma-3) and CLIP (LLaVA) towers use num_attention_heads / num_hidden_layers
    assert vision_facts({"vision_config": {"model_type": "siglip_vision_model", "num_attention_heads": 16,
                                           "hidden_size": 1152, "num_hidden_layers": 27}})["vision_tp_split"] is True
    assert vision_facts({"model_type": "qwen2_5_vl"}) == {}


def test_vision_heads_rule_end_to_end(cli):
    def run(*extra):
        code, out, err = cli("check", "--cmd", f"vllm serve {QWEN_VL} -tp 8 {' '.join(extra)}", "--engine-version",
                             "0.33.0", "--format", "json", "--fail-on", "never")
        assert code == 0, err
        return {f["rule_id"]: f for f in json.loads(out)["findings"]}
    # 16 vision heads at TP 8 divide: no vision finding (the LM's 28 heads at TP 8 do not: that rule fires)
    f = run()
    assert "vision-heads-not-divisible-by-tp" not in f and "heads-not-divisible-by-tp" in f
    code, out, _ = cli("check", "--cmd", f"vllm serve {QWEN_VL} -tp 32", "--engine-version", "0.33.0",
                       "--format", "json", "--fail-on", "never")
    f = {x["rule_id"]: x for x in json.loads(out)["findings"]}
    assert f["vision-heads-not-divisible-by-tp"]["numbers"]["valid_tp_sizes_for_vision"] == [1, 2, 4, 8, 16]
    code, out, _ = cli("check", "--cmd", f"vllm serve {QWEN_VL} -tp 32 --mm-encoder-tp-mode data",
                       "--engine-version", "0.33.0", "--format", "json", "--fail-on", "never")
    assert "vision-heads-not-divisible-by-tp" not in {x["rule_id"] for x in json.loads(out)["findings"]}
