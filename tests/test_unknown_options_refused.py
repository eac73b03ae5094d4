"""A misspelled option is an error with the nearest spelling for TensorRT-LLM and Megatron too (as for vLLM, SGLang,
LMDeploy), where optkg's option table is complete for the source it was read from:

- trtllm-serve: every @click.option of `serve` at NVIDIA/TensorRT-LLM commit 00209af1 (catalog/engines/trtllm.yaml
  all_options); click refuses any other ("No such option").
- Megatron-LM core_v0.16.1: optkg's argument table is incomplete (a script's extra_args_provider, and
  --disable-bias-linear of Megatron's own examples, are not in it), so an option outside it stays ignored, with a
  note naming the table and the nearest argument; it is never called refused.
"""
from __future__ import annotations

from conftest import run_cli

TRT = "trtllm-serve Qwen/Qwen3-32B --tp_size 2"
MEG = ("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 8 --micro-batch-size 1 "
       "--global-batch-size 64 --seq-length 4096")


def _check(*argv: str) -> tuple[int, str]:
    code, out, err = run_cli("check", *argv, "--format", "text", "--no-speed")
    return code, " ".join((out + err).split())  # unwrapped


def test_trtllm_misspelled_option_is_refused_with_the_nearest_spelling():
    code, text = _check("--cmd", f"{TRT} --tensor_paralel_size 2", "--gpu", "H100", "--count", "2")
    assert code == 1
    assert ('trtllm-serve refuses to start (click: "Error: No such option"): --tensor_paralel_size is not an option '
            "of trtllm commit 00209af1 (trtllm-serve serve; release not pinned); did you mean --tensor_parallel_size?"
            ) in text
    assert "ignored (not modelled): --tensor_paralel_size" not in text


def test_trtllm_option_it_defines_but_optkg_does_not_model_stays_a_note():
    code, text = _check("--cmd", f"{TRT} --log_level debug --host 0.0.0.0", "--gpu", "H100", "--count", "2")
    assert code == 0, text[-400:]
    assert "trtllm-option-refused" not in text.split("held")[0]
    assert "ignored (not modelled): --log_level debug; --host 0.0.0.0" in text


def test_megatron_misspelt_option_is_refused_and_a_script_option_stays_a_note():
    # newuser3 #4: Megatron's parse_args is argparse(allow_abbrev=False).parse_args() (arguments.py:87-102 at
    # core_v0.16.1): a near miss of one of its 681 options is an ERROR; an option far from all of them may be the
    # script's extra_args_provider's, so it stays a note. --disable-bias-linear (missing from the old table) is known.
    code, text = _check("--train", f"{MEG} --sequence-paralel --my-script-flag 3 --disable-bias-linear", "--model",
                        "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    assert code == 1
    assert ("ERROR megatron-unrecognized-argument: Megatron-LM core_v0.16.1 refuses this configuration at startup "
            "--sequence-paralel is not an option of Megatron-LM core_v0.16.1 (did you mean --sequence-parallel?); "
            "this report reads the job without it (argparse allow_abbrev=False, parser.parse_args(): error: "
            "unrecognized arguments)") in text
    assert ("note: --sequence-paralel: read as absent (Megatron refuses it, see the ERROR); did you mean "
            "--sequence-parallel?") in text
    assert ("note: --my-script-flag: not an option of Megatron-LM core_v0.16.1's parser; Megatron refuses it unless the "
            "script's extra_args_provider adds it") in text
    assert "note: --disable-bias-linear" not in text and "--disable-bias-linear is not an option" not in text


def test_megatron_bridge_recipe_overrides_are_refused_not_read_as_a_default_megatron_lm_job():
    # Megatron-Bridge's Megatron-LM migration guide runs `python examples/models/llama/pretrain_llama3_8b.py
    # train.micro_batch_size=2 ... model.num_layers=32`: OmegaConf overrides, which Megatron-LM's argparse would call
    # "unrecognized arguments". Read as Megatron-LM it was TP 1 and 3 ERRORs about num_layers/hidden_size never given.
    import pytest

    from kg.core.errors import OptkgError
    from kg.inputs.training import parse_training_command
    bridge = ("torchrun --nproc_per_node=8 examples/models/llama/pretrain_llama3_8b.py "
              "model.tensor_model_parallel_size=2 train.global_batch_size=128 train.micro_batch_size=1")
    with pytest.raises(OptkgError, match=r"^--train: pretrain_llama3_8b.py takes config overrides "
                                         r"\(model.tensor_model_parallel_size=2 and 2 more\): a Megatron-Bridge"):
        parse_training_command(bridge, where="--train")
    # a Megatron-LM value that merely contains '=' is not an override
    job = parse_training_command(f"{MEG} --data-path /d/a=b", where="--train")
    assert job.get("tp_size") == 8
    # NeMo 1's megatron_gpt_pretraining.py falls back to hf-trainer (assumed): the note says the overrides went unread
    nemo = parse_training_command("torchrun --nproc_per_node=8 megatron_gpt_pretraining.py trainer.devices=8 "
                                  "model.tensor_model_parallel_size=2", where="--train")
    assert nemo.configs["framework_assumed"].endswith(
        "; its config overrides (trainer.devices=8, model.tensor_model_parallel_size=2) were not read; only the "
        "launch's layout was read, so little was checked")
