"""``optkg check`` for a training job: TrainingJob -> facts -> the ``training`` ruleset -> a training report.

``training_facts`` builds the rule namespace: every setting of the job (canonical names of
kg.inputs.training.job.SETTINGS, defaults filled: sizes 1, switches false, strings ''), the parallel
layout (``tp_size`` … ``world_size``), the model shape under Megatron names (``num_layers``,
``num_attention_heads``, ``num_query_groups`` …), the hardware (``compute_capability``,
``gpu_memory_bytes``), and the derivations of kg.derive.training_memory: the memory breakdown
(``weights_bytes`` … ``total_bytes``), the batch arithmetic (``expected_global_batch_size``,
``tokens_per_step``), the pipeline layout (``layers_per_stage``, ``layers_built`` for Megatron's
virtual stages) and the KV-head split (``kv_heads_per_tp_rank``). Rules of rules/training*.yaml
(``ruleset: training``) match a ``{kind: training, framework: …}`` fact and scope releases with
``applies_to`` (the job's framework and framework_version). The report's ``kind`` is
``training``: it carries a memory breakdown, never a KV-cache table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from kg.analyses.check import Finding
from kg.core.errors import OptkgError
from kg.derive.training_memory import GIB, batch_arithmetic, training_memory
from kg.engine.rules import SEVERITY_ORDER, Firing, RuleSet, evaluate_rules
from kg.frameworks.registry import get as framework_of
from kg.inputs.training.job import JOB_TECHNIQUES, SETTINGS, TrainingJob

SCHEMA_VERSION = "1.3"  # 1.1: outcomes, not_evaluable, in_effect, couplings_evaluated, stack.techniques;
# 1.2: derived.parallel.pp_size/dp_size and derived.batch.dp_size are null when the pipeline size is unknown;
# 1.3: speed (kg.speed.training: step time, tokens/s per GPU, MFU, where the time goes; or why not evaluable)
_DEFAULTS = {"integer": 0, "number": 0, "boolean": False, "string": ""}
SHAPE_SETTINGS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
                  "vocab_size", "swiglu", "untie_embeddings_and_output_weights", "normalization", "num_experts",
                  "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_router_topk", "moe_layer_freq")


def _gpu_memory_bytes(hw: Mapping[str, Any] | None) -> int | None:
    if not hw:
        return None
    if hw.get("memory_visible_mib"):
        return int(hw["memory_visible_mib"]) * 2**20
    if hw.get("memory_gib"):
        return int(float(hw["memory_gib"]) * 2**30)
    return None


def training_facts(job: TrainingJob) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(engine facts, flat namespace, derived values for the report) for ``job`` (see module doc)."""
    fw = framework_of(job.framework)
    fw.settle(job)  # what the framework decides once the world size and release are final
    from kg.frameworks.hf_trainer.defaults import apply_checkpointing_default, apply_trainer_defaults
    apply_trainer_defaults(job)  # TrainingArguments' batch defaults when the HF Trainer runs the job
    apply_checkpointing_default(job)  # LLaMA-Factory's / TRL's gradient checkpointing without a flag
    ns: dict[str, Any] = {}
    for name, (typ, _) in SETTINGS.items():
        if name in SHAPE_SETTINGS:
            continue  # model facts stay missing until a config or shape flags give them
        ns[name] = _DEFAULTS.get(typ, "") if not isinstance(typ, tuple) else ""
    ns.update({"recompute_granularity": "none", "offload_optimizer": "none", "offload_param": "none",
               "params_dtype": "bf16", "optimizer": "adam", "optimizer_source": "", "use_reentrant": True})
    ns.update(job.settings)
    par = job.parallel()
    ns.update(par)
    shape = job.shape()
    ns.update({k: v for k, v in shape.items() if v is not None})
    if shape.get("kv_channels"):
        ns.setdefault("head_dim", shape["kv_channels"])  # the catalog's name (flash-attention couplings)
    if ns.get("num_layers") and ns.get("hidden_size"):
        ns.setdefault("num_experts", 0)
        ns.setdefault("num_moe_layers", 0)
    ns.update(fw.implied_settings(job, par))
    ns["framework"] = job.framework
    ns["framework_version"] = job.framework_version or ""
    ns["has_model_shape"] = bool(shape.get("num_layers") and shape.get("hidden_size"))
    derived: dict[str, Any] = {"parallel": par}
    _hardware_facts(ns, job.hardware or {})
    _layout_facts(ns, job, shape, par)
    _batch_facts(ns, derived, job, shape, par)
    _sharding_facts(ns, job, par)
    pp_unknown = "pp_size" in job.unknown
    if pp_unknown:
        job.notes.append("memory per GPU not computed: the pipeline size is unknown")
    elif ns.get("parallel_layout_error"):
        # the framework refuses this layout (e.g. torchtitan ParallelDims._validate): no data-parallel size exists,
        # so no sharding to size memory by, and the techniques that read DP are left open
        job.notes.append(f"memory per GPU not computed: {job.framework} refuses the layout "
                         f"({ns['parallel_layout_error']})")
        ns.pop("dp_size", None)
    elif ns["has_model_shape"] and job.get("seq_length"):
        _memory_facts(ns, derived, job, shape, par, fw)
    else:
        missing = [k for k, ok in (("model shape (a HF config or --num-layers/--hidden-size)", ns["has_model_shape"]),
                                   ("seq_length", bool(job.get("seq_length")))) if not ok]
        job.notes.append("memory per GPU not computed: " + ", ".join(missing) + " not given")
    ns["is_moe"] = bool((shape.get("num_experts") or 0) > 1)
    if pp_unknown:
        _forget_pipeline_size(job, ns, derived)
    techniques = job_techniques(job, ns)
    ns["techniques"] = techniques
    facts = [{"kind": "training", "framework": job.framework},
             {"kind": "model", "is_moe": bool((shape.get("num_experts") or 0) > 1)}]
    facts += [{"kind": "technique", "technique": t} for t in techniques]
    return facts, ns, derived


def _hardware_facts(ns: dict[str, Any], hw: Mapping[str, Any]) -> None:
    if not hw:
        return
    ns["gpu"] = hw.get("id", "")
    try:
        ns["compute_capability"] = float(hw.get("compute_capability"))
        ns["gpu_compute_capability"] = ns["compute_capability"]  # the graph's property name
    except (TypeError, ValueError):  # a GPU without a numeric compute_capability: rules reading it are "not evaluable"
        pass
    mem = _gpu_memory_bytes(hw)
    if mem:
        ns["gpu_memory_bytes"] = mem


def _layout_facts(ns: dict[str, Any], job: TrainingJob, shape: Mapping[str, Any], par: Mapping[str, int]) -> None:
    """Pipeline layout (layers per stage, layers built under virtual / uneven stages), the KV-head split
    under TP, the expert grid and the model-parallel size."""
    L, pp, tp = shape.get("num_layers"), par["pp_size"], par["tp_size"]
    if L:
        ns["layers_per_stage"] = L // pp
        ns["layers_remainder"] = L % pp
        lvs = job.get("layers_per_virtual_stage") or 0
        vpp = job.get("vpp_size") or 0
        if lvs:
            vpp_legacy = (L // pp) // lvs
            ns["vpp_from_layers"] = vpp_legacy
            ns["layers_built"] = lvs * max(vpp_legacy, 1) * pp
            ns["layers_dropped"] = L - ns["layers_built"]
        elif vpp:
            ns["layers_built"] = (L // pp // vpp) * vpp * pp
            ns["layers_dropped"] = L - ns["layers_built"]
        first = job.get("num_layers_in_first_pipeline_stage") or 0
        last = job.get("num_layers_in_last_pipeline_stage") or 0
        if first or last:
            stages = pp - (1 if first else 0) - (1 if last else 0)
            middle = L - first - last
            ns["pp_middle_stages"], ns["pp_middle_layers"] = stages, middle
            if pp == 1:
                ns["layers_built"] = last or first
            else:
                ns["layers_built"] = first + last + (middle // stages * stages if stages > 0 else 0)
            ns["layers_dropped"] = L - ns["layers_built"]
        elif not lvs and not vpp and pp > 1:
            ns["layers_built"] = L // pp * pp
            ns["layers_dropped"] = L - ns["layers_built"]
    g = shape.get("num_query_groups")
    if g:
        ns["kv_heads_per_tp_rank"] = g / tp
        ns["kv_head_replication"] = tp // g if tp > g and tp % g == 0 else 1
        if shape.get("kv_channels"):
            ns["kv_projection_outputs_per_rank"] = g * shape["kv_channels"] / tp
    if shape.get("num_experts"):
        ns["experts_per_ep_rank"] = shape["num_experts"] / par["ep_size"]
    etp = job.get("etp_size") or tp
    ns["expert_model_size"] = etp * par["ep_size"] * pp
    ns["world_remainder_expert"] = par["world_size"] % ns["expert_model_size"]
    ns["model_parallel_size"] = tp * pp * par["cp_size"]
    ns["world_remainder"] = par["world_size"] % ns["model_parallel_size"]


def _sharding_facts(ns: dict[str, Any], job: TrainingJob, par: Mapping[str, int]) -> None:
    """``sharding_strategy`` under FSDP's names (the catalog's zero-3-fsdp couplings read it): the job's FSDP
    strategy, or FULL_SHARD for ZeRO-3 (parameters, gradients and optimizer states partitioned over the whole
    data-parallel group, Rajbhandari et al. 2020 §5); ``shard_group_gpus`` (the GPUs one parameter is sharded
    over: DP, x CP for torchtitan's dp_shard_cp mesh) and ``nvlink_domain_gpus`` (the node's GPUs given, else the
    GPU's NVLink domain, else 8 as kg.speed.training assumes)."""
    fsdp, zero = job.get("fsdp_sharding"), job.get("zero_stage")
    if fsdp:
        ns["sharding_strategy"] = "_HYBRID_SHARD_ZERO2" if fsdp == "hybrid_shard_zero2" else fsdp.upper()
    elif zero == 3:
        ns["sharding_strategy"] = "FULL_SHARD"
    if "world_size" in job.unknown:
        pass  # the GPU count is unknown: so is the group the states are sharded over
    elif "titan_dp_shard" in ns:
        ns["shard_group_gpus"] = ns["titan_dp_shard"] * par["cp_size"]
    else:
        ns["shard_group_gpus"] = par["dp_size"]
    hw = job.hardware or {}
    ns["nvlink_domain_gpus"] = int(job.get("gpus_per_node") or hw.get("nvlink_domain_size") or 8)


def _batch_facts(ns: dict[str, Any], derived: dict[str, Any], job: TrainingJob, shape: Mapping[str, Any],
                 par: Mapping[str, int]) -> None:
    """Batch arithmetic, the CP sequence multiple and the pipeline bubble."""
    tp = par["tp_size"]
    ba = batch_arithmetic(job)
    derived["batch"] = ba
    for k in ("expected_global_batch_size", "batch_consistent", "tokens_per_step", "gbs_divisible"):
        if k in ba:
            ns[k] = ba[k]
    if job.get("global_batch_size") and job.get("micro_batch_size"):
        ns["micro_times_dp"] = job.get("micro_batch_size") * par["dp_size"]
        ns["global_batch_remainder"] = job.get("global_batch_size") % ns["micro_times_dp"]
    if job.get("seq_length") and par["cp_size"] > 1:
        # Megatron splits the sequence into 2*CP chunks (load balancing), then SP splits each CP
        # rank's S/CP tokens over TP: S % lcm(2*CP, CP*TP) == 0, i.e. CP * lcm(2, TP)
        cp = par["cp_size"]
        mult = cp * (2 * tp // math.gcd(2, tp)) if job.get("sequence_parallel") and tp > 1 else 2 * cp
        ns["cp_seq_multiple"] = mult
        ns["seq_length_remainder"] = job.get("seq_length") % mult
    # deepspeed 0.19.8 engine.py:2294-2301: under ZeRO, an optimizer outside zero/utils.py:45-48 (torch Adam / AdamW /
    # Adagrad, FusedAdam, the CPU Adam / Adagrad / Lion, FusedLion; MuonWithAuxAdam, :72-74) needs
    # zero_allow_untested_optimizer. From the config's optimizer.type (engine.py:2476-2551) those are adam, adamw,
    # adagrad, lion and muon; lamb (FusedLamb), muadam / muadamw / musgd and the other torch.optim names are not
    ns["ds_untested_zero_optimizer"] = (job.get("optimizer_source") == "config" and (job.get("zero_stage") or 0) >= 1
                                        and str(job.get("optimizer") or "") not in ("", "adam", "adamw", "adagrad",
                                                                                    "lion", "muon")
                                        and not job.configs.get("ds_allow_untested_optimizer"))
    ns["ds_communication_data_type"] = job.configs.get("ds_communication_data_type") or ""
    ns["ds_mixed_precision_conflict"] = ""
    # accelerate 1.15.0 DeepSpeedPlugin.__post_init__ (utils/dataclasses.py:1276-1277): a JSON handed over by the HF
    # Trainer / accelerate must have a zero_optimization section
    ns["ds_json_without_zero_section"] = bool(job.configs.get("deepspeed_integration")) and \
        job.configs.get("ds_has_zero_section") is False
    if job.configs.get("deepspeed_integration"):
        # accelerate 1.15.0 DeepSpeedPlugin.set_mixed_precision (utils/dataclasses.py:1435-1440): the launch's mixed
        # precision (TrainingArguments --bf16 / --fp16, accelerate mixed_precision) against the JSON's other dtype
        on = job.configs.get("ds_dtypes_enabled") or []
        for mp in job.configs.get("launch_mixed_precision") or []:
            other = "bf16" if mp == "fp16" else "fp16"
            if other in on:
                ns["ds_mixed_precision_conflict"] = f"{mp} (launch) against {other} enabled (DeepSpeed JSON)"
    if job.get("fp8"):
        # the token multiple an FP8 GEMM needs per rank (megatron-core fp8_utils.get_fp8_align_size: 32 for MXFP8,
        # else 16; blockwise scaling 128 as NeMo-RL#1884 and ms-swift pad it), times what splits the tokens
        # before the GEMM: CP, and TP when sequence parallelism shards the sequence
        align = {"mxfp8": 32, "blockwise": 128}.get(str(job.get("fp8_recipe") or "").lower(), 16)
        ns["fp8_align"] = align
        ns["fp8_pad_multiple"] = align * par["cp_size"] * (tp if job.get("sequence_parallel") and tp > 1 else 1)
    # the token multiple every packed / variable-length micro-batch must keep for Megatron's sequence sharding: CP
    # cuts each sequence into 2 x CP chunks (megatron-core utils.py get_batch_on_this_cp_rank; packed THD through TE's
    # thd_get_partitioned_indices), then SP scatters each CP rank's S / CP tokens over TP (tensor_parallel/mappings.py
    # _split_along_first_dim asserts the first dimension divides by TP): CP x lcm(2, TP), 2 x CP, or TP alone
    sp_tp, cp = (tp if job.get("sequence_parallel") and tp > 1 else 1), par["cp_size"]
    ns["seq_shard_multiple"] = cp * math.lcm(2, sp_tp) if cp > 1 else sp_tp
    ns["seq_shard_formula"] = (f"CP {cp} x lcm(2, TP {sp_tp})" if cp > 1 and sp_tp > 1 else f"2 x CP {cp}" if cp > 1
                               else f"TP {sp_tp}, sequence parallel" if sp_tp > 1 else "no sequence sharding")
    if job.get("global_batch_size") and job.get("micro_batch_size") and not job.get("gradient_accumulation_steps"):
        # DeepSpeed _set_batch_related_parameters: grad_acc = train_batch // micro // world
        ns["derived_gradient_accumulation_steps"] = job.get("global_batch_size") // job.get("micro_batch_size") // par["dp_size"]
        ns["derived_global_batch_size"] = job.get("micro_batch_size") * ns["derived_gradient_accumulation_steps"] * par["dp_size"]
    bubble = pipeline_bubble(job, par)
    if bubble:
        derived["pipeline"] = bubble
        ns["num_microbatches"] = bubble["num_microbatches"]
        ns["pipeline_bubble_fraction"] = bubble["bubble_fraction"]


def pipeline_bubble(job: TrainingJob, par: Mapping[str, int]) -> dict[str, Any] | None:
    """The pipeline bubble of a PP > 1 job: (p - 1) / (m · v) of the ideal compute time, with ``m`` the
    micro-batches each pipeline runs per step (global / (micro x DP), else the gradient-accumulation steps)
    and ``v`` the model chunks per rank (interleaved 1F1B; 1 otherwise). Narayanan et al. 2021 §2.2.1-2.2.2
    (arXiv:2104.04473). None without a pipeline or without the batch sizes."""
    pp = par["pp_size"]
    if pp <= 1 or "pp_size" in job.unknown:
        return None
    mbs, gbs, gas = job.get("micro_batch_size"), job.get("global_batch_size"), job.get("gradient_accumulation_steps")
    if mbs and gbs and par["dp_size"]:
        m, how = gbs // (mbs * par["dp_size"]), f"global {gbs} / (micro {mbs} x DP {par['dp_size']})"
    elif gas:
        m, how = gas, f"gradient accumulation {gas}"
    else:
        return None
    if m < 1:
        return None
    v = job.get("vpp_size") or 1
    return {"bubble_fraction": round((pp - 1) / (m * v), 4), "num_microbatches": m, "chunks_per_rank": v,
            "formula": f"(PP - 1) / (m x v) = ({pp} - 1) / ({m} x {v})", "microbatches_from": how,
            "source": "Narayanan et al. 2021 §2.2 (arXiv:2104.04473): bubble time / ideal compute time"}


def _memory_facts(ns: dict[str, Any], derived: dict[str, Any], job: TrainingJob, shape: Mapping[str, Any],
                  par: Mapping[str, int], fw) -> None:
    """Memory per GPU (kg.derive.training_memory), the framework's own estimator and llm-analysis beside it."""
    try:
        mem = training_memory(job)
    except OptkgError as e:
        job.notes.append(f"memory not computed: {e}")
        return
    md = mem.to_dict()
    derived["memory"] = md
    for k, v in md.items():
        if k != "accounting":
            ns[k] = v
    ns["activation_memory"] = md["activations_bytes"]  # the graph's property (catalog/properties.yaml)
    # GiB (2**30 B), the unit GPU memory is sized and reported in (torch.cuda, nvidia-smi's MiB, the serving reports)
    for k in ("model_states_bytes", "activations_bytes", "total_bytes", "weights_bytes", "gradients_bytes",
              "optimizer_bytes"):
        ns[k.replace("_bytes", "_gib")] = round(md[k] / GIB, 2)
    derived.update(fw.cross_checks(job, mem, shape, par))  # the framework's own estimator(s)
    la = _llm_analysis(job, md)
    if la:
        derived["llm_analysis"] = la
    if ns.get("gpu_memory_bytes"):
        ns["memory_headroom_bytes"] = ns["gpu_memory_bytes"] - md["total_bytes"]
        ns["gpu_memory_gib"] = round(ns["gpu_memory_bytes"] / GIB, 2)


# namespace values that follow from the pipeline size (and so from DP = world / (TP x PP x CP))
PP_DEPENDENT = ("pp_size", "dp_size", "layers_per_stage", "layers_remainder", "vpp_from_layers", "layers_built",
                "layers_dropped", "pp_middle_stages", "pp_middle_layers", "expected_global_batch_size",
                "batch_consistent", "gbs_divisible", "micro_times_dp", "global_batch_remainder",
                "derived_gradient_accumulation_steps", "derived_global_batch_size", "expert_model_size",
                "num_microbatches", "pipeline_bubble_fraction",
                "world_remainder_expert", "model_parallel_size", "world_remainder")


def _forget_pipeline_size(job: TrainingJob, ns: dict[str, Any], derived: dict[str, Any]) -> None:
    """A job whose pipeline size is unknown (``job.unknown``): drop PP and what follows from it, so the
    rules reading them are not evaluable (naming ``pp_size``/``dp_size``) instead of running on PP 1."""
    for k in PP_DEPENDENT:
        ns.pop(k, None)
    derived["parallel"] = {**derived["parallel"], "pp_size": None, "dp_size": None}
    batch = derived.get("batch")
    if batch:  # only what the job gives: the derived member of the batch equation needs DP
        for k in ("expected_global_batch_size", "batch_consistent", "gbs_divisible"):
            batch.pop(k, None)
        batch.update({"dp_size": None, "gradient_accumulation_steps": job.get("gradient_accumulation_steps"),
                      "global_batch_size": job.get("global_batch_size")})
        if not job.get("global_batch_size"):
            batch.pop("tokens_per_step", None)


def job_techniques(job: TrainingJob, ns: Mapping[str, Any]) -> list[str]:
    """Catalog technique ids the job holds (kg.inputs.training.job.JOB_TECHNIQUES over ``ns``), sorted.

    ``params_dtype`` counts only when the job gives it (the namespace defaults it to bf16 for sizing)."""
    return sorted(_technique_states(job, ns)[0])


def _technique_states(job: TrainingJob, ns: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(techniques held, {technique: missing fact} for those the job leaves open). A technique is open
    only when its condition needs a value the job made unknown (``job.unknown``: the pipeline size and
    what follows from it); other missing facts mean "not held", as before."""
    from kg.engine.expr import ExprTypeError, MissingFact, evaluate
    local = {**ns, "params_dtype": job.settings.get("params_dtype", "")}
    forgotten = set(PP_DEPENDENT) if "pp_size" in job.unknown else set()
    if ns.get("parallel_layout_error"):
        forgotten.add("dp_size")
    held, open_ = [], {}
    for tid, cond in JOB_TECHNIQUES.items():
        try:
            if evaluate(cond, local):
                held.append(tid)
        except MissingFact as e:
            if e.name in forgotten:
                open_[tid] = e.name
        except ExprTypeError:
            continue
    return held, open_


def _llm_analysis(job: TrainingJob, md: Mapping[str, Any]) -> dict[str, Any] | None:
    """llm-analysis 0.2.2's activation accounting of ``job`` beside optkg's (kg.derive.training_memory.
    llm_analysis_activations), with the terms that make them differ and which one this report uses."""
    from kg.derive.training_memory import llm_analysis_activations
    la = llm_analysis_activations(job)
    if la is None:
        return None
    recompute = job.get("recompute_granularity", "none")
    why, terms = [], []  # each difference, and its short name for the verdict
    if recompute != "full":
        why.append("it stores the two norm inputs in fp32 (layernorm_dtype_bytes=4); Megatron-core keeps them in the "
                   "params dtype (fp32_residual_connection=False, transformer_config.py:143 at 0.16.1)")
        why.append("it counts no MLP dropout mask; Korthikanti Table 2 does (Megatron-core hidden_dropout 0.1, "
                   "transformer_config.py:137)")
        terms += ["norm inputs in fp32", "no MLP dropout mask"]
    if recompute == "none":
        why.append("with flash attention it stores the attention output again and the softmax statistics at 2 B; "
                   "this report counts the output once (the out-projection input) and no statistics")
        terms.append("the attention output stored twice")
    if recompute == "full":
        why.append("with full recompute it counts each layer's input only; the layer being recomputed holds its "
                   "activations again during its backward, which this report adds once (that layer, selective)")
        terms.append("no recomputed layer")
    pp1 = job.parallel()["pp_size"] == 1
    if not pp1:
        why.append("it puts the output logits on the first stage; with PP > 1 they are on the last (Megatron-LM "
                   "theoretical_memory_usage.py:368 adds the output layer only when PP = 1)")
        terms.append("logits on the first stage")
    if la.extras_counted == 2:
        why.append("at micro batch 1 it adds logits and final norm twice (llm_analysis/analysis.py:1979 and :2033)")
        terms.append("the doubled logits at micro batch 1")
    elif pp1 and la.logits:
        why.append("it counts the output logits at 2 B; the loss takes them in fp32, 4 B, as this report counts "
                   "(megatron-core 0.16.1 tensor_parallel/cross_entropy.py:28 `.float()`; Megatron-LM "
                   "theoretical_memory_usage.py 4·s·b·V/t)")
        terms.append("2-byte logits")
    total = md["model_states_bytes"] + la.total
    verdict = (f"this report's: the terms above are llm-analysis conventions these flags do not run "
               f"({', '.join(terms)})") if why else "both count the same terms for this job"
    return {"activations_bytes": la.total, "activation_bytes_per_layer": int(la.per_layer), "layers": la.layers,
            "logits_bytes": int(la.logits), "total_bytes": total,
            "difference": round(md["total_bytes"] / total - 1, 4), "why": why, "verdict": verdict,
            "source": "llm-analysis 0.2.2 llm_analysis/analysis.py LLMAnalysis.training (recomputed, defaults)"}


def active_rules(job_techniques: list[str], rules: RuleSet, catalog=None) -> RuleSet:
    """The training rules plus the catalog's coupling rules the job's techniques can match
    (kg.knowledge.couplings.ruleset_for; a coupling a training rule ``refines`` is checked by that rule)."""
    if catalog is None:
        return rules
    from kg.knowledge.couplings import ruleset_for
    return ruleset_for(catalog, rules, set(job_techniques), stage="training")[0]


def evaluate_training(job: TrainingJob, rules: RuleSet, catalog=None) -> tuple[list[Firing], dict[str, Any], dict[str, Any]]:
    """Firings of the training rules (and, given ``catalog``, of the coupling rules the job's techniques
    can match) over ``job``; with the namespace and the derived values."""
    facts, ns, derived = training_facts(job)
    active = active_rules(ns["techniques"], rules, catalog)
    functions = None
    open_ = _technique_states(job, ns)[1]
    ns["open_techniques"] = sorted(open_)
    if open_:  # has('<technique>') of a technique the job leaves open: not evaluable, naming the fact
        from kg.engine.expr import MissingFact
        held = set(ns["techniques"])

        def has(tid: str) -> bool:
            if tid in open_:
                raise MissingFact(open_[tid])
            return tid in held
        functions = {"has": has}
    firings = evaluate_rules(active, facts, ns, functions=functions, engine=job.framework,
                             version=job.framework_version)
    return firings, ns, derived


def _refined(catalog, refs: list[str], held: set[str]) -> list:
    """The catalog couplings (CouplingRef) of ``refs`` whose techniques the job holds, in ``refs`` order."""
    if catalog is None or not refs:
        return []
    from kg.knowledge.couplings import iter_couplings, normalise_ref
    want = [normalise_ref(catalog, r) for r in refs]
    by_ref = {cp.ref: cp for cp in iter_couplings(catalog, {w.split("/")[0] for w in want})}
    return [by_ref[w] for w in want if w in by_ref and by_ref[w].technique in held
            and (by_ref[w].target is None or by_ref[w].target in held)]


def _finding(f: Firing, ns: Mapping[str, Any], framework: str, catalog=None) -> Finding:
    """A training finding. A rule that refines catalog couplings names the techniques of the couplings that
    hold on this job and carries their sources after its own (one source of truth: the graph's)."""
    r = f.rule
    fix = (r.fix_by_engine or {}).get(framework, r.fix) if r.fix else ""
    from kg.engine.rules import _fmt
    held = set(ns.get("techniques") or [])
    techniques, sources, coupling = list(r.techniques), list(r.sources or []), r.coupling
    cps = _refined(catalog, r.refines, held)
    if cps:
        techniques = []
        for cp in cps:
            techniques += [t for t in (cp.technique, cp.target) if t and t not in techniques]
        urls = {s.get("url") for s in sources}
        for cp in cps:
            sources += [s for s in cp.data.get("sources") or [] if s.get("url") not in urls]
            urls |= {s.get("url") for s in cp.data.get("sources") or []}
        coupling = cps[0].ref
    elif r.refines:
        coupling = r.refines[0]
    if not cps and r.techniques:
        # no refined coupling holds on this job: name the techniques the job holds or leaves open
        # (a stage-2 config is not about zero-3-fsdp), all of them if that leaves none
        maybe = held | set(ns.get("open_techniques") or ())
        techniques = [t for t in r.techniques if t in maybe] or list(r.techniques)
    return Finding(rule_id=r.id, title=r.title, severity=f.severity or "info", message=f.message,
                   techniques=techniques, facts={}, numbers=dict(f.numbers),
                   cost_dimension=r.cost_dimension, from_dimension=r.from_dimension, coordinates=[],
                   mechanism=r.mechanism or "", fixes=[{"technique": x} for x in (r.fixes or [])],
                   fix=_fmt(fix, {**ns, **f.numbers}) if fix else "", sources=sources,
                   tags=list(r.tags or []), rule_file=r.file, rule_line=r.line, coupling=coupling)


def generated_checks(job: TrainingJob) -> list[dict[str, Any]]:
    """The job's framework's own generated checks, then every framework's checks over a config file the job
    carries (each site once)."""
    from kg.frameworks.registry import all_frameworks
    out = list(framework_of(job.framework).generated_checks(job))
    seen = {g["rule_id"] for g in out}
    for fw in all_frameworks().values():
        for g in fw.config_checks(job):
            if g["rule_id"] not in seen:
                seen.add(g["rule_id"])
                out.append(g)
    return out


def unplaceholder(message: str) -> str:
    """A framework's f-string message as the site scanner keeps it (each ``{expr}`` as ``{..}``), readable: a
    parenthesised value goes (the finding lists the values after it), any other reads "...": "world size ({..}) is not
    divisible by total_model_size (total_model_size={..})" -> "world size is not divisible by total_model_size"."""
    import re
    return re.sub(r"\{\.\.\}", "...", re.sub(r"\s*\((?:[\w.]+ ?= ?)?\{\.\.\}\)", "", message))


def _generated_finding(g: Mapping[str, Any]) -> Finding:
    """A check generated from the framework's released source that fires on the job (kg/frameworks/<name>/checks)."""
    said = g["message"] if g["message"] and not g["message"].startswith(("not ", "(")) else f"assert {g['message']} fails"
    said = unplaceholder(said)
    return Finding(rule_id=g["rule_id"], title=f"{g['package']} {g['release']} refuses this configuration at startup",
                   severity="error", message=f"{said} ({g['values']})", techniques=[], facts={},
                   numbers={}, cost_dimension="compute", from_dimension="compute", coordinates=[],
                   mechanism=f"generated from {g['path']}:{g['line']}: raises when {g['expr']}", fixes=[], fix="",
                   sources=[{"title": f"{g['package']} {g['release']} {g['path']}:{g['line']}", "url": g["url"]}],
                   tags=["training", "startup-error", "generated"], rule_file=g.get("table", ""), rule_line=g["line"],
                   coupling=None)


def _reason(f: Firing) -> str:
    return f.reason.replace("the stack's engine is", "the job's framework is") \
        .replace("no engine version given", "no framework version given")


@dataclass
class TrainingReport:
    """``check`` of a training job: ``findings`` (kg.analyses.check.Finding, most severe first) and
    ``to_dict()``, the JSON shape of ``optkg check --format json`` for the job (kind ``training``)."""

    findings: list[Finding]
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.data


def check_training(job: TrainingJob, rules: RuleSet, catalog=None) -> dict[str, Any]:
    """``training_report(job, rules, catalog).to_dict()``: the report mapping (kind ``training``)."""
    return training_report(job, rules, catalog).to_dict()


def training_report(job: TrainingJob, rules: RuleSet, catalog=None) -> TrainingReport:
    """Run the training ruleset over ``job``.

    Given ``catalog``, the catalog's coupling rules run too, on the techniques the job holds
    (``job_techniques``): the report then has the serving report's outcome counts (``outcomes``: fired,
    held, not_evaluable, not_applicable), ``not_evaluable: [{rule_id, missing, needs, reason}]`` and
    ``in_effect`` (informational couplings that apply: nothing to fix)."""
    from kg.analyses.check import _is_effect_note
    firings, ns, derived = evaluate_training(job, rules, catalog)
    notes_only = {f.rule.id for f in firings if f.fired and _is_effect_note(f.rule)}
    findings = [_finding(f, ns, job.framework, catalog) for f in firings if f.fired and f.rule.id not in notes_only]
    generated = generated_checks(job)
    findings += [_generated_finding(g) for g in generated]
    findings.sort(key=lambda x: (-SEVERITY_ORDER.get(x.severity, 0), x.rule_id))
    stack = {"name": job.name, "framework": job.framework, "framework_version": job.framework_version,
             "model": job.model.name if job.model else None, "gpu": (job.hardware or {}).get("id"),
             "source": job.source, "settings": dict(sorted(job.settings.items())),
             "techniques": list(ns.get("techniques") or [])}
    if "world_size" in job.unknown:
        stack["gpu_count_unknown"] = True  # the launcher's count is not in the input (kg.inputs.training.argv)
    if job.configs.get("framework_assumed"):
        stack["framework_assumed"] = job.configs["framework_assumed"]
    speed = job_speed(job, derived, findings)
    outcomes = {k: sum(f.outcome == k for f in firings) for k in ("fired", "held", "not_evaluable", "not_applicable")}
    outcomes["fired"] -= len(notes_only)
    outcomes["fired"] += len(generated)
    not_evaluable = [{"rule_id": f.rule.id, "missing": list(f.missing), "needs": list(f.missing), "reason": _reason(f)}
                     for f in firings if f.outcome == "not_evaluable"]
    in_effect = [{"rule_id": f.rule.id, "coupling": f.rule.coupling, "message": f.message,
                  "techniques": f.rule.techniques, "sources": f.rule.sources} for f in firings if f.rule.id in notes_only]
    return TrainingReport(findings, {"schema_version": SCHEMA_VERSION, "kind": "training", "stack": stack, "derived": derived,
            "findings": [f.to_dict() for f in findings], "ignored_flags": list(job.ignored),
            "notes": list(job.notes),
            # training rules whose condition could be evaluated on this job (not out of scope, no missing fact),
            # and the catalog coupling rules likewise
            "rules_evaluated": sum(1 for f in firings if f.outcome in ("fired", "held") and not f.rule.coupling),
            "rules_total": sum(1 for f in firings if not f.rule.coupling),
            "couplings_evaluated": sum(1 for f in firings if f.outcome in ("fired", "held") and f.rule.coupling),
            "outcomes": outcomes, "not_evaluable": not_evaluable, "in_effect": in_effect, "speed": speed,
            "gpu_memory_bytes": ns.get("gpu_memory_bytes"),
            "not_fired": [{"rule": f.rule.id, "reason": _reason(f), "outcome": f.outcome} for f in firings if not f.fired]})


def job_speed(job: TrainingJob, derived: Mapping[str, Any], findings: list[Finding]) -> dict[str, Any]:
    """kg.speed.training's estimate for a job that starts: a job an ERROR finding refuses, or whose memory
    per GPU exceeds the GPU's, gets the reason instead of a speed."""
    errors = [f.rule_id for f in findings if f.severity == "error"]
    if errors:
        return {"evaluable": False, "reason": "the job does not start: " + ", ".join(errors)}
    mem, gpu = (derived.get("memory") or {}).get("total_bytes"), _gpu_memory_bytes(job.hardware)
    if mem and gpu and mem > gpu:
        return {"evaluable": False, "reason": f"memory per GPU {mem / GIB:,.1f} GiB is over the GPU's {gpu / GIB:,.1f} GiB"}
    from kg.speed.training import training_speed
    return training_speed(job, derived)


def run_fixture(data: Mapping[str, Any], catalog, rules: RuleSet, base_dir) -> list[Firing]:
    """Fixture runner for the ``training`` ruleset.

    ``data``: one of ``command`` (a pasted training command), ``file`` (a DeepSpeed JSON /
    accelerate YAML / torchtitan TOML / stack YAML relative to the fixture folder) or ``stack``
    (an inline stack mapping with ``framework:``); optional ``model`` (hub id), ``gpu``,
    ``framework``, ``framework_version``, ``settings`` (canonical names, applied last).
    """
    from kg.core.yamlio import YamlDoc
    from kg.inputs.modelcfg import resolve_model
    from kg.inputs.training import load_training_file, parse_training_command
    from kg.inputs.training.stackfile import job_from_stack_doc
    if not isinstance(data, Mapping):
        raise OptkgError("training fixture input must be a mapping")
    known = {"command", "file", "stack", "model", "gpu", "framework", "framework_version", "settings", "source"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise OptkgError(f"training fixture: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    base = Path(base_dir)
    model = resolve_model(str(data["model"])) if data.get("model") else None
    if data.get("command"):
        job = parse_training_command(str(data["command"]), model=model, where="fixture command", base_dir=base,
                                     resolver=resolve_model, framework=data.get("framework"))
    elif data.get("file"):
        job = load_training_file(base / str(data["file"]), catalog, resolve_model)
        job.model = model or job.model
    elif data.get("stack"):
        job = job_from_stack_doc(YamlDoc("fixture stack", dict(data["stack"])), "fixture stack", catalog, resolve_model)
    else:
        raise OptkgError("training fixture: give `command`, `file` or `stack`")
    if data.get("framework"):
        from kg.frameworks.registry import resolve
        job.framework = resolve(str(data["framework"])) or job.framework
    if data.get("framework_version"):
        job.framework_version = str(data["framework_version"])
    if data.get("gpu"):
        job.hardware = catalog.resolve_hardware(str(data["gpu"]))
    for k, v in (data.get("settings") or {}).items():
        job.set(k, v, f"fixture settings.{k}")
    return evaluate_training(job, rules, catalog)[0]
