"""Training-job defects from the fresh-user tester (tester-3 items 2, 3, 17, 18): launcher flags read like
the config files they stand for, one world size per report, no 0 invented for a missing batch factor."""
import json

import pytest

from kg.core.errors import OptkgError
from kg.inputs.training import parse_training_command


from report_text import cli  # noqa: E402,F401  (the CLI with the report's wrapping undone)


ACC = ("accelerate launch --num_processes 8 {flags} train.py --max_seq_length 4096 --per_device_train_batch_size 2")
P = 8_030_261_248  # Llama-3.1-8B parameters (the report's params_per_gpu)


def _json(cli, *args):
    code, out, err = cli("check", *args, "--format", "json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_accelerate_launch_fsdp_flags_shard_the_model_states(cli):
    # accelerate 1.15.0 commands/launch.py:260 --use_fsdp, :534 --fsdp_sharding_strategy: read like fsdp_config keys
    job = parse_training_command(ACC.format(flags="--use_fsdp --fsdp_sharding_strategy FULL_SHARD --mixed_precision bf16"))
    assert job.framework == "fsdp"
    assert (job.get("fsdp_sharding"), job.get("world_size"), job.get("use_orig_params"), job.get("params_dtype")) \
        == ("full_shard", 8, True, "bf16")  # --fsdp_use_orig_params defaults to "true" (launch.py:578-580)
    assert job.ignored == []
    code, d = _json(cli, "--train", ACC.format(flags="--use_fsdp --fsdp_sharding_strategy FULL_SHARD"),
                    "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "A100-80GB")
    m = d["derived"]["memory"]
    # 16 B per parameter (2 weights + 2 gradients + 12 Adam) sharded over DP 8, + one gathered layer
    assert (m["weights_bytes"], m["gradients_bytes"], m["optimizer_bytes"]) == (P * 2 // 8, P * 2 // 8, P * 12 // 8)
    assert m["model_states_bytes"] == 17_111_195_648 and m["total_bytes"] == 63_290_482_688
    assert code == 0 and not [f for f in d["findings"] if f["rule_id"] == "training-memory-exceeds-gpu"]
    assert d["ignored_flags"] == []
    # the other side: without --use_fsdp the script's plain DDP keeps 16 B per parameter on each GPU (128.48 GB)
    code, d = _json(cli, "--train", ACC.format(flags=""), "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "A100-80GB")
    assert d["derived"]["memory"]["model_states_bytes"] == 16 * P == 128_484_179_968
    assert code == 1 and [f for f in d["findings"] if f["rule_id"] == "training-memory-exceeds-gpu"]


def test_accelerate_launch_sharding_codes_offload_and_deepspeed_flags(tmp_path):
    job = parse_training_command(ACC.format(flags="--use_fsdp --fsdp_sharding_strategy 2 --fsdp_offload_params true "
                                                  "--fsdp_use_orig_params false"))
    assert (job.get("fsdp_sharding"), job.get("offload_param"), job.get("use_orig_params")) == ("shard_grad_op", "cpu", False)
    job = parse_training_command(ACC.format(flags="--use_fsdp --fsdp_sharding_strategy HYBRID_SHARD --num_machines 2"))
    assert (job.get("fsdp_sharding"), job.get("num_nodes")) == ("hybrid_shard", 2)
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3}}')
    job = parse_training_command(ACC.format(flags="--use_deepspeed --deepspeed_config_file ds.json --gradient_accumulation_steps 4"),
                                 base_dir=tmp_path)
    assert (job.framework, job.get("zero_stage"), job.get("gradient_accumulation_steps")) == ("deepspeed", 3, 4)
    job = parse_training_command(ACC.format(flags="--use_deepspeed --zero_stage 2"))
    assert (job.framework, job.get("zero_stage"), job.get("optimizer_source")) == ("deepspeed", 2, "client")
    # the command line wins over --config_file (launch.py:1236-1246 fills only what the command left unset)
    (tmp_path / "fsdp.yaml").write_text("distributed_type: FSDP\nnum_processes: 16\nfsdp_config:\n  fsdp_sharding_strategy: NO_SHARD\n")
    job = parse_training_command("accelerate launch --config_file fsdp.yaml --fsdp_sharding_strategy FULL_SHARD train.py",
                                 base_dir=tmp_path)
    assert (job.framework, job.get("fsdp_sharding"), job.get("world_size")) == ("fsdp", "full_shard", 16)
    job = parse_training_command("accelerate launch --config_file fsdp.yaml --num_processes 8 train.py", base_dir=tmp_path)
    assert (job.get("fsdp_sharding"), job.get("world_size")) == ("no_shard", 8)


DS_PIPE = '{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}, ' \
          '"bf16": {"enabled": true}, "pipeline": {"stages": 4}}'


def test_deepspeed_config_flag_reads_the_json_like_deepspeed(cli, tmp_path):
    # DeepSpeed's add_config_arguments: a --deepspeed switch and --deepspeed_config FILE (deepspeed 0.19.8
    # deepspeed/__init__.py:628-633), the form of its CIFAR tutorial
    (tmp_path / "ds.json").write_text(DS_PIPE)
    for flags in ("--deepspeed_config ds.json", "--deepspeed_config=ds.json", "--deepspeed --deepspeed_config ds.json",
                  "--deepspeed ds.json"):
        job = parse_training_command(f"deepspeed --num_gpus 16 train.py {flags}", base_dir=tmp_path)
        assert (job.framework, job.get("zero_stage"), job.get("pp_size"), job.get("global_batch_size")) == ("deepspeed", 2, 4, 16), flags
        assert job.parallel()["dp_size"] == 16 // 4 == 4 and job.ignored == [], flags
    ds = tmp_path / "ds.json"
    code, d = _json(cli, "--train", f"deepspeed --num_gpus 16 train.py --deepspeed_config {ds}",
                    "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "A100-80GB")
    assert code == 1 and [f["rule_id"] for f in d["findings"] if f["severity"] == "error"] == ["deepspeed-zero-with-pipeline-engine"]
    assert d["ignored_flags"] == []
    # the other side: the same launch without a DeepSpeed config is a plain Trainer job; nothing to fire
    code, d = _json(cli, "--train", "deepspeed --num_gpus 16 train.py", "--model", "meta-llama/Meta-Llama-3.1-8B",
                    "--gpu", "A100-80GB")
    assert not [f for f in d["findings"] if f["rule_id"] == "deepspeed-zero-with-pipeline-engine"]


TT = ('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n'
      '[parallelism]\ndata_parallel_shard_degree = {shard}\ntensor_parallel_degree = {tp}\n')
ZERO1_INFO = "coupling-zero-1-requires-data-parallelism"


def test_torchtitan_without_a_shard_group_holds_no_zero_1(cli, tmp_path):
    from kg.frameworks.torchtitan.reader import parse_torchtitan_toml
    # torchtitan 0.3.0 parallel_dims.py:680-693: fully_shard only when dp_shard > 1 or cp > 1
    assert parse_torchtitan_toml(TT.format(shard=1, tp=8), "a.toml").get("fsdp_sharding") == "no_shard"
    assert parse_torchtitan_toml(TT.format(shard=8, tp=1), "b.toml").get("fsdp_sharding") == "full_shard"
    assert parse_torchtitan_toml(TT.format(shard=-1, tp=8), "c.toml", world_size=8).get("fsdp_sharding") == "no_shard"
    assert parse_torchtitan_toml(TT.format(shard=-1, tp=8), "d.toml", world_size=16).get("fsdp_sharding") == "full_shard"
    (tmp_path / "tp8.toml").write_text(TT.format(shard=1, tp=8))
    code, d = _json(cli, str(tmp_path / "tp8.toml"), "--gpu", "H100")
    assert ZERO1_INFO not in [f["rule_id"] for f in d["findings"]]
    (tmp_path / "fsdp8.toml").write_text(TT.format(shard=8, tp=1))
    code, d = _json(cli, str(tmp_path / "fsdp8.toml"), "--gpu", "H100")
    assert ZERO1_INFO not in [f["rule_id"] for f in d["findings"]]
    # the other side: a real ZeRO-1 at DP 1 still gets the coupling's note
    (tmp_path / "z1.json").write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}}')
    code, d = _json(cli, "--train", f"deepspeed --num_gpus 1 train.py --deepspeed {tmp_path / 'z1.json'}",
                    "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100")
    assert ZERO1_INFO in [f["rule_id"] for f in d["findings"]]


MEG = ("torchrun --nproc_per_node 8 --nnodes {n} pretrain_gpt.py --tensor-model-parallel-size 8 "
       "--pipeline-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 16 --seq-length 4096")


def test_one_world_size_per_report(cli):
    # torchrun --nnodes 3 x --nproc_per_node 8 = 24 GPUs; DP = 24 / (TP 8 x PP 2 x CP 1) is not whole
    code, out, _ = cli("check", "--train", MEG.format(n=3), "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100")
    assert "GPUs: 24 x H100-SXM" in out
    assert "TP 8 x PP 2 x CP 1 x DP ? (TP x PP x CP = 16 does not divide the world size 24 GPUs)" in out
    assert "micro 1 x grad-accum 16 x DP ? = global 16 sequences" in out
    assert "world_size 24 is not divisible by TP 8 x PP 2 x CP 1 = 16" in out and "= 16 GPUs" not in out
    # --count disagreeing with the launcher: said once, and the count is the report's one world size
    code, out, _ = cli("check", "--train", MEG.format(n=3), "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100",
                       "--count", "16")
    assert out.count("--count 16 replaces the job's own world size 24") == 1
    assert "GPUs: 16 x H100-SXM" in out and "TP 8 x PP 2 x CP 1 x DP 1 = 16 GPUs" in out and "world_size 24" not in out
    # the other side: 2 nodes x 8 = 16 = TP x PP, DP 1, no note
    code, out, _ = cli("check", "--train", MEG.format(n=2), "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100",
                       "--count", "16")
    assert "TP 8 x PP 2 x CP 1 x DP 1 = 16 GPUs" in out and "replaces the job's own world size" not in out
    assert "micro 1 x grad-accum 16 x DP 1 = global 16 sequences" in out


def test_deepspeed_missing_grad_accum_is_derived_not_a_silent_zero(cli):
    from conftest import REPO
    ds = str(REPO / "tests/fixtures/training_cases/ds_zero2.json")  # train_batch_size 16, micro 4, no grad accum
    code, out, _ = cli("check", ds, "--model", "meta-llama/Llama-3.1-8B", "--count", "8")
    # deepspeed 0.19.8 runtime/config.py:621-622: grad_acc = 16 // 4 // 8 = 0, then :600 asserts grad_acc > 0
    assert code == 1 and "16 != 4 x 0 x 8 = 0 (gradient_accumulation_steps not set: DeepSpeed derives it as " \
        "train_batch_size // micro_batch_per_gpu // world_size, rounding down; train_batch_size is below micro x world_size, " \
        "so it is 0 and DeepSpeed stops at \"Gradient accumulation steps: 0 has to be greater than 0\"" in out
    code, out, _ = cli("check", ds, "--model", "meta-llama/Llama-3.1-8B", "--count", "3")
    assert code == 1 and "16 != 4 x 1 x 3 = 12 (gradient_accumulation_steps not set: DeepSpeed derives it as " \
        "train_batch_size // micro_batch_per_gpu // world_size, rounding down, runtime/config.py:621-622)." in out
    # the other side: 16 = 4 x 4 x 1 derives 4 and holds; a given grad accum gets no derivation text
    code, out, _ = cli("check", ds, "--model", "meta-llama/Llama-3.1-8B", "--count", "1")
    assert "deepspeed-batch-size-mismatch" not in out and "micro 4 x grad-accum 4 x DP 1 = global 16 sequences" in out


def test_torchtitan_field_errors_name_file_and_line(cli, tmp_path):
    from kg.frameworks.torchtitan.reader import parse_torchtitan_toml, toml_line
    text = '[model]\nname = "llama3"\n\n[parallelism]\n# 16 GPUs\ndata_parallel_shard_degree = 2\ntensor_parallel_degree = "eight"\n'
    with pytest.raises(OptkgError, match=r"^bad1.toml:7: parallelism.tensor_parallel_degree: tp_size must be an integer, found 'eight'$"):
        parse_torchtitan_toml(text, "bad1.toml")
    assert (toml_line(text, "parallelism"), toml_line(text, "parallelism.data_parallel_shard_degree"),
            toml_line(text, "model.name"), toml_line(text, "training.seq_len")) == (4, 6, 2, None)
    # dotted keys at the root and quoted keys count too; a table given as a value names its line
    assert toml_line('parallelism.tensor_parallel_degree = 8\n', "parallelism.tensor_parallel_degree") == 1
    assert toml_line('[ "parallelism" ]\n"pipeline_parallel_degree" = 2\n', "parallelism.pipeline_parallel_degree") == 2
    with pytest.raises(OptkgError, match=r"^t.toml:2: parallelism: \[parallelism\] must be a table$"):
        parse_torchtitan_toml('# job\nparallelism = 3\n', "t.toml")
    # the CLI: one line, exit 2
    (tmp_path / "bad1.toml").write_text(text)
    code, out, err = cli("check", str(tmp_path / "bad1.toml"))
    assert code == 2 and err.strip().endswith("bad1.toml:7: parallelism.tensor_parallel_degree: tp_size must be an integer, found 'eight'")
    assert len(err.strip().splitlines()) == 1


TT_CASE = __import__("pathlib").Path(__file__).parent / "fixtures" / "training_cases" / "tt_llama3_8b_tp16.toml"


def test_torchtitan_command_overrides_win_over_the_config_file():
    # the TOML sets seq_len 8192 and TP 16; the command's flags are applied after the file (torchtitan 0.3.0
    # config/manager.py:34-45), so the job trains 4,096-token sequences at TP 8 -- the file's values were kept before
    from kg.frameworks.torchtitan.reader import parse_torchtitan_command
    job = parse_torchtitan_command(f"torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file {TT_CASE} "
                                   "--training.seq_len 4096 --parallelism.tensor_parallel_degree=8")
    assert (job.get("seq_length"), job.get("tp_size"), job.get("micro_batch_size")) == (4096, 8, 1)
    assert job.configs["torchtitan"]["training"]["seq_len"] == 4096


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_torchtitan_override_that_is_not_a_finite_number_is_refused(value):
    from kg.frameworks.torchtitan.reader import parse_torchtitan_command
    with pytest.raises(OptkgError, match=rf"--cmd: --training.seq_len {value}: not a finite number"):
        parse_torchtitan_command(f"torchrun -m torchtitan.train --job.config_file {TT_CASE} --training.seq_len {value}")
    with pytest.raises(OptkgError, match=r"--cmd: --training.seq_len: seq_length must be an integer, found 'abc'"):
        parse_torchtitan_command(f"torchrun -m torchtitan.train --job.config_file {TT_CASE} --training.seq_len abc")


@pytest.mark.parametrize("rep,shard,cp,strategy,group", [
    # torchtitan 0.3.0 parallel_dims.py:278: the fsdp mesh is dp_shard x cp, so CP ranks shard model states even at
    # dp_shard 1; models/llama3/parallelize.py:74-76: dp_replicate > 1 adds a replicated mesh dimension (HSDP)
    (1, 1, 2, "full_shard", 2),
    (2, 4, 2, "hybrid_shard", 8),
    (2, 4, 1, "hybrid_shard", 4),
    (2, 1, 1, "no_shard", None),  # dp_replicate alone is DDP
])
def test_torchtitan_fsdp2_shards_over_dp_shard_times_cp_and_replicates_over_dp_replicate(rep, shard, cp, strategy,
                                                                                          group):
    from kg.derive.training_memory import training_memory
    from kg.frameworks.torchtitan.reader import parse_torchtitan_toml
    from kg.inputs.modelcfg import resolve_model
    toml = TT.format(shard=shard, tp=4) + f"data_parallel_replicate_degree = {rep}\ncontext_parallel_degree = {cp}\n"
    job = parse_torchtitan_toml(toml, "t.toml", resolve_model)
    assert job.get("fsdp_sharding") == strategy
    if group is None:
        return
    mem = training_memory(job)
    # Llama-3.1-8B 8,030,261,248 parameters / TP 4 = 2,007,565,312, sharded over the fsdp mesh; Adam with an fp32
    # master copy keeps 12 B per parameter
    assert mem.shard_group == group
    assert mem.optimizer == 12 * 2_007_565_312 // group


@pytest.mark.parametrize("converters,fp8,float8_moe", [
    ('["float8"]', True, False),                                              # 0.1.0's name
    ('["quantize.linear.float8"]', True, False),                              # 0.2.x float8.py:237
    ('["quantize.grouped_mm.float8"]', False, True),                          # 0.2.x float8.py:238: MoE experts only
    ('["quantize.linear.float8", "quantize.grouped_mm.float8"]', True, True),
    ('["quantize.linear.mx"]', False, False),
])
def test_torchtitan_float8_converter_names_of_each_release_are_read(converters, fp8, float8_moe):
    from kg.frameworks.torchtitan.reader import parse_torchtitan_toml
    toml = TT.format(shard=8, tp=1).replace('flavor = "8B"\n', f'flavor = "8B"\nconverters = {converters}\n')
    job = parse_torchtitan_toml(toml, "t.toml")
    assert (bool(job.get("fp8")), bool(job.get("float8_moe"))) == (fp8, float8_moe)


DS70 = ("deepspeed {flags} train.py --deepspeed {ds} --model_name_or_path meta-llama/Llama-3.1-70B "
        "--per_device_train_batch_size 1 --bf16 True --model_max_length 4096 --gradient_checkpointing True")
L70 = 70_553_706_496  # Llama-3.1-70B parameters (the report's params_per_gpu before sharding)


@pytest.fixture(scope="module")
def ds_z3(tmp_path_factory):
    p = tmp_path_factory.mktemp("ds") / "ds_z3.json"
    p.write_text(json.dumps({"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": True},
                             "zero_optimization": {"stage": 3}}))
    return str(p)


def test_deepspeed_launcher_without_a_count_runs_on_every_gpu_of_the_node(cli, ds_z3):
    # deepspeed 0.19.8 launcher/runner.py:467-472: no hostfile, no --num_gpus/--include -> every local device
    code, d = _json(cli, "--train", DS70.format(flags="", ds=ds_z3), "--gpu", "H100")
    assert d["derived"]["parallel"]["world_size"] == 8 and d["derived"]["memory"]["shard_group"] == 8
    assert d["derived"]["memory"]["weights_bytes"] == 2 * L70 // 8
    assert any("read as the H100-SXM node's 8 GPUs (catalog)" in n for n in d["notes"])
    assert "coupling-zero-1-requires-data-parallelism" not in {f["rule_id"] for f in d["findings"]}
    # --count wins over the node
    _, d = _json(cli, "--train", DS70.format(flags="", ds=ds_z3), "--gpu", "H100", "--count", "32")
    assert d["derived"]["parallel"]["world_size"] == 32 and d["derived"]["memory"]["weights_bytes"] == 2 * L70 // 32


def test_deepspeed_include_counts_its_gpu_ids(cli, ds_z3):
    _, d = _json(cli, "--train", DS70.format(flags="--include localhost:0,1,2,3", ds=ds_z3), "--gpu", "H100")
    assert d["derived"]["parallel"]["world_size"] == 4 and d["ignored_flags"] == []


def test_deepspeed_hostfile_leaves_zero_3_memory_not_evaluable(cli, ds_z3):
    # the hostfile's slots size the job (runner.py:446); unread, the count is unknown: no memory ERROR on 1 GPU
    code, d = _json(cli, "--train", DS70.format(flags="--hostfile hostfile", ds=ds_z3), "--gpu", "H100")
    assert code == 0 and "memory" not in d["derived"]
    assert {f["rule_id"] for f in d["findings"]} & {"training-memory-exceeds-gpu",
                                                   "coupling-zero-1-requires-data-parallelism"} == set()
    assert any("the GPU count is unknown; give --count" in n for n in d["notes"])
    assert d["stack"]["gpu_count_unknown"] is True
    code, out, _ = cli("check", "--train", DS70.format(flags="--hostfile hostfile", ds=ds_z3), "--gpu", "H100")
    assert "GPUs: H100-SXM, count unknown (give --count)" in out


@pytest.mark.parametrize("value", ["gpu", "auto"])
def test_torchrun_nproc_per_node_gpu_is_the_node_count(cli, value):
    # torch distributed/run.py determine_local_world_size: "gpu"/"auto" -> torch.cuda.device_count()
    cmd = f"torchrun --standalone --nnodes 2 --nproc-per-node={value} train.py"
    _, d = _json(cli, "--train", cmd, "--model", "Qwen/Qwen3-8B", "--gpu", "H100")
    assert d["derived"]["parallel"]["world_size"] == 16
    _, d = _json(cli, "--train", cmd, "--model", "Qwen/Qwen3-8B")
    assert any("the GPU count is unknown without --gpu; give --count" in n for n in d["notes"])


def test_torchtitan_toml_is_read_as_a_release_that_loads_toml(cli):
    # torchtitan 0.3.0's ConfigManager has no TOML loader (--module / --config); 0.2.0, 0.2.1 and 0.2.2 read TOML
    # (config/manager.py _maybe_load_toml) and the note names all three
    from kg.frameworks.torchtitan.reader import load_torchtitan_toml
    job = load_torchtitan_toml(TT_CASE)
    assert job.framework_version == "0.2.1"
    assert any(n.startswith("a TOML job config is read as torchtitan 0.2.1 (0.2.0, 0.2.1 and 0.2.2 load TOML") for n in job.notes)
    _, d = _json(cli, str(TT_CASE), "--framework-version", "0.2.0", "--count", "16")
    assert d["stack"]["framework_version"] == "0.2.0"


def test_torchtune_builtin_config_name_says_to_copy_it_to_a_yaml(cli):
    # torchtune's README form: `tune run <recipe> --config llama3_1/8B_full` names a config the package ships
    code, out, err = cli("check", "--train", "tune run --nproc_per_node 8 full_finetune_distributed --config "
                         "llama3_1/8B_full", "--gpu", "H100")
    assert code == 2 and err.strip() == (
        "optkg: error: --train: --config llama3_1/8B_full names a torchtune built-in config, which optkg does not "
        "bundle; copy it with `tune cp llama3_1/8B_full my_config.yaml` and give that YAML's path")


def test_framework_version_newer_than_any_known_release_says_so(cli):
    # serving's wording (kg.inputs.effective.newer_release_note); torchtitan's newest pinned release is 0.3.0
    _, d = _json(cli, "--train", "torchrun --nproc_per_node 8 --nnodes 2 -m torchtitan.train --module llama3 "
                 "--config llama3_8b", "--framework-version", "9.9.9", "--no-speed")
    assert "torchtitan 9.9.9 is newer than the latest release optkg knows (0.3.0): checked with the knowledge of " \
           "0.3.0" in d["notes"]
    _, d = _json(cli, str(TT_CASE), "--framework-version", "0.2.0", "--count", "16", "--no-speed")
    assert not [n for n in d["notes"] if "newer than" in n]


@pytest.mark.parametrize("config,granularity", [
    # torchtitan 0.3.0 models/llama3/config_registry.py: llama3_70b passes activation_checkpoint=FullAC.Config(),
    # llama3_8b SelectiveAC.Config() (per-op SAC)
    ("llama3_70b", "full"), ("llama3_8b", "selective")])
def test_torchtitan_registry_config_recomputes_as_its_activation_checkpoint_class(config, granularity):
    from kg.frameworks.torchtitan.reader import parse_torchtitan_command
    job = parse_torchtitan_command(f"torchrun --nproc_per_node=8 -m torchtitan.train --module llama3 --config {config}")
    assert job.get("recompute_granularity") == granularity


def test_torchtitan_published_70b_registry_recipe_is_not_a_memory_error(cli):
    # newuser5 #6: torchtitan's own llama3_70b (FullAC, TP 8, local batch 8 x 8,192 tokens) on 64 H100 was read as
    # "recompute none" (activations 213.78 GB, ERROR training-memory-exceeds-gpu). Full recompute, SP: 80 layers x
    # the layer input 2 x 8,192 x 8 x 8,192 B / TP 8 = 128 MiB per layer (Korthikanti et al. 2022 Table 2)
    code, out, _ = cli("check", "--train", "torchrun --nproc_per_node=8 --nnodes=8 -m torchtitan.train --module llama3 "
                       "--config llama3_70b", "--gpu", "H100")
    assert code == 0, out
    assert "recompute full" in out and "(80 layers x 1 micro-batches in flight, 128.0 MiB per layer)" in out
    assert "training-memory-exceeds-gpu" not in out


def test_torchtitan_toml_without_activation_checkpoint_recomputes_selectively_as_torchtitan_does(tmp_path):
    # torchtitan 0.2.1 config/job_config.py ActivationCheckpoint: mode = "selective", selective_ac_option = "2"
    # (every second block fully checkpointed); option "1" checkpoints every block, i.e. full
    from kg.frameworks.torchtitan.reader import parse_torchtitan_command
    toml = tmp_path / "tt.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nseq_len = 8192\n')
    job = parse_torchtitan_command(f"torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file {toml}")
    assert job.get("recompute_granularity") == "selective"
    assert any("one block in 2 fully checkpointed" in n and "upper bound" in n for n in job.notes), job.notes
    toml.write_text(toml.read_text() + '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "1"\n')
    job = parse_torchtitan_command(f"torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file {toml}")
    assert job.get("recompute_granularity") == "full"


def test_a_batch_that_does_not_multiply_out_is_not_printed_as_an_equation(cli):
    # newuser7: ds_zero2.json's train_batch_size 16 against micro 4 x grad-accum 8 x 8 GPUs printed
    # "micro 4 x grad-accum 8 x DP 8 = global 16 sequences"; DeepSpeed asserts 16 == 4 x 8 x 8 (_batch_assertion)
    from conftest import REPO
    ds = str(REPO / "tests/fixtures/training_cases/ds_zero2.json")
    code, out, _ = cli("check", "--train", f"deepspeed --num_gpus 8 train.py --deepspeed {ds} "
                       "--per_device_train_batch_size 4 --gradient_accumulation_steps 8 --max_seq_length 4096",
                       "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    assert "  micro 4 x grad-accum 8 x DP 8 = 256 sequences, but the global batch given is 16\n" in out
    assert "= global 16" not in out and "deepspeed-batch-size-mismatch" in out


@pytest.mark.parametrize("content,error", [
    (b"\xff\xfe{}", "bad.json:1: not valid UTF-8 (byte 0xff at offset 0)"),
    (b'{"a":' * 5000 + b"1" + b"}" * 5000, "bad.json:1:5001: YAML error: exceeded maximum nesting depth"),
])
def test_an_unreadable_file_with_a_training_flag_names_its_own_error(cli, tmp_path, content, error):
    # no reader takes the file, so the --model check used to answer "a serving stack names its model ..."
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    code, _, err = cli("check", str(p), "--model", "meta-llama/Llama-3.1-8B", "--count", "8")
    assert (code, err.strip().endswith(error), "serving stack" in err) == (2, True, False)
