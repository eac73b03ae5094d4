"""Training inputs in the forms people run: Megatron argv, DeepSpeed JSON + launcher, accelerate/HF flags,
torchtitan TOML, verl overrides, stack YAML (framework + training settings)."""
import json

import pytest

from kg.core.errors import OptkgError
from kg.inputs.modelcfg import resolve_model
from kg.inputs.training import detect_command, load_training_file, parse_training_command
from kg.frameworks.deepspeed.reader import parse_deepspeed_text
from kg.frameworks.torchtitan.reader import parse_torchtitan_toml

MEGATRON = ("GPUS_PER_NODE=8 torchrun --nproc_per_node $GPUS_PER_NODE --nnodes 4 pretrain_gpt.py \\\n"
            " --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 4 \\\n"
            " --sequence-parallel --context-parallel-size 2 --expert-model-parallel-size 1 --use-distributed-optimizer \\\n"
            " --recompute-granularity selective --fp8-format hybrid --bf16 --micro-batch-size 2 --global-batch-size 64 \\\n"
            " --seq-length 8192 --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --lr 1e-4")


def test_megatron_argv():
    job = parse_training_command(MEGATRON.replace("$GPUS_PER_NODE", "8"), model=resolve_model("meta-llama/Llama-3.1-8B"))
    assert job.framework == "megatron"
    s = job.settings
    assert (s["tp_size"], s["pp_size"], s["cp_size"], s["layers_per_virtual_stage"]) == (4, 2, 2, 4)
    assert s["vpp_size"] == (32 // 2) // 4 == 4
    assert s["sequence_parallel"] and s["distributed_optimizer"] and s["fp8"] and s["fp8_format"] == "hybrid"
    assert (s["recompute_granularity"], s["params_dtype"], s["micro_batch_size"], s["global_batch_size"], s["seq_length"]) \
        == ("selective", "bf16", 2, 64, 8192)
    assert job.parallel() == {"tp_size": 4, "pp_size": 2, "cp_size": 2, "ep_size": 1, "dp_size": 2, "world_size": 32}
    assert job.ignored == ["--lr"]
    # Megatron's own shape flags win over the HF config; the rest comes from the config
    sh = job.shape()
    assert (sh["num_layers"], sh["num_query_groups"], sh["ffn_hidden_size"], sh["vocab_size"]) == (32, 8, 14336, 128256)


def test_megatron_bad_value_names_the_flag():
    with pytest.raises(OptkgError, match=r"--train: --tensor-model-parallel-size: tp_size must be an integer, found 'eight'"):
        parse_training_command("torchrun pretrain_gpt.py --tensor-model-parallel-size eight", where="--train")
    with pytest.raises(OptkgError, match="--recompute-granularity must be one of full, selective"):
        parse_training_command("torchrun pretrain_gpt.py --recompute-granularity sometimes")


def test_deepspeed_json_and_errors_with_line():
    job = parse_deepspeed_text(json.dumps({
        "train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": "auto",
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "nvme"}},
        "bf16": {"enabled": True}, "optimizer": {"type": "AdamW"}}, indent=1), "ds.json")
    assert job.settings == {"global_batch_size": 64, "micro_batch_size": 2, "zero_stage": 3, "offload_optimizer": "cpu",
                            "offload_param": "nvme", "params_dtype": "bf16", "optimizer": "adamw", "optimizer_source": "config"}
    with pytest.raises(OptkgError, match=r"ds.json:3: zero_optimization.stage must be 0, 1, 2 or 3, found 4"):
        parse_deepspeed_text('{\n "zero_optimization": {\n  "stage": 4}}', "ds.json")


def test_deepspeed_launcher_reads_the_config(tmp_path):
    (tmp_path / "ds.json").write_text('{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1}}')
    job = parse_training_command("deepspeed --num_gpus 8 --num_nodes 2 train.py --deepspeed ds.json --per_device_train_batch_size 4",
                                 base_dir=tmp_path)
    assert job.framework == "deepspeed" and job.parallel()["world_size"] == 16
    assert job.settings["zero_stage"] == 1 and job.settings["optimizer_source"] == "client"
    with pytest.raises(OptkgError, match="DeepSpeed config 'missing.json' not found"):
        parse_training_command("deepspeed train.py --deepspeed missing.json", base_dir=tmp_path)


def test_accelerate_fsdp_and_trainer_flags(tmp_path):
    (tmp_path / "fsdp.yaml").write_text(
        "distributed_type: FSDP\nnum_processes: 16\nnum_machines: 2\nmixed_precision: bf16\n"
        "fsdp_config:\n  fsdp_sharding_strategy: HYBRID_SHARD\n  fsdp_use_orig_params: true\n  fsdp_version: 1\n")
    job = parse_training_command(
        "accelerate launch --config_file fsdp.yaml train.py --per_device_train_batch_size 2 --gradient_accumulation_steps 8 "
        "--gradient_checkpointing --gradient_checkpointing_kwargs '{\"use_reentrant\": true}' --use_peft --lora_r 16 --max_seq_length 4096",
        base_dir=tmp_path)
    s = job.settings
    assert job.framework == "fsdp"
    assert (s["world_size"], s["num_nodes"], s["fsdp_sharding"], s["use_orig_params"], s["params_dtype"]) == (16, 2, "hybrid_shard", True, "bf16")
    assert (s["recompute_granularity"], s["use_reentrant"], s["peft"], s["lora_rank"], s["seq_length"]) == ("full", True, "lora", 16, 4096)


def test_trainer_fsdp_flag_and_bad_config_line(tmp_path):
    job = parse_training_command("torchrun --nproc_per_node 8 run_clm.py --fsdp 'full_shard auto_wrap offload' --bf16 True")
    assert job.framework == "fsdp"
    assert (job.get("fsdp_sharding"), job.get("offload_param"), job.get("params_dtype")) == ("full_shard", "cpu", "bf16")
    (tmp_path / "bad.yaml").write_text("distributed_type: FSDP\nmixed_precision: fp64\n")
    with pytest.raises(OptkgError, match=r"bad.yaml:2: mixed_precision must be one of no, fp16, bf16, fp8"):
        load_training_file(tmp_path / "bad.yaml", None, resolve_model)


def test_torchtitan_toml():
    job = parse_torchtitan_toml(
        '[model]\nname = "llama3"\nflavor = "70B"\nconverters = ["float8"]\n[training]\nlocal_batch_size = 2\nseq_len = 8192\n'
        '[parallelism]\ndata_parallel_shard_degree = 8\ntensor_parallel_degree = 8\npipeline_parallel_degree = 2\n'
        '[activation_checkpoint]\nmode = "full"\n', "llama3_70b.toml", resolve_model)
    assert job.framework == "torchtitan" and job.model.num_hidden_layers == 80 and job.get("fp8")
    assert job.parallel() == {"tp_size": 8, "pp_size": 2, "cp_size": 1, "ep_size": 1, "dp_size": 8, "world_size": 128}
    assert (job.get("recompute_granularity"), job.get("fsdp_sharding"), job.get("seq_length")) == ("full", "full_shard", 8192)
    with pytest.raises(OptkgError, match="x.toml:2: activation_checkpoint.mode must be none, selective, full or memory_budget"):
        parse_torchtitan_toml('[activation_checkpoint]\nmode = "op"\n', "x.toml")
    with pytest.raises(OptkgError, match="x.toml: not valid TOML"):
        parse_torchtitan_toml("[model\n", "x.toml")


def test_stack_yaml_with_framework_and_graph_style_techniques(tmp_path, catalog):
    p = tmp_path / "job.yaml"
    p.write_text("framework: {name: DeepSpeed, version: 0.14.4}\nmodel: meta-llama/Llama-3.1-8B\n"
                 "hardware: {gpu: H100, count: 16}\n"
                 "techniques:\n  - zero-2\n  - {pipeline-parallelism: {pp_size: 4}}\n"
                 "settings: {micro_batch_size: 1, global_batch_size: 64, seq_length: 4096, precision: bf16}\n")
    job = load_training_file(p, catalog, resolve_model)
    assert (job.framework, job.framework_version) == ("deepspeed", "0.14.4")
    assert (job.get("zero_stage"), job.get("pp_size"), job.get("params_dtype"), job.get("world_size")) == (2, 4, "bf16", 16)
    assert job.hardware["id"] == "H100-SXM"
    p.write_text("framework: megatron\ntraining:\n  tp_sizee: 8\n")
    with pytest.raises(OptkgError, match=r"job.yaml:3: unknown training setting 'tp_sizee'; did you mean 'tp_size'\?"):
        load_training_file(p, catalog, resolve_model)
    p.write_text("framework: megatrn\n")
    with pytest.raises(OptkgError, match="unknown framework 'megatrn'"):
        load_training_file(p, catalog, resolve_model)


@pytest.mark.parametrize("cmd, fw", [
    ("torchrun pretrain_gpt.py --tensor-model-parallel-size 2", "megatron"),
    ("deepspeed pretrain_gpt.py --tensor-model-parallel-size 2 --deepspeed", "deepspeed"),
    ("deepspeed --num_gpus 8 train.py --deepspeed ds.json", "hf-trainer"),
    ("torchrun -m torchtitan.train --job.config_file x.toml", "torchtitan"),
    ("python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.strategy=megatron", "verl"),
    ("megatron sft --tensor_model_parallel_size 8", "megatron"),
])
def test_detect_command(cmd, fw):
    assert detect_command(cmd) == fw


@pytest.mark.parametrize("cmd, needle", [
    ("torchrun", "--train: no training script or module in the command"),
    ("torchrun 'unbalanced", "--train: cannot split the command (No closing quotation)"),
    ("python -m verl.trainer.main_ppo data.max_prompt_length=abc", "data.max_prompt_length / data.max_response_length must be integers"),
    ("torchrun pretrain_gpt.py --tensor-model-parallel-size 99999999999999", "tp_size must be between 0 and"),
])
def test_bad_commands_are_one_line_errors(cmd, needle):
    with pytest.raises(OptkgError) as e:
        parse_training_command(cmd, where="--train")
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("cmd, training", [
    ("vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 8", False),
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 8", False),
    ("trtllm-serve Qwen/Qwen3-32B --tp_size 8", False),
    ("torchrun --nproc_per_node 8 train.py", True),
    ("python -m torch.distributed.run --nproc_per_node 4 pretrain_gpt.py", True),
    ("megatron sft --load ZhipuAI/GLM-4.5-Air-Base-mcore", True),
    ("accelerate launch --config_file fsdp.yaml train.py", True),
])
def test_training_commands_are_told_from_serving_ones(cmd, training):
    from kg.inputs.training import is_training_command
    assert is_training_command(cmd) is training
