"""Tester findings on training reports: DeepSpeed `pipeline.stages`, the GPUs in the header for every
--gpu/--count combination, and the stack keys `config:` / `config_file:` naming the one to write."""
import json

import pytest


from report_text import cli  # noqa: E402,F401  (the CLI with the report's wrapping undone)


DS = {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 16,
      "zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}
LLAMA8 = ("--model", "meta-llama/Llama-3.1-8B")


def _ds(tmp_path, pipeline):
    p = tmp_path / "ds_config.json"
    p.write_text(json.dumps({**DS, "pipeline": pipeline}, indent=2))
    return str(p)


def test_pipeline_stages_is_the_pipeline_size(cli, tmp_path):
    # 16 GPUs / PP 4 = DP 4: 4 x 16 x 4 = 256 = train_batch_size, so no batch mismatch (with PP 1 it was 1,024)
    code, out, err = cli("check", _ds(tmp_path, {"stages": 4}), *LLAMA8, "--count", "16", "--gpu", "H100",
                         "--format", "json", "--explain")
    d = json.loads(out)
    assert code == 1, err
    assert d["derived"]["parallel"] == {"tp_size": 1, "pp_size": 4, "cp_size": 1, "ep_size": 1, "dp_size": 4,
                                        "world_size": 16}
    # + the bubble: m = 256 / (micro 4 x DP 4) = 16 micro-batches per step, (4 - 1)/16 = 18.75 %
    assert [f["rule_id"] for f in d["findings"]] == ["deepspeed-zero-with-pipeline-engine", "training-pipeline-bubble"]
    assert d["findings"][1]["numbers"]["bubble"] == 0.1875
    f = d["findings"][0]
    assert f["techniques"] == ["zero-2", "pipeline-parallelism"]  # a stage-2 config: no zero-3-fsdp
    assert f["coupling"] == "zero-2/conflicts_with/pipeline-parallelism"
    assert "pp_size 1" not in f["message"]
    assert any("runtime/pipe/module.py:173" in n and "pipeline.stages" in n for n in d["notes"])
    held = {x["rule"] for x in d["not_fired"] if x["outcome"] == "held"}
    assert "deepspeed-batch-size-mismatch" in held


def test_pipeline_stages_auto_leaves_pp_unknown(cli, tmp_path):
    code, out, _ = cli("check", _ds(tmp_path, {"stages": "auto"}), *LLAMA8, "--count", "16", "--gpu", "H100",
                       "--format", "json")
    d = json.loads(out)
    assert d["schema_version"] == "1.3"  # 1.2: pp_size/dp_size may be null; 1.3: speed
    assert d["derived"]["parallel"]["pp_size"] is None and d["derived"]["parallel"]["dp_size"] is None
    assert [f["rule_id"] for f in d["findings"]] == ["deepspeed-zero-with-pipeline-engine"]
    assert d["findings"][0]["techniques"] == ["zero-2", "pipeline-parallelism"]
    missing = {u["rule_id"]: u["missing"] for u in d["not_evaluable"]}
    assert missing["deepspeed-batch-size-mismatch"] == ["derived_global_batch_size", "dp_size"]
    # "ZeRO-2 requires DP, which the stack does not use" must not fire while DP is unknown
    assert missing["coupling-zero-2-requires-data-parallelism"] == ["dp_size"]
    assert "memory" not in d["derived"]
    _, text, _ = cli("check", _ds(tmp_path, {}), *LLAMA8, "--count", "16", "--gpu", "H100")
    assert "TP 1 x PP ? x CP 1 x DP ? (of 16 GPUs; pipeline size unknown)" in text
    assert "micro 4 x grad-accum 16 x DP ? = global 256 sequences" in text


def test_pipeline_stages_must_be_a_positive_integer(cli, tmp_path):
    for bad in (0, "four", True):
        code, _, err = cli("check", _ds(tmp_path, {"stages": bad}), *LLAMA8)
        assert code == 2 and err.count("\n") == 1, err
        assert "ds_config.json:" in err and "pipeline.stages must be a positive integer or \"auto\"" in err


def test_command_pipeline_size_wins_over_pipeline_stages(cli, tmp_path):
    cfg = _ds(tmp_path, {"stages": 4})
    cmd = (f"deepspeed --num_gpus 8 --num_nodes 2 pretrain_gpt.py --pipeline-model-parallel-size 2 "
           f"--deepspeed_config {cfg}")
    _, out, _ = cli("check", "--train", cmd, *LLAMA8, "--format", "json")
    d = json.loads(out)
    assert d["derived"]["parallel"]["pp_size"] == 2 and d["derived"]["parallel"]["dp_size"] == 8
    assert any("4 differs from the command's pipeline size 2" in n for n in d["notes"])


JOB = ("{launcher} pretrain_gpt.py --tensor-model-parallel-size 8 --micro-batch-size 1 --global-batch-size 8 "
       "--seq-length 4096 --bf16")


@pytest.mark.parametrize("launcher,extra,header", [
    ("torchrun --nproc_per_node 8", (), "GPUs: 8 GPUs (GPU model not given)"),
    ("torchrun --nproc_per_node 8", ("--gpu", "H100"), "GPUs: 8 x H100-SXM"),
    ("torchrun --nproc_per_node 8", ("--count", "16"), "GPUs: 16 GPUs (GPU model not given)"),
    ("torchrun --nproc_per_node 8", ("--gpu", "H100", "--count", "16"), "GPUs: 16 x H100-SXM"),
    ("python", (), "GPUs: not given (the layout uses 8)"),
    ("python", ("--gpu", "H100"), "GPUs: H100-SXM, count not given (the layout uses 8)"),
    ("python", ("--count", "1"), "GPUs: 1 GPU (GPU model not given)"),
])
def test_header_names_the_gpus(cli, launcher, extra, header):
    _, out, _ = cli("check", "--train", JOB.format(launcher=launcher), *LLAMA8, *extra)
    assert out.splitlines()[1].endswith(header), out.splitlines()[1]
    assert "not given x" not in out


def test_markdown_header_without_gpu_model(cli):
    # global 9 is not divisible by micro 2 x DP 1: a finding, so markdown prints its header
    _, md, _ = cli("check", "--train", JOB.format(launcher="python").replace("--global-batch-size 8", "--global-batch-size 9")
                   .replace("--micro-batch-size 1", "--micro-batch-size 2"), *LLAMA8, "--format", "markdown")
    assert "framework `megatron`, GPUs: not given (the layout uses 8)" in md, md


def test_stack_config_key_names_config_file(cli, tmp_path):
    (tmp_path / "ds_config.json").write_text(json.dumps(DS))
    st = tmp_path / "job.yaml"
    st.write_text("framework: deepspeed\nmodel: meta-llama/Llama-3.1-8B\nconfig: ds_config.json\n")
    code, _, err = cli("check", str(st))
    assert code == 2 and err.count("\n") == 1
    assert "job.yaml:3: config: ds_config.json is a DeepSpeed config, not the model's config.json; write it as " \
           "`config_file: ds_config.json`" in err
    st.write_text("framework: deepspeed\nmodel: meta-llama/Llama-3.1-8B\nconfig_file: ds_config.json\n")
    code, out, err = cli("check", str(st))
    assert code == 1 and "(ZeRO-2)" in out and "256 != 4 x 16 x 1 = 64" in out, err


def test_stack_config_file_key_names_config(cli, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                                      "hidden_size": 4096, "num_attention_heads": 32,
                                                      "num_hidden_layers": 32, "vocab_size": 128256}))
    st = tmp_path / "job.yaml"
    st.write_text("framework: deepspeed\nconfig_file: config.json\n")
    code, _, err = cli("check", str(st))
    assert code == 2 and err.count("\n") == 1
    assert "job.yaml:2: config_file: config.json is a model's config.json, not a training config; write it as " \
           "`config: config.json`" in err


TRL_FSDP = ("torchrun --nproc_per_node 8 sft.py --model_name_or_path meta-llama/Llama-3.1-8B "
            "--fsdp 'full_shard auto_wrap' {extra}--use_peft --lora_r 16 --bf16 True")
FROZEN = "fsdp-frozen-params-without-use-orig-params"


def test_trainer_fsdp_flags_keep_the_trainers_use_orig_params_default(cli, tmp_path, monkeypatch):
    # HF Trainer / TRL --fsdp: TrainingArguments passes use_orig_params "true" unless --fsdp_config says otherwise
    # (transformers 5.24.0 training_args.py:2876-2877); accelerate's FSDP1 default (false) is for its own config file
    _, out, _ = cli("check", "--train", TRL_FSDP.format(extra=""), "--format", "json", "--explain")
    d = json.loads(out)
    assert d["stack"]["settings"]["use_orig_params"] is True and FROZEN not in {f["rule_id"] for f in d["findings"]}
    assert {x["rule"]: x["outcome"] for x in d["not_fired"]}[FROZEN] == "held"
    # use_orig_params false from --fsdp_config: TRL's sft.py runs the HF Trainer, which sets peft's
    # fsdp_auto_wrap_policy for a PEFT model (transformers 5.24.0 distributed/fsdp.py:279): adapters get their own
    # units, so it still holds
    (tmp_path / "fc.json").write_text('{"use_orig_params": false}')
    monkeypatch.chdir(tmp_path)
    _, out, _ = cli("check", "--train", TRL_FSDP.format(extra="--fsdp_config fc.json "), "--format", "json",
                    "--explain")
    d = json.loads(out)
    assert d["stack"]["settings"]["use_orig_params"] is False and FROZEN not in {f["rule_id"] for f in d["findings"]}
    assert {x["rule"]: x["outcome"] for x in d["not_fired"]}[FROZEN] == "held"


QLORA_FSDP = ("accelerate launch --config_file peft_fsdp_config_qlora.yaml train.py --seed 100 "
              "--model_name_or_path meta-llama/Llama-3.1-70B --max_length 2048 --bf16 True --packing True "
              "--per_device_train_batch_size 2 --gradient_accumulation_steps 2 --gradient_checkpointing True "
              "--use_reentrant True --use_peft_lora True --lora_r 8 --lora_alpha 16 --use_4bit_quantization True "
              "--use_nested_quant True --bnb_4bit_compute_dtype bfloat16 --bnb_4bit_quant_storage_dtype bfloat16")


def test_frozen_params_under_fsdp1_is_a_warning_naming_the_wrap_policy_the_script_sets(cli, monkeypatch):
    # peft's own QLoRA FSDP example (examples/sft/run_peft_qlora_fsdp.sh @1715e06, its accelerate config has
    # fsdp_use_orig_params: false) starts: its train.py runs SFTTrainer, which wraps every trainable layer in its own
    # unit. optkg cannot see train.py's code, so it warns (peft#1702 failed with the same launch on older releases)
    # and names the wrap policy; as `sft.py` (TRL's own script, a known Trainer) the same launch holds.
    from pathlib import Path
    monkeypatch.chdir(Path(__file__).parent / "fixtures" / "training_reports")
    _, out, _ = cli("check", "--train", QLORA_FSDP, "--format", "json", "--explain")
    d = json.loads(out)
    f = {x["rule_id"]: x for x in d["findings"]}[FROZEN]
    assert f["severity"] == "warning"
    assert "auto-wrap policy, which the script sets in" in f["message"] and "fsdp_auto_wrap_policy" in f["message"]
    _, out, _ = cli("check", "--train", QLORA_FSDP.replace(" train.py ", " sft.py "), "--format", "json", "--explain")
    d = json.loads(out)
    assert FROZEN not in {x["rule_id"] for x in d["findings"]}
    assert {x["rule"]: x["outcome"] for x in d["not_fired"]}[FROZEN] == "held"
