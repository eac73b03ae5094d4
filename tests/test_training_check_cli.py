"""optkg check on training jobs end to end: the 70B job's breakdown, no inference wording, exit codes, routing."""
import json
import re

import pytest
from conftest import REPO


from report_text import cli  # noqa: E402,F401  (the CLI with the report's wrapping undone)


JOB_70B = ("torchrun --nproc_per_node 8 --nnodes 64 pretrain_gpt.py --tensor-model-parallel-size 8 "
           "--pipeline-model-parallel-size 4 --sequence-parallel --use-distributed-optimizer --bf16 "
           "--micro-batch-size 1 --global-batch-size 1024 --seq-length 8192 --recompute-granularity selective")
SERVING_WORDS = re.compile(r"KV|kv-cache|kv_cache|concurrency|max_model_len|inference|serving|tokens per GPU", re.I)


def test_70b_job_text_report(cli):
    code, out, err = cli("check", "--train", JOB_70B, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100")
    assert code == 0, err
    assert "TP 8 x PP 4 x CP 1 x DP 16 = 512 GPUs" in out
    assert "micro 1 x grad-accum 64 x DP 16 = global 1024 sequences; 8,388,608 tokens per step" in out
    # 15,330,981,888 B = 14.28 GiB; 26,273,120,256 B = 24.47 GiB; 41,604,102,144 B = 38.75 GiB of the H100-SXM's
    # 85,520,809,984 B = 79.65 GiB (GiB = 2**30 B, as the serving reports print GPU memory)
    assert "model states                      14.28 GiB" in out
    assert "activations                       24.47 GiB" in out
    assert "total                             38.75 GiB   of 79.65 GiB (49%)" in out
    assert out.rstrip().splitlines()[-1] == "0 finding(s) · 31 rules held · 0 could not be evaluated"
    assert not SERVING_WORDS.search(out), SERVING_WORDS.search(out)


def test_70b_job_json(cli):
    code, out, _ = cli("check", "--train", JOB_70B, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100",
                       "--format", "json")
    d = json.loads(out)
    assert d["kind"] == "training" and code == 0
    m = d["derived"]["memory"]
    assert (m["weights_bytes"], m["gradients_bytes"], m["optimizer_bytes"]) == (4_542_513_152, 9_085_026_304, 1_703_442_432)
    assert m["activations_bytes"] == 26_273_120_256 and m["in_flight_microbatches"] == 4
    assert "kv" not in json.dumps(d["derived"]).lower()


def test_vpp_case_exit_code_and_one_line_error(cli):
    code, out, _ = cli("check", "--train", "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --pipeline-model-parallel-size 16 "
                       "--num-layers-per-virtual-pipeline-stage 2", "--model", "meta-llama/Llama-3.1-70B")
    assert code == 1
    assert "64 of 80 layers are built (16 silently dropped" in out
    code, out, err = cli("check", "--train", "torchrun pretrain_gpt.py --pipeline-model-parallel-size two")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "pp_size must be an integer, found 'two'" in err


def test_training_files_route_to_the_training_report(cli, tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text('{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1}')
    code, out, _ = cli("check", str(ds), "--model", "meta-llama/Llama-3.1-8B", "--count", "1")
    assert code == 1 and "deepspeed-batch-size-mismatch" in out and "8 != 2 x 1 x 1 = 2" in out
    case = REPO / "tests/fixtures/training_cases/te_1159.yaml"
    code, out, _ = cli("check", str(case))
    assert code == 1 and "training-fp8-needs-sm89" in out and "RTX-3090 is 8.6" in out


def test_no_model_says_what_could_not_be_computed(cli):
    code, out, _ = cli("check", "--train", "torchrun --nproc_per_node 2 pretrain_gpt.py --tensor-model-parallel-size 2 "
                       "--micro-batch-size 1 --seq-length 4096 --max-position-embeddings 4096")
    assert code == 0
    assert "memory per GPU not computed: model shape (a HF config or --num-layers/--hidden-size)" in out
    # rules that need the model shape are "could not be evaluated", never a bare "No findings" (issue 12)
    assert "No findings" not in out
    assert "training-heads-not-divisible-by-tp: missing num_attention_heads" in out
    # the summary wraps at 100 columns: compared with the wrapping folded
    assert " ".join(out.split()).endswith("0 finding(s) · 19 rules held · 4 could not be evaluated (missing: "
                                          "num_attention_heads, num_query_groups, gpu_memory_bytes, total_bytes)")


def test_a_megatron_launch_without_batch_or_sequence_length_gets_megatrons_own_refusals(cli):
    # validate_args asserts args.micro_batch_size is not None (arguments.py:495 at core_v0.16.1) and, without
    # --seq-length, that --encoder-seq-length is given (:826): the launch as pasted does not start
    code, out, _ = cli("check", "--train", "torchrun --nproc_per_node 2 pretrain_gpt.py --tensor-model-parallel-size 2")
    assert code == 1
    assert "megatron-lm-megatron-training-arguments-495" in out and "(micro_batch_size = None)" in out
    assert "megatron-lm-megatron-training-arguments-826" in out
    assert "memory per GPU not computed: model shape (a HF config or --num-layers/--hidden-size), seq_length not given" in out


def test_megatron_job_shows_megatron_theoretical_memory_to_the_byte(cli):
    code, out, _ = cli("check", "--train", JOB_70B.replace("8192", "4096"), "--model", "meta-llama/Llama-3.1-70B",
                       "--format", "json")
    mt = json.loads(out)["derived"]["megatron_theoretical"]
    # Megatron-LM theoretical_memory_usage.py @d98e8a64 on the same arguments (tests/test_training_memory.py)
    assert (mt["weight_and_optimizer_bytes"], mt["activation_bytes"]) == (15_332_931_072, 10_754_211_840)
    assert (mt["weight_and_optimizer_mib"], mt["activation_mib"]) == (14622.62, 10256.02)


def test_shipped_training_example(cli):
    code, out, err = cli("check", str(REPO / "examples/llama-3.1-70b-megatron-train.yaml"))
    assert code == 0, err
    assert "total                             38.75 GiB   of 79.65 GiB (49%)" in out
    assert not SERVING_WORDS.search(out)


def test_explain_speaks_of_frameworks(cli):
    code, out, _ = cli("check", str(REPO / "examples/llama-3.1-70b-megatron-train.yaml"), "--explain")
    assert "torchtitan-kv-heads-not-divisible-by-tp: applies to torchtitan; the job's framework is megatron" in out
    assert "stack's engine" not in out


def test_cmd_detects_training_launchers(cli, catalog):
    from kg.engines.launch import parse_launch
    from kg.inputs.training.job import TrainingJob
    for cmd, fw in [("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 8", "megatron"),
                    ("accelerate launch --num_processes 8 train.py --use_peft", "hf-trainer"),
                    ("python pretrain_gpt.py --pipeline-model-parallel-size 2", "megatron"),
                    ("python -m verl.trainer.main_ppo actor_rollout_ref.actor.strategy=megatron", "verl")]:
        job = parse_launch(cmd, catalog)
        assert isinstance(job, TrainingJob) and job.framework == fw, cmd
    code, out, _ = cli("check", "--cmd", "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --pipeline-model-parallel-size 16 "
                       "--num-layers-per-virtual-pipeline-stage 2", "--model", "meta-llama/Llama-3.1-70B")
    assert code == 1 and "2 x 2 x 16 = 64 of 80 layers are built" in out


def test_train_refuses_a_serving_launch_in_one_line(cli):
    for cmd, prog, name in (("vllm serve meta-llama/Llama-3.1-8B -tp 2", "vllm serve", "vllm (serving)"),
                            ("python -m sglang.launch_server --model-path x", "python -m sglang.launch_server",
                             "sglang (serving)"),
                            ("docker run --gpus all vllm/vllm-openai --model x", "docker run", "docker (container)")):
        code, out, err = cli("check", "--train", cmd)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert f"--train: '{prog}' launches {name}, not a training job" in err


def test_megatron_theoretical_label_on_an_sp_job_without_selective_recompute(cli):
    job = JOB_70B.replace(" --recompute-granularity selective", "")
    code, out, _ = cli("check", "--train", job, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100")
    line = next(x for x in out.splitlines() if "Megatron-LM's theoretical memory" in x)
    assert "TP without SP" not in line
    assert ("Megatron-LM's without-SP formula, which it applies to an SP job unless recompute is selective "
            "(here: none; theoretical_memory_usage.py:466)") in line
    # with selective recompute Megatron takes the SP formula
    _, out, _ = cli("check", "--train", JOB_70B, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100")
    assert "s*b*h*(18 + 4*ffn/h) per layer (Korthikanti Table 2, SP + selective), /TP" in out


def test_memory_warning_title_and_label_at_93_percent(cli):
    # 70B job at seq 7680 on a 40 GB A100: 39,962,032,128 B = 37.22 GiB of 40 GiB = 93 % (warning band from 90 %,
    # error above 100 %)
    code, out, _ = cli("check", "--train", JOB_70B.replace("8192", "7680"), "--model", "meta-llama/Llama-3.1-70B",
                       "--gpu", "A100-40GB")
    assert code == 0
    assert "WARN  training-memory-exceeds-gpu: Estimated memory per GPU is near or over what the GPU holds" in out
    assert "about 37.22 GiB per GPU" in out and "against 40 GiB on the A100-40GB (93%)" in out and "WARNING" not in out
    assert "exceeds" not in out.replace("training-memory-exceeds-gpu", "")  # the rule id keeps its name (ids never die)


def test_markdown_names_framework_and_gpus(cli):
    code, out, _ = cli("check", "--train", JOB_70B.replace("8192", "7680"), "--model", "meta-llama/Llama-3.1-70B",
                       "--gpu", "A100-40GB", "--format", "markdown")
    assert "Model `meta-llama/Meta-Llama-3.1-70B`, framework `megatron`, GPUs: 512 x A100-40GB" in out, out
    assert "engine `-`" not in out and "hardware `-`" not in out


def test_torchtitan_default_global_batch_is_local_times_dp(cli, tmp_path):
    # torchtitan's global_batch_size defaults to -1 = local_batch_size x DP, one accumulation step (0.3.0
    # config/configs.py:43-47, trainer.py:415-431; 0.2.1 job_config.py:248-251, train.py:193-197).
    # llama3 70B, TP 8 on 64 GPUs: dp_shard -1 = 64 / 8 = 8; global 8 x 1 x 8 = 64 sequences x 8,192 = 524,288 tokens
    toml = tmp_path / "tt.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "70B"\n[training]\nlocal_batch_size = 8\nseq_len = 8192\n'
                    '[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 8\n'
                    '[activation_checkpoint]\nmode = "full"\n')
    code, out, err = cli("check", str(toml), "--gpu", "H100", "--count", "64")
    assert "micro 8 x grad-accum 1 x DP 8 = global 64 sequences; 524,288 tokens per step" in out
    assert "global ? sequences" not in out and "neither global_batch_size" not in out
    assert "step time" in out  # the speed estimate is evaluable


def test_torchtitan_layout_that_cannot_tile_the_world_is_an_error_without_memory_or_zero1_note(cli, tmp_path):
    # newuser3 #3: TP 8 x PP 3 on 64 GPUs, dp_shard -1 -> 64 // 24 = 2; 2 x 8 x 3 = 48 != 64, which torchtitan's
    # ParallelDims._validate asserts against (0.3.0 distributed/parallel_dims.py:186)
    toml = tmp_path / "tt.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "70B"\n[training]\nlocal_batch_size = 2\nseq_len = 8192\n'
                    '[parallelism]\ndata_parallel_shard_degree = -1\ntensor_parallel_degree = 8\n'
                    'pipeline_parallel_degree = 3\n')
    code, out, err = cli("check", str(toml), "--gpu", "H100", "--count", "64", "--no-speed")
    assert code == 1
    assert ("ERROR torchtitan-parallel-dims-not-world-size: torchtitan parallel degrees do not multiply to the GPU "
            "count\n      dp_replicate(1) * dp_shard(2) * cp(1) * tp(8) * pp(3) = 48 != WORLD_SIZE(64): torchtitan's "
            "ParallelDims._validate asserts") in out
    assert ("note: memory per GPU not computed: torchtitan refuses the layout (dp_replicate(1) * dp_shard(2) * "
            "cp(1) * tp(8) * pp(3) = 48 != WORLD_SIZE(64))") in out
    assert "Memory per GPU" not in out and "sharding over 1 GPUs" not in out
    assert "INFO  coupling-zero-1-requires-data-parallelism" not in out
    assert "coupling-zero-1-requires-data-parallelism: missing dp_size" in out
    code, out, err = cli("check", str(toml), "--gpu", "H100", "--count", "48", "--no-speed")
    assert "torchtitan-parallel-dims-not-world-size" not in out and "Memory per GPU" in out


def test_fsdp_and_zero3_jobs_decide_the_full_shard_nvlink_coupling(cli, tmp_path):
    # newuser3 #9: the coupling zero-3-fsdp/requires/nvlink-nvswitch read sharding_strategy, which no training reader
    # set, so it was "not evaluable" on every FSDP job. Now: FULL_SHARD over 8 GPUs stays inside one 8-GPU NVLink
    # domain (holds); ZeRO-3 (FULL_SHARD over DP) on 64 GPUs spans 8 nodes (warns); HYBRID_SHARD on 64 holds.
    def acc(strategy, machines, procs):
        p = tmp_path / f"acc_{strategy}_{procs}.yaml"
        p.write_text(f"distributed_type: FSDP\nmixed_precision: bf16\nnum_machines: {machines}\nnum_processes: {procs}\n"
                     f"fsdp_config:\n  fsdp_sharding_strategy: {strategy}\n  fsdp_version: 2\n")
        return str(p)
    # newuser6 #11 h: a hand rule refines the coupling ("requires NVLink, which the stack does not use" on H100-SXM)
    rule = "fsdp-full-shard-spans-nodes"
    for path, fired in ((acc("FULL_SHARD", 1, 8), False), (acc("HYBRID_SHARD", 8, 64), False),
                        (acc("FULL_SHARD", 8, 64), True)):
        code, out, err = cli("check", path, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--no-speed",
                             "--format", "json")
        d = json.loads(out)
        assert rule not in [n["rule_id"] for n in d["not_evaluable"]], path
        assert (rule in [f["rule_id"] for f in d["findings"]]) is fired, path
    ds = tmp_path / "ds.json"
    ds.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}, "bf16": {"enabled": true}}')
    code, out, err = cli("check", str(ds), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--count", "64",
                         "--no-speed")
    assert "missing sharding_strategy" not in out and "requires NVLink" not in out
    assert (f"WARN  {rule}: Full sharding over more GPUs than one NVLink domain" in out
            and "FULL_SHARD over a shard group of 64 GPUs spans 8 NVLink domains of 8 GPUs" in " ".join(out.split()))


def test_a_generic_train_py_says_the_hf_trainer_framework_was_assumed(cli):
    # newuser3 #15: `torchrun train.py --lr 3e-4` was labelled hf-trainer with nothing saying it was the fallback reader
    code, out, err = cli("check", "--train", "torchrun --nproc_per_node 8 train.py --lr 3e-4", "--model",
                         "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--no-speed")
    assert "  framework: hf-trainer (assumed)   model: meta-llama/Meta-Llama-3.1-8B" in out
    assert ("note: assumed: framework hf-trainer because no framework claims train.py and none of its flags is an HF "
            "TrainingArguments / TRL one (--lr not TrainingArguments); only the launch's layout was read, so little "
            "was checked") in out
    code, out, err = cli("check", "--train", "torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2",
                         "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--no-speed", "--format", "json")
    assert "framework_assumed" not in json.loads(out)["stack"]


def test_torchtitan_fsdp_over_cp_without_dp_gets_no_zero1_needs_dp_info(cli, tmp_path):
    # torchtitan shards with FSDP2 over dp_shard x cp (0.3.0 parallel_dims.py:692-693 fsdp_enabled): CP 2 at DP 1
    # still splits the states over 2 GPUs; a Megatron distributed optimizer at DP 1 keeps the info
    toml = tmp_path / "cp.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n'
                    '[parallelism]\ndata_parallel_shard_degree = 1\ncontext_parallel_degree = 2\n')
    code, out, err = cli("check", str(toml), "--gpu", "H100", "--count", "2", "--no-speed")
    assert "coupling-zero-1-requires-data-parallelism" not in out.split("Could not be evaluated")[0]
    code, out, err = cli("check", "--train", "torchrun --nproc_per_node 1 pretrain_gpt.py --use-distributed-optimizer "
                         "--micro-batch-size 1 --global-batch-size 8 --seq-length 1024", "--model",
                         "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--no-speed")
    assert "INFO  coupling-zero-1-requires-data-parallelism: ZeRO-1 requires DP" in out


VERL_FSDP = ("python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen3-8B "
             "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 trainer.n_gpus_per_node=8 "
             "data.max_prompt_length=1024 data.max_response_length=2048")


def test_verl_fsdp_job_gets_no_megatron_estimator_block(cli):
    # Megatron-LM's theoretical memory (unsharded, 250 GB) beside an FSDP actor's 39 GB was noise; a Megatron actor keeps it
    d = json.loads(cli("check", "--train", VERL_FSDP, "--gpu", "H100", "--no-speed", "--format", "json")[1])
    assert d["stack"]["settings"]["fsdp_sharding"] == "full_shard" and "megatron_theoretical" not in d["derived"]
    d = json.loads(cli("check", "--train", VERL_FSDP + " actor_rollout_ref.actor.strategy=megatron", "--gpu", "H100",
                       "--no-speed", "--format", "json")[1])
    assert "megatron_theoretical" in d["derived"]


def test_megatron_head_dim_and_attention_defaults_are_facts_not_missing(cli):
    # head_dim = 8192 / 64 = 128 from the given arguments; megatron-core 0.16.1 TransformerConfig defaults
    # attention_backend auto (transformer_config.py:110) and recompute_modules ["core_attn"] (:1193-1194)
    cmd = ("torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py --tensor-model-parallel-size 4 "
           "--pipeline-model-parallel-size 2 --num-layers 80 --hidden-size 8192 --num-attention-heads 64 "
           "--group-query-attention --num-query-groups 8 --ffn-hidden-size 28672 --seq-length 8192 --micro-batch-size 1 "
           "--global-batch-size 512 --bf16 --use-flash-attn --recompute-activations --sequence-parallel")
    d = json.loads(cli("check", "--train", cmd, "--gpu", "H100", "--no-speed", "--format", "json")[1])
    missing = {n["rule_id"] for n in d["not_evaluable"]}
    assert {"coupling-flash-attention-requires-head-dim",
            "coupling-activation-checkpointing-conflicts-with-flash-attention"} & missing == set()
    assert "coupling-activation-checkpointing-conflicts-with-flash-attention" not in {f["rule_id"] for f in d["findings"]}


MIXTRAL_FLAGS = ("torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --seq-length 4096 --max-position-embeddings 32768 "
                 "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --normalization "
                 "RMSNorm --swiglu --untie-embeddings-and-output-weights --group-query-attention --num-query-groups 8 "
                 "--num-experts 8 --moe-router-topk 2 --micro-batch-size 1 --global-batch-size 256 --bf16 "
                 "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4 --expert-model-parallel-size 8 "
                 "--use-distributed-optimizer --sequence-parallel --tokenizer-type Llama2Tokenizer")


def test_megatron_moe_without_moe_ffn_hidden_size_sizes_experts_at_ffn_hidden_size(cli):
    # newuser5 #10 (Megatron-LM's Mixtral 8x7B recipe flags): megatron-core 0.16.1 transformer_config.py:1054-1055
    # sets moe_ffn_hidden_size = ffn_hidden_size when it is not given; the activations read 'x None' (0 wide)
    code, out, _ = cli("check", "--train", MIXTRAL_FLAGS, "--gpu", "H100")
    assert "MoE: 32 layers store activations for top-2 experts x 14336 per token" in out, out
    assert "x None per token" not in out


def test_megatron_job_without_a_vocabulary_says_its_total_leaves_out_the_embedding(cli):
    # Llama2Tokenizer reads its vocabulary from --tokenizer-model, which the command does not give: the embedding,
    # output layer and logits are 0 in the estimate, and the report says so beside the total
    code, out, _ = cli("check", "--train", MIXTRAL_FLAGS, "--gpu", "H100")
    assert ("vocabulary size not known (give --vocab-size, --tokenizer-model or a model): the embedding, output layer "
            "and logits are not counted, so the total is low") in out, out
    code, out, _ = cli("check", "--train", MIXTRAL_FLAGS + " --vocab-size 32000", "--gpu", "H100")
    assert "vocabulary size not known" not in out


@pytest.mark.parametrize("device,label,where", [
    ("nvme", "on NVMe (offload)", "optimizer states and fp32 grads on NVMe (the host keeps pinned buffers)"),
    ("cpu", "on the host (offload)", "optimizer states and fp32 grads on the host")])
def test_deepspeed_offload_says_where_the_states_go(cli, tmp_path, device, label, where):
    # newuser5 #19k: ZeRO-Infinity's device nvme keeps the offloaded states on the SSD, not in host DRAM
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {
        "stage": 3, "offload_optimizer": {"device": device}, "offload_param": {"device": device}}}))
    code, out, _ = cli("check", "--train", f"deepspeed --num_gpus 8 train.py --deepspeed {ds}", "--model",
                       "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--seq-length", "4096")
    assert f"\n  {label:<30} " in out and where in " ".join(out.split()), out
