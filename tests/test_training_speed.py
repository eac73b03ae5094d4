"""kg.speed.training, the step-time model behind a training report's Speed section: FLOPs as Megatron-LM
counts them, the bytes each parallel group moves, the report section in text / JSON / HTML, and "not
evaluable" (with the reason) where no published row calibrates the job."""
import json
import re

import pytest

from report_text import cli  # noqa: F401  (the CLI with the report's wrapping undone)

JOB_70B = ("torchrun --nproc_per_node 8 --nnodes 64 pretrain_gpt.py --tensor-model-parallel-size 8 "
           "--pipeline-model-parallel-size 4 --sequence-parallel --use-distributed-optimizer --bf16 "
           "--micro-batch-size 1 --global-batch-size 1024 --seq-length 8192 --recompute-granularity selective")


def _speed(cli, *extra, job=JOB_70B, model="meta-llama/Llama-3.1-70B", gpu="H100"):
    code, out, err = cli("check", "--train", job, "--model", model, "--gpu", gpu, "--format", "json", *extra)
    assert code in (0, 1), err
    return json.loads(out)["speed"]


def test_model_flops_are_megatrons_per_token_count():
    """Llama 3.1 8B at s 8,192 (Megatron training.py core_v0.16.1:220, per token): 6 x 32 x (4,096 x (4,096 +
    2 x 1,024) + 4,096 x 4,096 + 3 x 4,096 x 14,336) + 6 x 4,096 x 8,192 x 32 (causal attention) + 6 x 4,096 x
    128,256 (logits) = 41,875,931,136 + 6,442,450,944 + 3,152,019,456 = 51,470,401,536."""
    from kg.inputs.modelcfg import resolve_model
    from kg.inputs.training.job import TrainingJob
    from kg.speed.training.flops import forward_flops
    job = TrainingJob(framework="megatron", model=resolve_model("meta-llama/Llama-3.1-8B"))
    fl = forward_flops(job.shape(), 8192, 128256)
    assert fl.model / 8192 == 51_470_401_536


def test_tp_and_dp_bytes_per_gpu_follow_the_layout(cli):
    """TP 8 with SP: 8 collectives x 7/8 of one micro-batch's activations (1 x 8,192 x 8,192 x 2 B) x 20 layers
    per stage = 18,790,481,920 B per micro-batch over NVLink. DP 16 with the distributed optimizer: 15/16 x
    (70,566,289,408 / 32 parameters per GPU) x (2 B gradient reduce-scatter + 2 B parameter all-gather) =
    8,269,487,040 B per step over the network (DP spans nodes)."""
    sp = _speed(cli)
    comm = {c["kind"]: c for c in sp["communication"]}
    assert comm["TP"]["bytes"] == 18_790_481_920 and comm["TP"]["link"] == "NVLink" and comm["TP"]["per"] == "micro-batch"
    assert comm["DP"]["bytes"] == pytest.approx(8_269_487_040) and comm["DP"]["link"] == "network"
    assert not comm["TP"]["overlapped"]  # Megatron's tp_comm_overlap defaults to False
    assert sp["bubble_fraction"] == round(3 / 64, 4)


def test_a_ring_across_nodes_runs_on_every_nic_its_group_has_in_a_node(cli):
    """TP 8 x DP 64 on H100 (8 GPUs and 8 x 50 GB/s NICs per node): each DP group has one rank per node, so its
    ring crosses nodes on one NIC, 50 GB/s. FSDP over 16 GPUs (TP 1): 8 of the group's ranks per node, NCCL
    runs a channel per NIC, 8 x 50 = 400 GB/s, under NVLink's 900 / 2 = 450 GB/s (NVIDIA/nccl-tests#29: 4 IB
    adapters give DGX-1 48 GB/s)."""
    comm = {c["kind"]: c for c in _speed(cli)["communication"]}
    assert comm["DP"]["link_bytes_per_s"] == 50e9 and comm["DP"]["link"] == "network"
    fsdp = _speed(cli, job="torchrun --nproc_per_node 8 --nnodes 2 train.py --fsdp full_shard --bf16 "
                           "--per_device_train_batch_size 2 --gradient_accumulation_steps 1 --max_seq_length 2048",
                  model="meta-llama/Llama-3.1-8B")
    ring = {c["kind"]: c for c in fsdp["communication"]}["FSDP/ZeRO-3"]
    assert ring["link_bytes_per_s"] == 400e9 and ring["link"] == "network, 8 NICs per node"


def test_speed_numbers_are_one_consistent_step(cli):
    sp = _speed(cli)
    assert sp["evaluable"]
    assert sp["tokens_per_s_per_gpu"] * 512 * sp["step_time_s"] == pytest.approx(1024 * 8192)
    assert sp["step_time_s"] == pytest.approx(sum(sp["terms"].values()))
    assert sp["mfu"] == pytest.approx(sp["model_tflops_per_gpu"] / 989)
    assert sp["hfu"] > sp["mfu"]  # selective recomputation runs the core attention again
    assert "fitted" in sp["constants"]["source"] and sp["constants"]["efficiency_from"] == "H100-SXM BF16"


def test_overlap_flags_shrink_the_exposed_communication(cli):
    base = _speed(cli)
    over = _speed(cli, job=JOB_70B + " --tp-comm-overlap --overlap-grad-reduce")
    assert over["terms"]["tp"] < base["terms"]["tp"] and over["terms"]["dp"] < base["terms"]["dp"]
    assert over["step_time_s"] < base["step_time_s"]


def test_text_report_prints_the_speed_section_within_100_columns(cli):
    code, out, err = cli("check", "--train", JOB_70B, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100")
    assert code == 0, err
    sec = out[out.index("Speed (estimate"):]
    assert re.search(r"step time [\d.,]+ s +[\d,]+ tokens/s per GPU", sec)
    assert re.search(r"MFU [\d.]+% of the dense BF16 peak 989 TFLOPS of H100-SXM", sec)
    assert "TP: 18.79 GB per GPU per micro-batch over NVLink" in sec


def _api_speed(framework="megatron", model="meta-llama/Llama-3.1-8B", gpu="H100", **settings):
    from kg import load_catalog
    from kg.analyses.training import training_facts
    from kg.inputs.modelcfg import resolve_model
    from kg.inputs.training.job import TrainingJob
    from kg.speed.training import training_speed
    base = {"micro_batch_size": 1, "global_batch_size": 64, "seq_length": 4096, "world_size": 8}
    job = TrainingJob(framework=framework, model=resolve_model(model),
                      settings={k: v for k, v in {**base, **settings}.items() if v is not None},
                      hardware=load_catalog().resolve_hardware(gpu))
    return training_speed(job, training_facts(job)[2])


@pytest.mark.parametrize("kw, reason", [
    ({"model": "Qwen/Qwen3-30B-A3B", "ep_size": 8}, "mixture-of-experts models: no published MoE row"),
    ({"gpu": "MI300X"}, "no published training row calibrates MI300X BF16 GEMMs"),
    ({"micro_batch_size": None}, "micro_batch_size is not given"),
    ({"global_batch_size": None}, "neither global_batch_size nor gradient_accumulation_steps is given"),
    ({"framework": "deepspeed", "zero_stage": 3}, "no step-time model for framework 'deepspeed'"),
])
def test_not_evaluable_says_which_fact_or_calibration_is_missing(kw, reason):
    sp = _api_speed(**kw)
    assert not sp["evaluable"] and reason in sp["reason"], sp


def test_the_api_estimates_a_calibrated_job():
    sp = _api_speed()
    assert sp["evaluable"] and sp["layout"]["microbatches"] == 8 and sp["constants"]["kernels"] == "megatron"


def test_a_job_that_does_not_fit_gets_no_speed(cli):
    sp = _speed(cli, job=JOB_70B.replace("--tensor-model-parallel-size 8", "--tensor-model-parallel-size 1")
                .replace("--nproc_per_node 8 --nnodes 64", "--nproc_per_node 8 --nnodes 8"))
    assert not sp["evaluable"] and ("does not start" in sp["reason"] or "memory per GPU" in sp["reason"])


def test_html_report_has_the_speed_tables(cli, tmp_path):
    code, _, err = cli("check", "--train", JOB_70B, "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100",
                       "--format", "html", "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert "<h3>Speed</h3>" in page and 'class="speed"' in page and "Tokens/s per GPU" in page


TT_70B = """[model]
name = "llama3"
flavor = "70B"

[training]
local_batch_size = 8
seq_len = 8192

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 8

[activation_checkpoint]
mode = "full"
"""


def test_torchtitan_fsdp_reduces_gradients_in_float32(cli, tmp_path):
    """newuser6 #11 g: torchtitan's training.mixed_precision_reduce is Literal["float32"] = "float32" (0.2.1
    config/job_config.py:282, 0.3.0 config/configs.py:93): per micro-batch two BF16 all-gathers and one FP32
    reduce-scatter of the 70,553,706,496 / 8 = 8,819,213,312 parameters per GPU over dp_shard 8:
    (2 + 2 + 4) x 7/8 x 8,819,213,312 = 61,734,493,184 B (was counted 2 + 2 + 2: 46,300,869,888 B)."""
    f = tmp_path / "llama3_70b.toml"
    f.write_text(TT_70B)
    code, out, err = cli("check", str(f), "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--count", "64",
                         "--format", "json")
    assert code in (0, 1), err
    comm = {c["kind"]: c for c in json.loads(out)["speed"]["communication"]}
    assert comm["FSDP/ZeRO-3"]["bytes"] == 8 * 7 * 8_819_213_312 / 8 == 61_734_493_184


def test_plain_fsdp_keeps_bf16_gradient_reduction(cli):
    # the other side: an accelerate FSDP job (framework fsdp) reduces in BF16: (2 + 2 + 2) x 7/8 x 8,030,261,248
    code, out, err = cli("check", "--train", "accelerate launch --num_processes 8 --use_fsdp --fsdp_sharding_strategy "
                         "FULL_SHARD --mixed_precision bf16 train.py --max_seq_length 4096 --per_device_train_batch_size 2 "
                         "--gradient_accumulation_steps 1", "--model", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100",
                         "--format", "json")
    assert code in (0, 1), err
    comm = {c["kind"]: c for c in json.loads(out)["speed"]["communication"]}
    assert comm["FSDP/ZeRO-3"]["bytes"] == 6 * 7 * 8_030_261_248 / 8 == 42_158_871_552
