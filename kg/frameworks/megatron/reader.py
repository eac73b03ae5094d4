"""Megatron-LM / Megatron-core training commands: ``torchrun ... pretrain_gpt.py --tensor-model-parallel-size ...``.

Flag names and meanings are Megatron-LM's ``megatron/training/arguments.py`` (NVIDIA/Megatron-LM
@d98e8a64); the launcher's ``--nproc_per_node`` × ``--nnodes`` gives the world size, and
``data_parallel_size = world / (TP × PP × CP)`` as Megatron's ``initialize_model_parallel``
computes it. ``--num-layers-per-virtual-pipeline-stage N`` gives ``vpp_size = (layers / PP) // N``
(arguments.py: ``virtual_pipeline_model_parallel_size = num_layers_per_pipeline_stage //
num_layers_per_virtual_pipeline_stage``; releases before the divisibility assert floored silently,
NVIDIA/Megatron-LM#468). Megatron's own model flags (``--num-layers``, ``--hidden-size``, ...)
win over the HF config given with the model. Flags optkg does not model are kept in ``ignored``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.inputs.modelcfg import ModelFacts
from kg.inputs.training.argv import config_overrides, split_command, walk_flags
from kg.inputs.training.job import TrainingJob, derive_virtual_pipeline

V, T, F = "value", "true", "false"
FLAGS: dict[str, tuple[str, Any]] = {
    "--tensor-model-parallel-size": (V, "tp_size"),
    "--pipeline-model-parallel-size": (V, "pp_size"),
    "--pipe-parallel-size": (V, "pp_size"),          # Megatron-LM v1.1.5-3D / DeepSpeedExamples, GPT-NeoX
    "--model-parallel-size": (V, "tp_size"),         # Megatron-LM v1 name of the tensor-parallel size
    "--checkpoint-activations": ("const:full", "recompute_granularity"),  # Megatron-LM v1 / Megatron-DeepSpeed
    "--num-layers-per-virtual-pipeline-stage": (V, "layers_per_virtual_stage"),
    "--num-virtual-stages-per-pipeline-rank": (V, "vpp_size"),
    "--virtual-pipeline-model-parallel-size": (V, "vpp_size"),
    "--decoder-first-pipeline-num-layers": (V, "num_layers_in_first_pipeline_stage"),
    "--decoder-last-pipeline-num-layers": (V, "num_layers_in_last_pipeline_stage"),
    "--context-parallel-size": (V, "cp_size"),
    "--expert-model-parallel-size": (V, "ep_size"),
    "--expert-tensor-parallel-size": (V, "etp_size"),
    "--sequence-parallel": (T, "sequence_parallel"),
    "--use-distributed-optimizer": (T, "distributed_optimizer"),
    "--optimizer-cpu-offload": ("const:cpu", "offload_optimizer"),
    "--optimizer": (V, "optimizer"),
    "--recompute-granularity": (V, "recompute_granularity"),
    "--recompute-activations": ("const:selective", "recompute_granularity"),
    "--recompute-num-layers": (V, "recompute_num_layers"),
    "--fp8-format": (V, "fp8_format"),
    "--fp8-recipe": (V, "fp8_recipe"),
    "--bf16": ("const:bf16", "params_dtype"),
    "--fp16": ("const:fp16", "params_dtype"),
    "--use-flash-attn": (T, "use_flash_attn"),
    "--tp-comm-overlap": (T, "tp_comm_overlap"),
    "--overlap-grad-reduce": (T, "overlap_grad_reduce"),
    "--micro-batch-size": (V, "micro_batch_size"),
    "--global-batch-size": (V, "global_batch_size"),
    "--seq-length": (V, "seq_length"),
    "--num-layers": (V, "num_layers"),
    "--hidden-size": (V, "hidden_size"),
    "--ffn-hidden-size": (V, "ffn_hidden_size"),
    "--num-attention-heads": (V, "num_attention_heads"),
    "--num-query-groups": (V, "num_query_groups"),
    "--kv-channels": (V, "kv_channels"),
    "--vocab-size": (V, "vocab_size"),
    "--make-vocab-size-divisible-by": (V, "make_vocab_size_divisible_by"),
    "--swiglu": (T, "swiglu"),
    "--untie-embeddings-and-output-weights": (T, "untie_embeddings_and_output_weights"),
    "--normalization": (V, "normalization"),
    "--num-experts": (V, "num_experts"),
    "--moe-ffn-hidden-size": (V, "moe_ffn_hidden_size"),
    "--moe-shared-expert-intermediate-size": (V, "moe_shared_expert_intermediate_size"),
    "--moe-router-topk": (V, "moe_router_topk"),
    "--moe-layer-freq": (V, "moe_layer_freq"),
    "--group-query-attention": (T, "_gqa"),
    "--tokenizer-model": (V, "_tokenizer_model"),
    "--tokenizer-type": (V, "_tokenizer_type"),
    "--vocab-file": (V, "_vocab_file"),
    "--world-size": (V, "world_size"),
    # Megatron-DeepSpeed (deepspeedai/Megatron-DeepSpeed megatron/arguments.py)
    "--zero-stage": (V, "zero_stage"),
}
RECOMPUTE = {"selective": "selective", "full": "full", "none": "none"}
MEGATRON_SCRIPTS = re.compile(r"^(pretrain_[a-z0-9_]+\.py|megatron)$")


def is_megatron_command(args: str, script: str) -> bool:
    """A Megatron script (``pretrain_*.py``, ms-swift's ``megatron``) or Megatron's own flags."""
    return bool(MEGATRON_SCRIPTS.search(script)) or "--tensor-model-parallel-size" in args or \
        "--tensor_model_parallel_size" in args or "--micro-batch-size" in args


def parse_megatron_command(text: str, model: ModelFacts | None = None, where: str = "--cmd",
                           framework: str = "megatron", base_dir: Path | None = None) -> TrainingJob:
    """A TrainingJob from a pasted Megatron-LM command (see module doc).

    ``model``: the HF config's facts (optional; Megatron's flags override its fields). Raises
    OptkgError naming the flag for a bad value, and when the command runs no training script.
    """
    cmd = split_command(text, where)
    job = TrainingJob(framework=framework, model=model, source=where, name=(cmd.script or "megatron").rsplit("/", 1)[-1])
    if cmd.script is None:
        raise OptkgError(f"{where}: no training script found (expected e.g. `torchrun ... pretrain_gpt.py --tensor-model-parallel-size 8 ...`)")
    overrides = config_overrides(cmd.args)
    if overrides:
        # Megatron-Bridge's recipe scripts (examples/models/llama/pretrain_llama3_8b.py model.tensor_model_parallel_size=2
        # train.global_batch_size=128, its Megatron-LM migration guide) and NeMo's take OmegaConf dotted overrides;
        # Megatron-LM's argparse takes none (a positional token is "unrecognized arguments"), so reading the command as
        # Megatron-LM would drop every override and judge a default layout
        more = f" and {len(overrides) - 1} more" if len(overrides) > 1 else ""
        raise OptkgError(f"{where}: {cmd.script.rsplit('/', 1)[-1]} takes config overrides ({overrides[0]}{more}): a "
                         "Megatron-Bridge / NeMo recipe, not Megatron-LM's --flags, which optkg reads; give the job as a "
                         "stack YAML (framework: megatron, training: tp_size, pp_size, micro_batch_size, ...; see "
                         "examples/llama-3.1-70b-megatron-train.yaml)")
    for key, val in cmd.launcher_args.items():
        if key in ("gpus_per_node", "num_nodes", "world_size"):
            job.set(key, val, f"{where}: launcher {key}")
    gqa = {"on": False}
    tok: dict[str, str] = {}

    def apply(target: str, val: Any, flag: str) -> None:
        w = f"{where}: {flag}"
        if target == "_gqa":
            gqa["on"] = True
            return
        if target.startswith("_"):
            tok[target] = str(val)
            return
        if target == "recompute_granularity":
            if str(val) not in RECOMPUTE:
                raise OptkgError(f"{w} must be one of full, selective, found {val!r}")
        if target == "fp8_format":
            job.set("fp8", True, w)
        if target == "normalization" and str(val) not in ("RMSNorm", "LayerNorm"):
            job.notes.append(f"{flag} {val}: counted as LayerNorm")
            val = "LayerNorm"
        job.set(target, val, w)

    walk_flags(cmd.args, FLAGS, apply, job.ignored, where)
    from kg.inputs.training.argv import raw_flags
    job.native = raw_flags(cmd.args)
    _recompute_activations(job, where)
    if "num_query_groups" in job.settings and not gqa["on"]:
        # Megatron ignores --num-query-groups without --group-query-attention (arguments.py)
        job.notes.append("--num-query-groups without --group-query-attention: Megatron uses num_query_groups = num_attention_heads")
        job.settings.pop("num_query_groups")
    if any(k in job.settings for k in ("num_layers", "hidden_size")) and model is None:
        job.settings.setdefault("untie_embeddings_and_output_weights", False)
        job.settings.setdefault("normalization", "LayerNorm")
        job.settings.setdefault("swiglu", False)
    tokenizer_vocabulary(job, tok, where, base_dir)
    derive_virtual_pipeline(job)
    job.ignored.extend(cmd.ignored)
    if framework == "megatron":  # Megatron-DeepSpeed (framework deepspeed) has arguments of its own
        _unknown_arguments(job)
        if "params_dtype" not in job.settings and (cmd.script or "").rsplit("/", 1)[-1] != "megatron":
            # validate_args: args.params_dtype = torch.float, half only with --fp16, bfloat16 only with --bf16
            # (Megatron-LM megatron/training/arguments.py:701-713 at core_v0.16.1); ms-swift's `megatron` sets its own
            job.set("params_dtype", "fp32", f"{where}: neither --bf16 nor --fp16")
            job.notes.append("neither --bf16 nor --fp16: Megatron-LM trains in float32 (params_dtype torch.float, "
                             "megatron/training/arguments.py:701 at core_v0.16.1)")
    return job


def _recompute_activations(job: TrainingJob, where: str) -> None:
    """``--recompute-activations`` makes the recomputation selective whatever ``--recompute-granularity`` says and
    wherever it stands: validate_args runs ``if args.recompute_activations: args.recompute_granularity = 'selective'``
    after parsing (Megatron-LM megatron/training/arguments.py:430-432 at core_v0.16.1; megatron/arguments.py:111-113
    at 23.04, the same in Megatron-DeepSpeed's validate_args). A full (or none) asked for beside it is overridden: the
    framework's implied settings carry it (``megatron_recompute_overridden``) for the warning rule
    megatron-recompute-activations-overrides-granularity."""
    if job.native.get("--recompute-activations") is None:
        return
    job.set("recompute_granularity", "selective", f"{where}: --recompute-activations")


def _unknown_arguments(job: TrainingJob) -> None:
    """Options Megatron-LM core_v0.16.1's parser does not define (newuser3 #4).

    Megatron's parse_args (megatron/training/arguments.py:87-102 at core_v0.16.1: ArgumentParser(allow_abbrev=False),
    then parser.parse_args()) refuses an option it does not define. Known: the options its add_megatron_arguments
    builds (data/parser-options-core_v0.16.1.txt, tools/megatron_parser_options.py) and every name of
    data/arguments-core_v0.16.1.yaml. A script may add its own (extra_args_provider, e.g. pretrain_gpt.py's
    add_modelopt_args when nvidia-modelopt is installed), which optkg does not list; so an unknown option that is a
    near miss of a core one (difflib ratio >= 0.85) is refused (``job.configs["megatron_refused_args"]``: an ERROR),
    and any other stays a note."""
    from difflib import get_close_matches
    from kg.frameworks.megatron.generated import arg_table
    known = set(arg_table()) | parser_options()
    names = sorted(known)
    refused = []
    for f in job.ignored:
        if not f.startswith("--") or f in known:
            continue
        near = get_close_matches(f, names, n=1, cutoff=0.85)
        if near:
            refused.append((f, near[0]))
            job.notes.append(f"{f}: read as absent (Megatron refuses it, see the ERROR); did you mean {near[0]}?")
        else:
            job.notes.append(f"{f}: not an option of Megatron-LM core_v0.16.1's parser; Megatron refuses it unless "
                             "the script's extra_args_provider adds it")
    if refused:
        job.configs["megatron_refused_args"] = refused


_PARSER_OPTIONS: frozenset[str] | None = None


def parser_options() -> frozenset[str]:
    """The options of data/parser-options-core_v0.16.1.txt (read once)."""
    global _PARSER_OPTIONS
    if _PARSER_OPTIONS is None:
        p = Path(__file__).parent / "data" / "parser-options-core_v0.16.1.txt"
        _PARSER_OPTIONS = frozenset(x for x in p.read_text().split() if x.startswith("--"))
    return _PARSER_OPTIONS


# Megatron-LM core_v0.16.1 megatron/training/tokenizer/tokenizer.py build_tokenizer: which vocabulary each
# --tokenizer-type has (:27-70); tokenizer types whose vocabulary is a file optkg reads
_FILE_TOKENIZERS = ("HuggingFaceTokenizer", "GPT2BPETokenizer", "BertWordPieceLowerCase", "BertWordPieceCase")


def tokenizer_vocabulary(job: TrainingJob, tok: dict[str, str], where: str, base_dir: Path | None) -> None:
    """``vocab_size`` from the tokenizer Megatron would build (``tok``: the tokenizer flags given).

    HuggingFaceTokenizer: ``len(AutoTokenizer)`` of ``--tokenizer-model`` (:153-154), read with the
    ``tokenizers`` library; GPT2BPETokenizer: the entries of ``--vocab-file``; NullTokenizer:
    ``--vocab-size`` + 1 (:834-835); TikTokenizer: ``--vocab-size``, else 2**17 (:690-691). The tokenizer's
    size wins over ``--vocab-size`` for the file-based types, as in Megatron. A path that is not on this
    machine, or a SentencePiece model, leaves the vocabulary to ``--vocab-size`` / the model config, with a note.
    """
    from kg.inputs.training.tokenizer import tokenizer_vocab
    ttype = tok.get("_tokenizer_type") or ("HuggingFaceTokenizer" if "_tokenizer_model" in tok else None)
    if ttype == "NullTokenizer" and job.get("vocab_size"):
        job.set("vocab_size", job.get("vocab_size") + 1, f"{where}: --tokenizer-type NullTokenizer (vocab_size + 1 for EOD)")
        return
    if ttype == "TikTokenizer":
        if not job.get("vocab_size"):
            job.set("vocab_size", 2**17, f"{where}: --tokenizer-type TikTokenizer without --vocab-size (2**17)")
        return
    path = tok.get("_vocab_file") if ttype in ("GPT2BPETokenizer",) else tok.get("_tokenizer_model")
    if ttype not in _FILE_TOKENIZERS or not path:
        if path:
            job.notes.append(f"--tokenizer-type {ttype}: its vocabulary is not read here (give --vocab-size)")
        return
    p = Path(path)
    p = p if p.is_absolute() or base_dir is None else base_dir / p
    if not p.exists():
        job.notes.append(f"--tokenizer-model {path}: not found on this machine, so the vocabulary "
                         + (f"comes from --vocab-size ({job.get('vocab_size'):,})" if job.get("vocab_size") else
                            "comes from the model config" if job.model is not None else
                            "is unknown (give --vocab-size or the model's config): the embedding is not sized"))
        return
    n, how = tokenizer_vocab(p, f"{where}: --tokenizer-model")
    job.set("vocab_size", n, f"{where}: --tokenizer-model")
    job.notes.append(f"vocabulary {n:,} from the tokenizer ({how})")
