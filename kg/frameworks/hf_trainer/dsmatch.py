"""The HF Trainer's check of a DeepSpeed JSON against TrainingArguments: it fills each ``"auto"`` value from the
arguments and refuses a value that is given and differs (transformers 5.24.0 integrations/deepspeed.py: fill_match
:108-132, trainer_config_process :136-192; trainer_config_finalize raises at :258-263 when deepspeed_init runs in
train(), trainer.py:1730). The JSON reaches it through TrainingArguments ``--deepspeed FILE`` (training_args.py:1710-1711)
or an accelerate config's deepspeed_config_file (propagate_args_to_deepspeed, integrations/deepspeed.py:704-718).
Public reports: transformers#27830 (ds train_micro_batch_size_per_gpu=1 vs hf per_device_train_batch_size=8),
shibing624/MedicalGPT#191 (ds fp16.enabled=True without --fp16), CarperAI/trlx#376 (ds train_batch_size=32 vs 4).

Not compared: scheduler total_num_steps and warmup_num_steps (they need the dataset's step count), and learning rate /
bf16 left at a TRL or LLaMA-Factory trainer's own default (its config class overrides TrainingArguments' default).
"""
from __future__ import annotations

from typing import Any

from kg.frameworks.hf_trainer.generated import HERE, PINNED, fields, world_size

URL = f"https://github.com/huggingface/transformers/blob/v{PINNED}/src/transformers/integrations/deepspeed.py#L258-L263"
# (DeepSpeed key, the TrainingArguments name HF prints, the fields it is built from); the order of trainer_config_process
PAIRS = (("train_micro_batch_size_per_gpu", "per_device_train_batch_size", ("per_device_train_batch_size",)),
         ("gradient_accumulation_steps", "gradient_accumulation_steps", ("gradient_accumulation_steps",)),
         ("train_batch_size", "train_batch_size (calculated)", ("per_device_train_batch_size",
                                                                "gradient_accumulation_steps")),
         ("gradient_clipping", "max_grad_norm", ("max_grad_norm",)),
         ("optimizer.params.lr", "learning_rate", ("learning_rate",)),
         ("optimizer.params.betas", "adam_beta1+adam_beta2", ("adam_beta1", "adam_beta2")),
         ("optimizer.params.eps", "adam_epsilon", ("adam_epsilon",)),
         ("optimizer.params.weight_decay", "weight_decay", ("weight_decay",)),
         ("scheduler.params.warmup_max_lr", "learning_rate", ("learning_rate",)),
         ("fp16.enabled", "fp16|fp16_full_eval", ("fp16", "fp16_full_eval")),
         ("bf16.enabled", "bf16|bf16_full_eval", ("bf16", "bf16_full_eval")))
# fields whose default a trainer's own config class overrides (trl 1.16.0 base_config.py:68-108 bf16 defaults to
# not fp16; SFTConfig learning_rate 2e-5, sft_config.py:140-141)
OVERRIDDEN = ("learning_rate", "bf16")


def _node(cfg: dict, key: str) -> tuple[dict | None, str]:
    *parents, last = key.split(".")
    for p in parents:
        cfg = cfg.get(p) if isinstance(cfg, dict) else None
        if not isinstance(cfg, dict):
            return None, last
    return cfg, last


def mismatches(job: Any) -> list[str]:
    """``ds <key>=<value> vs hf <name>=<value>`` for each JSON value the Trainer would refuse, as HF prints them."""
    from kg.frameworks.checkrows import argument_value
    ds, given = job.configs.get("deepspeed"), job.configs.get("training_arguments")
    if not isinstance(ds, dict) or given is None or not job.configs.get("deepspeed_integration") \
            or job.configs.get("framework_assumed") or job.configs.get("deepspeed_direct"):
        return []
    spec = fields(HERE / "data" / f"training-arguments-{PINNED}.yaml")
    # the defaults hold for a script that parses TrainingArguments from its command (HfArgumentParser): it gives a
    # field besides --deepspeed, which a script of its own argparse may take and build TrainingArguments from its
    # own values; with --deepspeed alone only flags given are compared
    parsed = any(k in spec and k != "deepspeed" for k in given)
    own_defaults = bool(job.get("trainer"))  # a TRL / LLaMA-Factory trainer's config class

    def value(name: str) -> tuple[Any, bool]:
        if name in given:
            return argument_value(given[name], spec[name].get("type", "str")), True
        if not parsed or (own_defaults and name in OVERRIDDEN):
            return None, False
        return spec[name].get("default"), True

    auto_find = value("auto_find_batch_size")[0] is True
    ws = world_size(job)
    out = []
    for key, label, names in PAIRS:
        node, leaf = _node(ds, key)
        if node is None or node.get(leaf) in (None, "auto"):
            continue
        vals = [value(n) for n in names]
        if not all(known for _, known in vals):
            continue
        v = [x for x, _ in vals]
        if key == "train_batch_size":
            if auto_find or ws is None:
                continue
            hf = ws * v[0] * v[1]
        elif key == "train_micro_batch_size_per_gpu" and auto_find:
            continue
        elif key == "optimizer.params.betas":
            hf = v
        elif key.endswith(".enabled"):
            hf = bool(v[0] or v[1])
        else:
            hf = v[0]
        if node[leaf] != hf:
            how = f" = {ws} processes x {v[0]} x {v[1]}" if key == "train_batch_size" else ""
            out.append(f"ds {key}={node[leaf]!r} vs hf {label}={hf!r}{how}"
                       + ("" if any(n in given for n in names) else " (default)"))
    return out


def findings(job: Any) -> list[dict[str, Any]]:
    bad = mismatches(job)
    if not bad:
        return []
    return [{"rule_id": "hf-trainer-deepspeed-config-mismatch", "package": "transformers", "release": PINNED,
             "path": "transformers/integrations/deepspeed.py", "line": 258,
             "message": "the DeepSpeed JSON gives values that differ from the TrainingArguments the HF Trainer fills "
                        "them from; set them to \"auto\" or pass the same flags",
             "values": "; ".join(bad),
             "expr": "fill_match: a JSON value that is not \"auto\" != the TrainingArguments value (:108-132)",
             "url": URL, "table": ""}]
