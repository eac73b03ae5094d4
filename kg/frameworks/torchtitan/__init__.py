"""torchtitan: job TOML and ``--job.config_file`` commands (reader); FSDP2 over the data-parallel shard
group and sequence parallelism with every TP plan."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.frameworks.protocol import FSDP_LEVEL, Release, Sharding, SpeedTraits, TrainingFramework


class Torchtitan(TrainingFramework):
    id = "torchtitan"
    name = "TorchTitan"
    aliases = ("titan",)
    package = "torchtitan"
    releases = (Release("0.2.0", "torchtitan 0.2.0 wheel"), Release("0.2.1", "torchtitan 0.2.1 wheel"),
                Release("0.2.2", "torchtitan 0.2.2 wheel"), Release("0.3.0", "torchtitan 0.3.0 wheel"))
    file_kind = "a torchtitan TOML"
    # FSDP2 prefetches the next all-gather and overlaps reduce-scatter with the backward pass; TP is synchronous
    # unless parallelism.enable_async_tensor_parallel (0.2.0 torchtitan/config/job_config.py:315, default False);
    # selective (op) checkpointing saves every other mm and recomputes the rest
    # (0.2.0 torchtitan/distributed/activation_checkpoint.py:110-111)
    # FSDP2 reduce-scatters gradients in float32: training.mixed_precision_reduce is Literal["float32"] = "float32"
    # (0.2.0 config/job_config.py:239, 0.2.1 :282, 0.2.2 :290, 0.3.0 config/configs.py:93), passed as fully_shard's
    # MixedPrecisionPolicy reduce_dtype (0.2.1 models/llama3/infra/parallelize.py:123, 0.3.0
    # models/llama3/parallelize.py:84); the parameters are all-gathered in mixed_precision_param, bfloat16
    speed_backend = SpeedTraits("torchtitan", tp_overlap=False, dp_overlap=True, selective_gemm_recompute=0.5,
                                source="torchtitan 0.2.0 config/job_config.py:315, "
                                       "distributed/activation_checkpoint.py:110-111; 0.3.0 config/configs.py:93",
                                fsdp_reduce_bytes=4)

    def claims_command(self, cmd: Any, args: str, script: str) -> int:
        return 90 if ("--job.config_file" in args or "--job.config-file" in args or "torchtitan" in script) else 0

    def read_command(self, text, model, where, base_dir, resolver):
        from kg.frameworks.torchtitan.reader import parse_torchtitan_command
        return parse_torchtitan_command(text, model, where, base_dir, resolver)

    def claims_file(self, path: Path, data: Any) -> bool:
        return Path(path).suffix == ".toml"

    def read_file(self, path: Path, job: Any, resolver, doc: Any = None):
        from kg.frameworks.torchtitan.reader import load_torchtitan_toml
        t = load_torchtitan_toml(path, resolver)
        if job is None:
            return t
        job.settings.update(t.settings)
        job.model = job.model or t.model
        return job

    def wording(self) -> dict[str, str]:
        return {"params": "parameters: the first pipeline stage's layers + embedding, /TP, routed experts /(EP x ETP), "
                          "before FSDP2 sharding",
                "schedule": "torchtitan pipeline_parallel_schedule", "schedule_interleaved": "interleaved schedule"}

    def settle(self, job: Any) -> None:
        """Whether torchtitan applies FSDP, decided on the final world size (the launcher's, --count's or the
        degrees'): fully_shard only when dp_shard > 1 or CP > 1 (``ParallelDims.fsdp_enabled``, 0.2.1
        distributed/parallel_dims.py:332-333, 0.3.0 :692-693). Without it 0.2.x runs TP / PP jobs in float32:
        mixed precision is fully_shard's MixedPrecisionPolicy, and ``maybe_enable_amp`` turns autocast on only
        for DDP / one GPU, logging "Mixed precision training is disabled" otherwise (0.2.0
        distributed/utils.py:221-231, 0.2.1 :252-262, 0.2.2 :246-256; pytorch/torchtitan#630). MoE models with
        EP apply fully_shard anyway (0.2.1 models/deepseek_v3/infra/parallelize.py:148); 0.3.0 always applies
        it, shard degree 1 included (models/llama3/parallelize.py:69-90)."""
        from kg.core.relcmp import older_than
        toml = job.configs.get("torchtitan_toml")
        if toml and job.framework_version and not older_than(job.framework_version, "0.3.0"):
            from kg.core.errors import OptkgError
            raise OptkgError(
                f"{toml}: a TOML job config is torchtitan 0.2.x's format; torchtitan {job.framework_version} loads no "
                "TOML, it takes --module / --config from its config_registry (0.3.0 config/manager.py:48-91, "
                "\"--module is required\"); give --framework-version 0.2.2, 0.2.1 or 0.2.0")
        if "torchtitan" not in job.configs or "world_size" in job.unknown:
            return
        if not ({"world_size", "gpus_per_node", "dp_shard_size"} & job.settings.keys()):
            return  # the world size is not known: dp_shard -1 could be anything, the reader's reading stands
        par = job.parallel()
        dims = parallel_dims(job, par)
        if "parallel_layout_error" in dims:
            return
        fsdp = dims["titan_dp_shard"] > 1 or par["cp_size"] > 1
        hsdp = fsdp and (job.get("dp_replicate_size") or 1) > 1
        job.set("fsdp_sharding", "hybrid_shard" if hsdp else "full_shard" if fsdp else "no_shard",
                "parallelism.data_parallel_shard_degree")
        older = bool(job.framework_version) and older_than(job.framework_version, "0.3.0")
        if fsdp or not older or (par["tp_size"] <= 1 and par["pp_size"] <= 1) or par["ep_size"] > 1:
            return
        if job.get("params_dtype") != "fp32":
            job.set("params_dtype", "fp32", "torchtitan 0.2.x without FSDP")
            job.notes.append(
                f"torchtitan {job.framework_version} runs this job in float32: dp_shard {dims['titan_dp_shard']} "
                "and no CP apply no fully_shard, whose MixedPrecisionPolicy is its mixed precision, and with "
                "TP / PP it logs \"Mixed precision training is disabled\" (0.2.1 distributed/utils.py:252-262; "
                "pytorch/torchtitan#630); 0.3.0 applies fully_shard at shard degree 1 too")

    def implied_settings(self, job: Any, parallel) -> dict[str, Any]:
        """The sequence-length divisor this torchtitan release checks: 0.3.0 trainer.py:306-315
        (TP when sequence parallel, x 2 x CP when CP > 1); 0.2.x llama3 parallelize.py:63-68 (TP x 2 x CP)."""
        from kg.core.relcmp import older_than
        tp, cp = parallel["tp_size"], parallel["cp_size"]
        out = {**parallel_dims(job, parallel), **expert_tp(job, parallel)}
        if older_than(job.framework_version, "0.3.0"):
            return {**out, "seq_len_divisor": tp * 2 * cp, "seq_len_divisor_formula": f"TP {tp} x 2 x CP {cp}"}
        return {**out, "seq_len_divisor": tp * (2 * cp if cp > 1 else 1),
                "seq_len_divisor_formula": f"TP {tp} (sequence parallel)" + (f" x 2 x CP {cp}" if cp > 1 else "")}

    def sharding(self, job: Any, dp: int) -> Sharding:
        """FSDP2 as torchtitan applies it: fully_shard over the ``fsdp`` mesh, dp_shard x cp (0.3.0
        distributed/parallel_dims.py:278), so CP ranks shard model states too, even at dp_shard 1; with
        dp_replicate > 1 the mesh is (dp_replicate, fsdp), HSDP: replicated across dp_replicate
        (models/llama3/parallelize.py:74-76)."""
        fsdp = job.get("fsdp_sharding")
        if fsdp not in ("full_shard", "hybrid_shard"):
            return super().sharding(job, dp)
        par = job.parallel()
        shard, cp, rep = parallel_dims(job, par)["titan_dp_shard"], par["cp_size"], job.get("dp_replicate_size") or 1
        group = shard * cp
        over = f"dp_shard {shard} x CP {cp} = {group} GPUs" if cp > 1 else f"dp_shard {group}"
        line = f"FSDP2 {'HSDP' if rep > 1 else 'full shard'}: sharded over {over}" + \
            (f", replicated across dp_replicate {rep}" if rep > 1 else "")
        lines, efsdp = [line], None
        tp, ep = par["tp_size"], par["ep_size"]
        if ep > 1 and (job.shape().get("num_experts") or 0) > 1:
            # the routed experts' FSDP mesh under EP: efsdp = dp_shard x CP x TP // (ETP x EP) (0.2.2
            # distributed/parallel_dims.py:201; 0.3.0 :401 without ETP), EP taking ranks from dp_shard, CP and TP
            etp = self.expert_tp(job, par)
            efsdp = max(1, group * tp // (etp * ep))
            lines.append(f"routed experts: EP {ep}" + (f" x ETP {etp}" if etp > 1 else "") +
                         f", FSDP2 over efsdp = dp_shard {shard} x CP {cp} x TP {tp} // {etp * ep} = {efsdp}")
        return Sharding(FSDP_LEVEL[fsdp], group, lines, expert_shard_group=efsdp)

    def expert_tp(self, job: Any, parallel) -> int:
        """ETP as torchtitan applies it (``expert_tp`` below): TP with EP off, else 0.2.x's
        expert_tensor_parallel_degree (default 1) and 1 on 0.3.0."""
        return expert_tp(job, parallel)["titan_expert_tp"]

    def implies_sequence_parallel(self, job: Any, tp: int) -> bool:
        # torchtitan's TP plan shards norms and dropout over the sequence (SequenceParallel) whenever TP > 1
        return tp > 1

    def generated_checks(self, job: Any) -> list[dict[str, Any]]:
        from kg.frameworks.torchtitan.generated import findings
        return findings(job)


def expert_tp(job: Any, parallel) -> dict[str, Any]:
    """How many ranks split each routed expert's FFN dimension (``titan_expert_tp``): with EP off, TP shards w1 / w3
    on dim 1 and w2 on dim 2 (0.2.2 distributed/expert_parallel.py:61-77 TensorParallel; 0.3.0
    models/common/moe_sharding.py:50-68, "EP disabled, TP > 1"); with EP on, 0.2.x splits them over
    expert_tensor_parallel_degree (0.2.2 llama4/infra/parallelize.py:558-580: ETP = TP or 1, default 1) and 0.3.0 not
    at all (expert_param_placement_sparse: EP only)."""
    from kg.core.relcmp import older_than
    tp, ep = parallel["tp_size"], parallel["ep_size"]
    if ep <= 1:
        n, how = tp, f"TP {tp}, expert parallelism off"
    elif job.framework_version and older_than(job.framework_version, "0.3.0"):
        sec = (job.configs.get("torchtitan") or {}).get("parallelism") or {}
        etp = sec.get("expert_tensor_parallel_degree") or job.get("etp_size") or 1
        n, how = (etp, f"expert_tensor_parallel_degree {etp} with EP {ep}") if etp > 1 else (1, f"EP {ep}, ETP 1")
    else:
        n, how = 1, f"EP {ep} (0.3.0 does not TP-shard experts under EP)"
    return {"titan_expert_tp": n, "titan_expert_tp_formula": how}


def parallel_dims(job: Any, parallel) -> dict[str, Any]:
    """torchtitan's ParallelDims._validate (0.3.0 distributed/parallel_dims.py:182-189; 0.2.0 :48-52):
    dp_shard -1 becomes world // (dp_replicate x cp x tp x pp), then dp_replicate x dp_shard x cp x tp x pp
    must equal the world size. ``titan_world_product`` is that product; a layout whose product differs
    carries ``parallel_layout_error`` (the assert's wording), so no memory is computed on it."""
    world, tp, pp, cp = parallel["world_size"], parallel["tp_size"], parallel["pp_size"], parallel["cp_size"]
    rep = job.get("dp_replicate_size") or 1
    shard = job.get("dp_shard_size")
    shard = world // (rep * cp * tp * pp) if shard is None else shard
    product = rep * shard * cp * tp * pp
    # ParallelDims._validate asserts every degree but dp_shard is >= 1 (0.3.0 parallel_dims.py:179-180); the
    # parallel sizes above read 0 as 1, so the degrees are read as given
    low = [f"{name} {job.get(key)}" for name, key in (("dp_replicate", "dp_replicate_size"), ("cp", "cp_size"),
           ("tp", "tp_size"), ("pp", "pp_size"), ("ep", "ep_size")) if isinstance(job.get(key), int) and job.get(key) < 1]
    if shard == 0:  # :181 dp_shard must be -1 or >= 1; :184 dp_shard -1 resolved to world // (rep x cp x tp x pp) = 0
        low.append("dp_shard 0" if job.get("dp_shard_size") == 0 else
                   f"dp_shard -1 resolved to {world} // {rep * cp * tp * pp} = 0")
    out: dict[str, Any] = {"titan_dp_shard": shard, "titan_world_product": product,
                           "titan_degrees_below_one": ", ".join(low)}
    if product != world:
        out["parallel_layout_error"] = (f"dp_replicate({rep}) * dp_shard({shard}) * cp({cp}) * tp({tp}) * pp({pp}) "
                                        f"= {product} != WORLD_SIZE({world})")
    return out


FRAMEWORKS = (Torchtitan(),)
