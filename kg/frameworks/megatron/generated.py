"""Megatron's mechanical startup checks, generated from the released source and evaluated on a job.

The rows are the ``status: table`` sites of ``checks/megatron-core-0.16.1.yaml`` and
``checks/megatron-lm-core_v0.16.1.yaml`` (tools/training_check_sites.py via tools/megatron_generated_checks.py):
each carries ``expr``, the condition under which Megatron raises, over Megatron-LM argument names. A job's
arguments are the release's defaults (``data/arguments-core_v0.16.1.yaml``: every add_argument of
arguments.py and the TransformerConfig / ModelParallelConfig fields ArgumentGroupFactory adds), then the
flags the command gives, then the job's canonical settings and model shape for what the command leaves out.
A row whose names are not all known, or whose values do not compare (a string against a number), is not
evaluated; a row that is true is a finding with Megatron's own message and its path:line.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from kg.core.yamlio import load_yaml

HERE = Path(__file__).parent
ARGS = HERE / "data" / "arguments-core_v0.16.1.yaml"
TABLES = ("megatron-core-0.16.1.yaml", "megatron-lm-core_v0.16.1.yaml")
PINNED = "0.16.1"   # megatron-core; Megatron-LM core_v0.16.1 is the same release
NONE = "__none__"
# canonical setting -> Megatron-LM argument (for jobs read from stack files / configs, and the model shape)
CANONICAL = {"tp_size": "tensor_model_parallel_size", "pp_size": "pipeline_model_parallel_size",
             "cp_size": "context_parallel_size", "ep_size": "expert_model_parallel_size",
             "etp_size": "expert_tensor_parallel_size", "sequence_parallel": "sequence_parallel",
             "vpp_size": "num_virtual_stages_per_pipeline_rank", "distributed_optimizer": "use_distributed_optimizer",
             "micro_batch_size": "micro_batch_size", "global_batch_size": "global_batch_size",
             "seq_length": "seq_length", "num_layers": "num_layers", "hidden_size": "hidden_size",
             "ffn_hidden_size": "ffn_hidden_size", "num_attention_heads": "num_attention_heads",
             "kv_channels": "kv_channels", "num_experts": "num_experts", "moe_router_topk": "moe_router_topk",
             "moe_ffn_hidden_size": "moe_ffn_hidden_size", "swiglu": "swiglu",
             "untie_embeddings_and_output_weights": "untie_embeddings_and_output_weights",
             "layers_per_virtual_stage": "num_layers_per_virtual_pipeline_stage",
             "num_layers_in_first_pipeline_stage": "decoder_first_pipeline_num_layers",
             "num_layers_in_last_pipeline_stage": "decoder_last_pipeline_num_layers"}


@lru_cache(maxsize=1)
def arg_table() -> dict[str, dict[str, Any]]:
    return load_yaml(ARGS).data if ARGS.exists() else {}


def rows() -> tuple[dict[str, Any], ...]:
    from kg.frameworks.checkrows import table_rows
    return tuple(r for name in TABLES for r in table_rows(HERE / "checks" / name))


def _convert(spec: dict[str, Any], raw: Any) -> Any:
    if spec["kind"] == "true":
        return True
    if spec["kind"] == "false":
        return False
    if raw is True:
        return None  # a value flag given without a value: argparse would refuse; left unknown
    if spec["kind"] == "list":
        return [_scalar(spec["type"], x) for x in (raw if isinstance(raw, list) else [raw])]
    return _scalar(spec["type"], raw[0] if isinstance(raw, list) else raw)


def _scalar(typ: str, raw: Any) -> Any:
    try:
        return {"int": int, "float": float}.get(typ, str)(raw)
    except (TypeError, ValueError):
        return str(raw)


def namespace(job: Any) -> dict[str, Any]:
    """Megatron-LM's ``args`` for ``job`` as far as optkg knows them (see module doc); None as ``NONE``."""
    table = arg_table()
    ns: dict[str, Any] = {}
    for spec in table.values():
        ns.setdefault(spec["dest"], spec["default"])
    given: set[str] = set()
    for flag, raw in (getattr(job, "native", None) or {}).items():
        spec = table.get(flag)
        if spec:
            ns[spec["dest"]] = _convert(spec, raw)
            given.add(spec["dest"])
    shape = job.shape()
    values = {**shape, **job.settings, **job.parallel()}
    for canon, arg in CANONICAL.items():
        if arg in given or canon not in values or values[canon] is None:
            continue
        v = values[canon]
        if canon in ("vpp_size", "layers_per_virtual_stage") and not v:
            continue
        if canon == "vpp_size" and (values.get("layers_per_virtual_stage")
                                    or "num_layers_per_virtual_pipeline_stage" in given):
            continue  # optkg derived the virtual stages from --num-layers-per-virtual-pipeline-stage: not a flag
        ns[arg] = v
    m = job.model
    if m is not None and m.max_position_embeddings and "max_position_embeddings" not in given:
        # the model's own config stands in for the shape flags the command leaves out (as for num_layers ...)
        ns["max_position_embeddings"] = m.max_position_embeddings
    if shape.get("num_query_groups") and "num_query_groups" not in given:
        ns["num_query_groups"] = shape["num_query_groups"]
        if shape["num_query_groups"] != shape.get("num_attention_heads"):
            ns["group_query_attention"] = True
    rg = job.get("recompute_granularity")
    if rg and "recompute_granularity" not in given:
        ns["recompute_granularity"] = None if rg == "none" else rg
    world = _world_size(job)
    if world is not None:  # left out (rows reading it are not evaluated) when the job does not say
        ns["world_size"] = world
    return ns


def _world_size(job: Any) -> int | None:
    """The GPUs of the job when its input says (launcher flags, world_size), else None."""
    g = job.get
    if g("world_size") or g("gpus_per_node") or g("dp_size"):
        return job.parallel()["world_size"]
    return None


def findings(job: Any, packages: tuple[str, ...] = ("megatron-core", "megatron-lm")) -> list[dict[str, Any]]:
    """The generated checks of ``packages`` that fire on ``job`` (the pinned release only), with Megatron's message."""
    from kg.core.relcmp import older_than
    from kg.frameworks.checkrows import findings as fire
    from kg.frameworks.checkrows import table_lets
    v = job.framework_version
    if v and (older_than(v, PINNED) or older_than(PINNED, v)):
        return []
    lets = dict(x for name in TABLES for x in table_lets(HERE / "checks" / name))
    return fire([r for r in rows() if r["package"] in packages], namespace(job), HERE / "checks", lets.items())
