"""Megatron-LM / Megatron-core: ``pretrain_*.py`` commands (reader), its padded vocabulary, fp32 main
gradients, distributed optimizer and its own theoretical memory estimate (memory)."""
from __future__ import annotations

from typing import Any

from kg.frameworks.protocol import Release, SpeedTraits, TrainingFramework

# Megatron-LM megatron/training/arguments.py: --make-vocab-size-divisible-by default 128 (the padding
# multiple, times TP); megatron-core releases the training rules were read against (rules/training.yaml
# evidence: 0.9.0, 0.12.0, 0.16.1)
_DEFAULTS = {"make_vocab_size_divisible_by": 128, "grad_dtype": "fp32"}


class Megatron(TrainingFramework):
    id = "megatron"
    name = "Megatron-LM / Megatron Core"
    aliases = ("megatron-lm", "megatron-core", "mcore")
    package = "megatron-core"
    command_reader = "megatron"
    releases = (Release("0.9.0", "megatron-core 0.9.0 wheel", _DEFAULTS),
                Release("0.12.0", "megatron-core 0.12.0 wheel", _DEFAULTS),
                Release("0.16.1", "megatron-core 0.16.1 wheel", _DEFAULTS))
    # the reference kernels of kg/speed/training/constants.yaml; nothing overlaps unless asked: DDP overlap_grad_reduce and
    # ModelParallelConfig.tp_comm_overlap default False (core_v0.16.1 megatron/core/distributed/
    # distributed_data_parallel_config.py:14, megatron/core/model_parallel_config.py:186); --recompute-granularity
    # selective recomputes the core attention only (Korthikanti et al. 2022 §4.1; transformer_block.py)
    speed_backend = SpeedTraits("megatron", tp_overlap=False, dp_overlap=False, selective_gemm_recompute=0.0,
                                source="megatron-core 0.16.1 distributed_data_parallel_config.py:14, "
                                       "model_parallel_config.py:186")

    def claims_command(self, cmd: Any, args: str, script: str) -> int:
        from kg.frameworks.megatron.reader import is_megatron_command
        return 70 if is_megatron_command(args, script) else 0

    def read_command(self, text, model, where, base_dir, resolver):
        from kg.frameworks.megatron.reader import parse_megatron_command
        return parse_megatron_command(text, model, where, base_dir=base_dir)

    def padded_vocab(self, vocab: int, tp: int, job: Any) -> int:
        from kg.frameworks.megatron.memory import padded_vocab_size
        return padded_vocab_size(vocab, tp, job.get("make_vocab_size_divisible_by", 128))

    def grad_dtype_default(self, job: Any) -> str:
        return "fp32"  # Megatron accumulates into fp32 main_grad buffers (accumulate_allreduce_grads_in_fp32)

    def implied_settings(self, job: Any, parallel) -> dict[str, Any]:
        """megatron-core 0.16.1 TransformerConfig defaults the couplings read: ``attention_backend`` auto
        (--attention-backend; transformer_config.py:110), ``megatron_recompute_overridden`` (the
        --recompute-granularity that --recompute-activations overrides, else "") and, with
        selective recompute, ``recompute_modules`` ["core_attn"] (transformer_config.py:1193-1194)."""
        out: dict[str, Any] = {"attention_backend": str(job.native.get("--attention-backend") or "auto")}
        asked = job.native.get("--recompute-granularity")
        # --recompute-activations turns any --recompute-granularity into selective (kg.frameworks.megatron.reader)
        out["megatron_recompute_overridden"] = asked if "--recompute-activations" in job.native and \
            isinstance(asked, str) and asked != "selective" else ""
        if "--recompute-modules" not in job.native:
            out["recompute_modules"] = ["core_attn"]
        return out

    def wording(self) -> dict[str, str]:
        return {"params": "parameters: Megatron's most loaded shard, (layers of the first stage + embedding)/TP, "
                          "routed experts /EP",
                "schedule": "1F1B", "schedule_interleaved": "interleaved 1F1B"}

    def generated_checks(self, job: Any) -> list[dict[str, Any]]:
        from kg.frameworks.megatron.generated import findings
        if job.framework != self.id:
            return []
        return refused_arguments(job) + findings(job)

    def cross_checks(self, job, memory, shape, parallel) -> dict[str, Any]:
        from kg.frameworks.megatron.memory import theoretical_cross_check
        return {"megatron_theoretical": theoretical_cross_check(job, shape, parallel)}


def refused_arguments(job: Any) -> list[dict[str, Any]]:
    """The options Megatron's parser refuses (kg.frameworks.megatron.reader._unknown_arguments), as one finding."""
    refused = job.configs.get("megatron_refused_args") or []
    if not refused:
        return []
    return [{"rule_id": "megatron-unrecognized-argument", "package": "Megatron-LM", "release": "core_v0.16.1",
             "path": "megatron/training/arguments.py", "line": 102,
             "message": "; ".join(f"{f} is not an option of Megatron-LM core_v0.16.1 (did you mean {near}?)"
                                  for f, near in refused)
             + "; this report reads the job without " + ("it" if len(refused) == 1 else "them"),
             "values": "argparse allow_abbrev=False, parser.parse_args(): error: unrecognized arguments",
             "expr": "an option add_megatron_arguments does not define",
             "url": "https://github.com/NVIDIA/Megatron-LM/blob/core_v0.16.1/megatron/training/arguments.py",
             "table": "kg/frameworks/megatron/data/parser-options-core_v0.16.1.txt"}]


FRAMEWORKS = (Megatron(),)
