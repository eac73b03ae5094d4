"""DeepSpeed's mechanical startup checks over its JSON config, generated from deepspeed 0.19.8's source
(kg/frameworks/deepspeed/checks/, tools/deepspeed_generated_checks.py): they fire with DeepSpeed's own message and
path:line where DeepSpeed refuses the config, stay silent on DeepSpeed's own published configs, and leave what the
HF integration fills in ("auto") unevaluated."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kg.frameworks.deepspeed.generated import findings
from kg.frameworks.deepspeed.reader import parse_deepspeed_text
from kg.inputs.training import load_training_file

FIX = Path(__file__).parent / "fixtures" / "training_inputs"
OWN = sorted((FIX / "deepspeed-0.19.8").rglob("*.json"))
EXAMPLES = sorted((FIX / "deepspeed-examples").rglob("*.json"))
# DeepSpeedExamples configs that use features deepspeed 0.19.8 removed (runtime/config.py:61-117, refused at :136)
REMOVED = {"training/bing_bert/deepspeed_bsz4k_progressive_layer_drop_config_seq128.json": "progressive_layer_drop",
           "training/bing_bert/deepspeed_bsz64k_lamb_config_seq128.json": "sparse_attention"}


def _site(f: dict) -> tuple[str, int]:
    return f["path"].removeprefix("deepspeed/runtime/"), f["line"]


def _fired(config: dict, direct: bool = True, **settings) -> dict[tuple[str, int], dict]:
    job = parse_deepspeed_text(json.dumps(config))
    job.configs["deepspeed_direct"] = direct
    for k, v in settings.items():
        job.set(k, v, "test")
    return {_site(f): f for f in findings(job)}


@pytest.mark.parametrize("path", OWN + EXAMPLES, ids=lambda p: str(p.relative_to(FIX)))
def test_deepspeeds_own_and_example_configs_raise_nothing_but_removed_features(path):
    job = load_training_file(path, None, None)
    got = {_site(f): f for f in findings(job)}
    removed = REMOVED.get(str(path.relative_to(FIX / "deepspeed-examples"))) if path in EXAMPLES else None
    if removed:
        assert set(got) == {("config.py", 136)}, got
        assert got[("config.py", 136)]["values"] == f"has__ds__{removed} = True"
    else:
        assert got == {}, got


@pytest.mark.parametrize("config,site,values", [
    ({"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True}, "bf16": {"enabled": True}},
     ("config.py", 511), "ds__bf16 = {'enabled': True}, ds__bf16__enabled = True, ds__bfloat16__enabled = False, "
                         "ds__fp16__enabled = True"),
    ({"train_micro_batch_size_per_gpu": 1, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}},
     ("config.py", 696), "ds__gradient_allreduce_op = 'sum', ds__zero_optimization__stage = 3"),
    ({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True, "bf16_optimizer_states": True},
      "zero_optimization": {"stage": 2}}, ("config.py", 714), None),
    ({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "compute_grad_norm": False}},
     ("zero/config.py", 392), "ds__zero_optimization__compute_grad_norm = False, ds__zero_optimization__stage = 3"),
    ({"train_micro_batch_size_per_gpu": 1,
      "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}},
     ("zero/config.py", 399), None),
    # the ZeRO-1/2 optimizer's constructor (engine.py:2667 builds it): reduce-scatter (on by default) with gradients
    # partitioned (stage 2) refuses a pre-divide factor and pre-scaling (stage_1_and_2.py:350-351)
    ({"train_micro_batch_size_per_gpu": 1, "gradient_predivide_factor": 2.0, "zero_optimization": {"stage": 2}},
     ("zero/stage_1_and_2.py", 350), None),
    ({"train_micro_batch_size_per_gpu": 1, "prescale_gradients": True, "zero_optimization": {"stage": 2}},
     ("zero/stage_1_and_2.py", 351), None),
    ({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1, "legacy_stage1": True}},
     ("engine.py", 2651), None),
    # the ZeRO-3 optimizer's constructor (engine.py:2751 builds it when the job has an optimizer): reduce-scatter (on
    # by default) refuses a pre-divide factor and pre-scaling (stage3.py:395-396), and quantized gradients (an
    # all-to-all group, engine.py:2159-2161) need reduce-scatter (stage3.py:390)
    ({"train_micro_batch_size_per_gpu": 1, "gradient_predivide_factor": 2.0, "zero_optimization": {"stage": 3}},
     ("zero/stage3.py", 395), None),
    ({"train_micro_batch_size_per_gpu": 1, "prescale_gradients": True, "zero_optimization": {"stage": 3}},
     ("zero/stage3.py", 396), None),
    ({"train_micro_batch_size_per_gpu": 1,
      "zero_optimization": {"stage": 3, "zero_quantized_gradients": True, "reduce_scatter": False}},
     ("zero/stage3.py", 390), None),
])
def test_mechanical_config_checks_fire_where_deepspeed_refuses(config, site, values):
    got = _fired(config)
    assert site in got, sorted(got)
    if values:
        assert got[site]["values"] == values
    assert got[site]["url"] == f"https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/{site[0]}" \
        f"#L{site[1]}"


def test_zero_optimizer_checks_hold_where_deepspeed_accepts_the_config():
    # stage 1 does not partition gradients: pre-scaling passes there; stage 2 without reduce-scatter passes too
    assert _fired({"train_micro_batch_size_per_gpu": 1, "prescale_gradients": True, "zero_optimization": {"stage": 1}}) == {}
    assert _fired({"train_micro_batch_size_per_gpu": 1, "prescale_gradients": True,
                   "zero_optimization": {"stage": 2, "reduce_scatter": False}}) == {}
    # ZeRO-3: without reduce-scatter neither is checked; quantized gradients with reduce-scatter (the default) pass
    assert _fired({"train_micro_batch_size_per_gpu": 1, "prescale_gradients": True, "gradient_predivide_factor": 2.0,
                   "zero_optimization": {"stage": 3, "reduce_scatter": False}}) == {}
    assert _fired({"train_micro_batch_size_per_gpu": 1,
                   "zero_optimization": {"stage": 3, "zero_quantized_gradients": True}}) == {}


def test_batch_checks_need_the_data_parallel_size_and_a_config_deepspeed_reads_itself():
    # DeepSpeed's autotuning templates have no batch keys: the integration (accelerate, the HF Trainer) fills them
    tmpl = json.loads((FIX / "deepspeed-0.19.8/deepspeed/autotuning/config_templates/template_zero2.json").read_text())
    assert _fired(tmpl, direct=False) == {}
    # handed to deepspeed.initialize by the launched script, a config without them is refused (config.py:649; the
    # asserts on the same missing values after it, :683 and :686, are reported with it)
    assert set(_fired(tmpl, world_size=8)) == {("config.py", 649), ("config.py", 683), ("config.py", 686)}
    cfg = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}}
    assert _fired(cfg) == {}  # how many GPUs is not in the config: the batch arithmetic is not evaluated
    # on 8 GPUs DeepSpeed derives gradient_accumulation_steps = 16 // 4 // 8 = 0 and asserts it (config.py:686)
    assert ("config.py", 686) in _fired(cfg, world_size=8)
    assert _fired(cfg, world_size=4) == {}


def test_values_the_hf_integration_fills_in_are_not_evaluated():
    job = load_training_file(FIX / "llama-factory/examples/deepspeed/ds_z3_config.json", None, None)
    assert findings(job) == []
    auto = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
            "bf16": {"enabled": "auto"}, "fp16": {"enabled": True}}
    assert _fired(auto) == {}
