"""The batch sizes the Hugging Face Trainer runs with when the job does not give them.

A script that takes TrainingArguments flags (HfArgumentParser) trains at ``per_device_train_batch_size`` 8 and
``gradient_accumulation_steps`` 1 unless told otherwise (transformers 5.24.0 ``training_args.py:777`` and
``:849-850``; TRL's configs inherit both, kg/frameworks/trl/data/grpo-config-1.16.0.yaml). A DeepSpeed JSON whose
``train_micro_batch_size_per_gpu`` is ``"auto"`` is only usable through that integration, which fills it from the
same TrainingArguments (``integrations/deepspeed.py:143-160``, ``trainer_config_process``). Sizing such a job at
micro batch 1, or leaving the step "not evaluable", would be a wrong or a missing answer where the value is known:
the defaults are set, with a note naming them.
"""
from __future__ import annotations

from typing import Any

from kg.frameworks.hf_trainer.generated import HERE, PINNED, fields

MICRO_SITE = f"transformers {PINNED} training_args.py:777"
ACCUM_SITE = f"transformers {PINNED} training_args.py:849-850"
AUTO_SITE = f"transformers {PINNED} integrations/deepspeed.py:143-160"


def trainer_runs_it(job: Any) -> str | None:
    """Why the HF Trainer's TrainingArguments decide the job's batch (a phrase for the note), or None."""
    given = job.configs.get("training_arguments")
    if given and not job.configs.get("framework_assumed"):
        known = fields(HERE / "data" / f"training-arguments-{PINNED}.yaml")
        if any(k in known for k in given):
            return "the script takes TrainingArguments flags"
    ds = job.configs.get("deepspeed")
    if isinstance(ds, dict) and ds.get("train_micro_batch_size_per_gpu") == "auto":
        return ("the DeepSpeed JSON's train_micro_batch_size_per_gpu is \"auto\", which the HF Trainer fills "
                f"from TrainingArguments ({AUTO_SITE})")
    return None


def apply_trainer_defaults(job: Any) -> None:
    """Set ``micro_batch_size`` 8 and ``gradient_accumulation_steps`` 1 (TrainingArguments' defaults) on a job the HF
    Trainer runs that leaves them open; a note names each default taken. Idempotent."""
    why = trainer_runs_it(job)
    if why is None:
        return
    taken = []
    if "micro_batch_size" not in job.settings:
        job.set("micro_batch_size", 8, f"TrainingArguments default per_device_train_batch_size ({MICRO_SITE})")
        taken.append(f"micro batch 8 (per_device_train_batch_size, {MICRO_SITE})")
    if "gradient_accumulation_steps" not in job.settings and "global_batch_size" not in job.settings:
        job.set("gradient_accumulation_steps", 1,
                f"TrainingArguments default gradient_accumulation_steps ({ACCUM_SITE})")
        taken.append(f"gradient accumulation 1 ({ACCUM_SITE})")
    if taken:
        job.notes.append(f"assumed the HF Trainer's defaults, as {why}: {'; '.join(taken)}; give "
                         "--per_device_train_batch_size / --gradient_accumulation_steps (or --micro-batch-size) "
                         "if the script sets others")


LF_SITE = "LLaMA-Factory@ff6d4d12 model/model_utils/checkpointing.py:184-194 (hparams/model_args.py:145-150)"
TRL_SITE = "trl 0.22.0 sft_config.py:111-112 / 1.16.0 base_config.py:62-63"


def apply_checkpointing_default(job: Any) -> None:
    """Gradient checkpointing a framework switches on without a flag (``job.configs["gc_default"]``, set by the HF
    reader): LLaMA-Factory's prepare_model_for_training unless disable_gradient_checkpointing, reentrant unless FSDP2
    (use_reentrant_gc default true, checkpointing.py:179-182); a TRL trainer's config class from trl 0.22.0 (non-reentrant
    in trl 1.16.0 and transformers 5). Full recompute of each decoder layer, with a note. Idempotent."""
    from kg.core.relcmp import older_than
    kind = job.configs.get("gc_default")
    if not kind or "recompute_granularity" in job.settings:
        return
    if kind == "trl" and job.framework == "trl" and job.framework_version \
            and older_than(job.framework_version, "0.22.0"):
        return  # the GRPO job's TRL release is known and keeps TrainingArguments' false
    job.set("recompute_granularity", "full", f"{kind} default gradient checkpointing")
    if kind == "llamafactory":
        job.settings.setdefault("use_reentrant", job.get("fsdp_version") != 2)
        job.notes.append(f"gradient checkpointing on (full recompute): LLaMA-Factory enables it unless "
                         f"disable_gradient_checkpointing: true ({LF_SITE})")
    else:
        job.settings.setdefault("use_reentrant", False)
        job.notes.append(f"gradient checkpointing on (full recompute): TRL trainers default gradient_checkpointing "
                         f"true from trl 0.22.0 ({TRL_SITE}); pass --gradient_checkpointing false if yours is older "
                         "or turns it off")
