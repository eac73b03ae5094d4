"""DeepSpeed JSON keys against deepspeed 0.19.8 (kg/frameworks/deepspeed/keys.py, newuser3 #5): a key outside a pydantic
section's fields is an ERROR (extra="forbid"), a repeated key is an ERROR when DeepSpeed reads the file (a note through
the HF Trainer, whose json.load keeps the last), a misspelt top-level key is a note (DeepSpeed ignores it)."""
import json

import pytest
from report_text import cli  # noqa: F401  (the CLI with the report's wrapping undone)

ARGS = ("--model", "meta-llama/Llama-3.1-8B", "--count", "8", "--gpu", "H100", "--no-speed")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds")
    (d / "typos.json").write_text(json.dumps({
        "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "optimzer": {"type": "AdamW"},
        "zero_optimization": {"stage": 2, "overlap_com": True, "contigous_gradients": True,
                              "offload_optimizer": {"devic": "cpu"}}}, indent=1))
    (d / "aliases.json").write_text(json.dumps({
        "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "optimizer": {"type": "AdamW"},
        "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e7, "prefetch_bucket_size": 5e7,
                              "overlap_comm": True, "offload_optimizer": {"device": "cpu", "pin_memory": True}}}))
    (d / "dup.json").write_text('{\n "train_micro_batch_size_per_gpu": 1,\n "zero_optimization": {"stage": 2},\n'
                                ' "zero_optimization": {"stage": 3}\n}\n')
    return d


def test_misspelt_zero_keys_are_refused_with_the_nearest_field(cli, files):
    code, out, err = cli("check", str(files / "typos.json"), *ARGS)
    p = files / "typos.json"
    assert code == 1
    assert (f"ERROR deepspeed-config-unknown-key: deepspeed 0.19.8 refuses this configuration at startup\n"
            f"      {p}:11: zero_optimization.overlap_com: overlap_com is not a field of DeepSpeedZeroConfig (did you mean "
            f"overlap_comm?); {p}:12: zero_optimization.contigous_gradients: contigous_gradients is not a field of "
            f"DeepSpeedZeroConfig (did you mean contiguous_gradients?); {p}:14: zero_optimization.offload_optimizer.devic:"
            f" devic is not a field of DeepSpeedZeroOffloadOptimizerConfig (did you mean device?)") in out
    assert (f"note: {p}:6: optimzer: not a key deepspeed 0.19.8 reads; it ignores unknown top-level keys, so this "
            "section is not applied (did you mean optimizer?)") in out


def test_field_names_and_aliases_are_accepted(cli, files):
    code, out, err = cli("check", str(files / "aliases.json"), *ARGS)
    assert "deepspeed-config-unknown-key" not in out and "not a key deepspeed" not in out


def test_a_repeated_key_is_refused_by_deepspeed_and_a_note_through_the_hf_trainer(cli, files):
    p = files / "dup.json"
    code, out, err = cli("check", str(p), *ARGS)
    assert code == 1
    assert (f"ERROR deepspeed-config-duplicate-key: deepspeed 0.19.8 refuses this configuration at startup\n"
            f"      {p}:4: duplicate key 'zero_optimization' (lines 3, 4) (ValueError \"Duplicate keys in DeepSpeed "
            "config\", runtime/config.py:444)") in out
    code, out, err = cli("check", "--train", f"torchrun --nproc_per_node 8 train.py --deepspeed {p}", *ARGS[:2],
                         "--gpu", "H100", "--no-speed")
    assert "deepspeed-config-duplicate-key" not in out
    assert (f"note: {p}:4: duplicate key 'zero_optimization' (lines 3, 4): deepspeed refuses the file (\"Duplicate keys "
            "in DeepSpeed config\"); read through the HF Trainer / accelerate (json.load) the last one wins, and this "
            "report reads the last one") in out


def test_precision_monitor_and_tensor_parallel_sections_refuse_keys_outside_their_models():
    # deepspeed 0.19.8 builds DeepSpeedFP16Config / DeepSpeedBF16Config (runtime/precision_config.py:38, :97),
    # TensorBoardConfig (monitor/config.py:12-14) and TPTrainingConfig (tensor_parallel/config.py:151) from these
    # sections, each with extra="forbid"
    from kg.frameworks.deepspeed.keys import check_keys
    bad = {"fp16": {"enabled": True, "loss_scale_windw": 1000}, "bf16": {"enabled": False, "immediate_grad_updates": 1},
           "tensorboard": {"enabled": True, "output_dir": "tb"}, "tensor_parallel": {"autotp_sizes": 2}}
    got = [(p["section"], p["key"], p["near"]) for p in check_keys(bad, "ds.json", lambda *a: ".".join(a), [])]
    assert got == [("bf16", "immediate_grad_updates", " (did you mean immediate_grad_update?)"),
                   ("fp16", "loss_scale_windw", " (did you mean loss_scale_window?)"),
                   ("tensorboard", "output_dir", " (did you mean output_path?)"),
                   ("tensor_parallel", "autotp_sizes", " (did you mean autotp_size?)")]
    # the HF Trainer's documented ZeRO-3 JSON (transformers docs, deepspeed.md): every key a field
    ok = {"fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
                   "hysteresis": 2, "min_loss_scale": 1}, "bf16": {"enabled": "auto"},
          "wandb": {"enabled": True, "project": "p"}, "timers": {"throughput": {"enabled": True}}}
    assert check_keys(ok, "ds.json", lambda *a: ".".join(a), []) == []


def test_deepspeed_attribute_names_as_keys_point_at_the_keys_deepspeed_reads(cli, tmp_path):
    # comms_config / monitor_config are DeepSpeedConfig attributes (runtime/config.py:505-506), read from
    # "comms_logger" and the four monitor keys; difflib offered "ds_config" and "ckpt_config". A top-level key with no
    # near match (cuda_visible_devices) was ignored without a word
    p = tmp_path / "ds.json"
    p.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},
                             "comms_config": {"verbose": False}, "monitor_config": {"enabled": True},
                             "cuda_visible_devices": "0,1"}, indent=1))
    code, out, err = cli("check", str(p), *ARGS)
    ignored = "not a key deepspeed 0.19.8 reads; it ignores unknown top-level keys, so this section is not applied"
    assert f"note: {p}:6: comms_config: {ignored} (did you mean comms_logger?)" in out
    assert f"note: {p}:9: monitor_config: {ignored} (did you mean tensorboard, wandb, csv_monitor or comet?)" in out
    assert f"note: {p}:12: cuda_visible_devices: {ignored}\n" in out
