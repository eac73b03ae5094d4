"""What the generic training pipeline asks of a training framework: ``TrainingFramework``.

A framework package (``kg/frameworks/<name>/``) exports ``FRAMEWORKS = (SomeFramework(), ...)``; each
instance answers, for the jobs it reads and sizes:

- **reading**: ``claims_command`` (how strongly a split launch command is this framework's; the
  highest claim reads it), ``read_command``; ``claims_file`` / ``read_file`` for its config files
  (``file_kind`` names them in messages);
- **releases**: ``package`` (the PyPI distribution whose release ``framework_version`` names) and
  ``releases`` (pinned releases read, newest last, with the defaults that change between them);
- **facts**: ``implied_settings`` (settings the framework itself fixes for a layout, e.g. DeepSpeed's
  pipeline parallelism is its PipelineEngine); ``settle`` (settings it decides only once the world size and
  release are final, e.g. whether torchtitan 0.2.x applies FSDP and so mixed precision);
- **memory accounting**: ``padded_vocab`` (the vocabulary the embedding really has),
  ``grad_dtype_default``, ``implies_sequence_parallel``, ``sharding`` (what it partitions over which
  group: ZeRO stages, FSDP strategies, Megatron's distributed optimizer), ``gathered_unit_params``
  (what ZeRO-3/FSDP gathers at once) and ``wording`` (how the report names its shard and schedule);
- **cross-checks**: ``cross_checks`` (the framework's own estimator for the same job, recomputed);
- **logs**: ``log_lines`` (lines it prints that a training log reader can match);
- **check tables**: ``check_tables`` (generated from its released source, beside the package),
  ``generated_checks`` (those rows that fire on a job of this framework) and ``config_checks`` (rows over its own
  config file, on any job that carries one);
- **speed**: ``speed_backend`` (``SpeedTraits``: which calibrated kernel family the step-time model of
  kg.speed.training uses for this framework, and what it overlaps by default; None: not evaluable).

The base class is the generic behaviour, so a framework overrides only where it differs. Generic code
gets a framework with kg.frameworks.registry.get(job.framework) and never compares names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

# ZeRO's cumulative stages (Rajbhandari et al. 2020 §5: P_os, P_os+g, P_os+g+p) and the FSDP strategies
# that partition the same state (torch.distributed.fsdp ShardingStrategy docs)
FSDP_LEVEL = {"full_shard": 3, "hybrid_shard": 3, "shard_grad_op": 2, "hybrid_shard_zero2": 2, "no_shard": 0}


@dataclass(frozen=True)
class Release:
    """A pinned release optkg read: ``version`` of ``package``, where its facts were read, and the
    defaults of this release that differ from the framework's others (setting -> value)."""

    version: str
    source: str = ""
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Sharding:
    """What one GPU keeps of the model states: ``level`` 0 (replicated) .. 3 (weights, gradients and
    optimizer states partitioned, ZeRO-3 / FULL_SHARD), over ``group`` GPUs; ``lines`` say so."""

    level: int = 0
    group: int = 1
    lines: list[str] = field(default_factory=list)
    dense_group: int | None = None    # optimizer-state group of non-expert parameters when not ``group``
    expert_group: int | None = None   # optimizer-state group of routed-expert parameters when not ``group``
    expert_shard_group: int | None = None  # FSDP group of routed-expert weights, gradients and optimizer states
    #                                        when not ``group`` (torchtitan's efsdp mesh under EP)


@dataclass(frozen=True)
class SpeedTraits:
    """What kg.speed.training needs to know of a framework to time a step.

    ``kernels``: the calibration key of its kernels in kg/speed/training/constants.yaml (``megatron``: Transformer
    Engine GEMMs and fused attention, the reference the GPU constants are fitted for; ``fsdp``, ``torchtitan``:
    a factor fitted on the framework's own published rows). ``tp_overlap`` / ``dp_overlap``: whether TP and
    data-parallel communication overlap compute when the job does not say (``tp_comm_overlap`` /
    ``overlap_grad_reduce``). ``selective_gemm_recompute``: the share of forward GEMMs its *selective*
    recomputation runs again (Megatron's recomputes the core attention only: 0). ``fsdp_reduce_bytes``: bytes per
    gradient element its FSDP / ZeRO-3 reduce-scatter moves (2: BF16; torchtitan reduces in float32: 4).
    ``source``: where these defaults are read."""

    kernels: str
    tp_overlap: bool = False
    dp_overlap: bool = True
    selective_gemm_recompute: float = 0.0
    source: str = ""
    fsdp_reduce_bytes: int = 2


@dataclass(frozen=True)
class LogLine:
    """A line the framework prints that carries a number optkg can compare (``pattern``: a regex with
    named groups), the unit of those numbers and where the framework prints it (path:line at a release)."""

    name: str
    pattern: str
    unit: str
    source: str


class TrainingFramework:
    """The generic framework: the answers any framework gives unless its package says otherwise."""

    id: str = ""
    name: str = ""
    aliases: tuple[str, ...] = ()
    package: str = ""                    # PyPI distribution the framework_version is a release of
    releases: tuple[Release, ...] = ()
    file_kind: str = ""                  # "a DeepSpeed config" for messages; "" when it reads no files
    # a stack naming this framework with a `command:` has it read by this framework's command reader
    # (NeMo and verl drive Megatron); None: the reader that claims the command
    command_reader: str | None = None
    # the reader that claims a command keeps it even when the stack names another framework
    keeps_reader_over_hint: bool = False
    log_lines: tuple[LogLine, ...] = ()
    # the framework's own programs that launch a job's processes, each with the subcommand its flags follow
    # (`accelerate launch`), and the `python -m` modules that are one of them (kg.inputs.training.argv reads them)
    launchers: tuple[tuple[str, str | None], ...] = ()
    launcher_modules: tuple[tuple[str, str], ...] = ()
    speed_backend: SpeedTraits | None = None  # kg.speed.training's step-time model for this framework; None: not evaluable

    # -- reading ------------------------------------------------------------------------------
    def claims_command(self, cmd: Any, args: str, script: str) -> int:
        """0 when ``cmd`` (kg.inputs.training.argv.Command; ``args`` its arguments joined, ``script``
        the script's base name) is not this framework's; else a priority (the highest claim reads it)."""
        return 0

    def read_command(self, text: str, model: Any, where: str, base_dir: Path | None, resolver: Callable | None):
        raise NotImplementedError(f"{self.id} reads no commands")

    def launcher_gpus(self, cmd: Any) -> None:
        """How this framework's own launcher sizes ``cmd`` (kg.inputs.training.argv.Command) when its flags give
        no number: set ``cmd.node_gpus`` (one process per GPU of the node), ``cmd.gpus_unknown`` (why the count
        is not in the command) or ``cmd.launcher_args["world_size"]``."""

    def claims_file(self, path: Path, data: Any) -> bool:
        """True when ``data`` (a parsed YAML/JSON file; None for files that are not YAML) is this framework's config."""
        return False

    def read_file(self, path: Path, job: Any, resolver: Callable | None, doc: Any = None):
        """Read ``path`` (``doc``: its parsed kg.core.yamlio.YamlDoc, when YAML) into ``job`` (a new job when None)."""
        raise NotImplementedError(f"{self.id} reads no files")

    # -- facts --------------------------------------------------------------------------------
    def settle(self, job: Any) -> None:
        """Set what the framework decides from the final world size and release (after --count and
        --framework-version are applied); the default decides nothing."""

    def implied_settings(self, job: Any, parallel: Mapping[str, int]) -> dict[str, Any]:
        """Settings this framework fixes for the layout (rule namespace names)."""
        return {}

    def defaults(self, version: str | None) -> dict[str, Any]:
        """The defaults of the pinned release ``version`` (the newest pinned one when None or not pinned)."""
        if not self.releases:
            return {}
        rel = next((r for r in self.releases if r.version == version), self.releases[-1])
        return dict(rel.defaults)

    # -- memory accounting --------------------------------------------------------------------
    def padded_vocab(self, vocab: int, tp: int, job: Any) -> int:
        """The embedding's row count: the vocabulary as given (frameworks that pad override)."""
        return vocab

    def grad_dtype_default(self, job: Any) -> str:
        """Gradient dtype when the job does not say: the params dtype (autograd's own)."""
        return job.get("params_dtype", "bf16")

    def implies_sequence_parallel(self, job: Any, tp: int) -> bool:
        """True when the framework shards norm/dropout activations over TP without a switch."""
        return False

    def expert_tp(self, job: Any, parallel: Mapping[str, int]) -> int:
        """Ranks that split each routed expert besides EP: megatron-core's expert tensor parallelism, ETP,
        defaulting to TP (0.16.1 model_parallel_config.py:413-414)."""
        return job.get("etp_size") or parallel["tp_size"]

    def sharding(self, job: Any, dp: int) -> Sharding:
        """Model-state partitioning from the job's settings: Megatron's distributed optimizer (optimizer
        states over DP), DeepSpeed ZeRO stages, FSDP strategies (hybrid: within a node-sized group)."""
        g = job.get
        zero = g("zero_stage", 0) or 0
        fsdp = g("fsdp_sharding")
        group = dp
        lines: list[str] = []
        if fsdp in ("hybrid_shard", "hybrid_shard_zero2"):
            group = g("dp_shard_size") or g("gpus_per_node") or min(dp, 8)
            lines.append(f"FSDP {fsdp}: sharded within groups of {group} GPUs, replicated across groups")
        elif g("dp_shard_size"):
            group = g("dp_shard_size")
        level = 0
        dense_group = expert_group = None
        if g("distributed_optimizer"):
            # megatron-core 0.16.1: dense parameters' grad buffers and distributed optimizer live on
            # intra_dp_cp_group (DP x CP; distributed_data_parallel.py:291-293, optimizer/__init__.py:637),
            # routed experts' on intra_expt_dp_group, world // (ETP x EP x PP) ranks with ETP defaulting
            # to TP (parallel_state.py:786-791, distributed_data_parallel.py:296-301, optimizer/__init__.py:675)
            level = 1
            par = job.parallel()
            cp = par["cp_size"]
            dense_group = dp * cp
            lines.append(f"Megatron distributed optimizer: optimizer states /DP {dp}" +
                         (f" x CP {cp} = {dense_group} (intra_dp_cp_group)" if cp > 1 else ""))
            if (job.shape().get("num_experts") or 0) > 1:
                etp = g("etp_size") or par["tp_size"]
                expert_group = max(1, par["world_size"] // (etp * par["ep_size"] * par["pp_size"]))
                lines.append(f"routed experts' optimizer states /expert-DP {expert_group} = world "
                             f"{par['world_size']} // (ETP {etp} x EP {par['ep_size']} x PP {par['pp_size']})")
        if zero:
            level = max(level, zero)
            lines.append(f"ZeRO-{zero}: partitioned over DP {group}")
        if fsdp:
            level = max(level, FSDP_LEVEL[fsdp])
            if fsdp in ("full_shard", "shard_grad_op"):
                lines.append(f"FSDP {fsdp}: sharded over DP {group}")
        return Sharding(level, group, lines, dense_group, expert_group)

    def gathered_unit_params(self, counts: Any, shape: Mapping[str, Any]) -> int:
        """Parameters ZeRO-3 / FSDP gathers at once (``counts``: kg.derive.training_memory.ParamCounts):
        the largest of a decoder layer and the embedding."""
        return counts.largest_layer

    def wording(self) -> dict[str, str]:
        """How the report names this framework's accounting: ``params`` (whose shard the parameter count
        is) and ``schedule`` (the pipeline schedule with PP > 1)."""
        return {"params": "parameters: the most loaded GPU's, (layers of the first stage + embedding)/TP, routed experts "
                          "/EP, before any ZeRO/FSDP sharding",
                "schedule": "1F1B", "schedule_interleaved": "interleaved 1F1B"}

    # -- cross-checks, tables -----------------------------------------------------------------
    def cross_checks(self, job: Any, memory: Any, shape: Mapping[str, Any], parallel: Mapping[str, int]) -> dict[str, Any]:
        """The framework's own estimator for this job (report key -> values with source and formula)."""
        return {}

    def generated_checks(self, job: Any) -> list[dict[str, Any]]:
        """The framework's own startup checks, generated from its released source, that fire on ``job``:
        [{rule_id, path, line, package, release, message, expr, values}]."""
        return []

    def config_checks(self, job: Any) -> list[dict[str, Any]]:
        """Checks generated from this framework's released source over its own config file, when ``job`` carries
        one (``job.configs``), whichever framework runs the job (an HF Trainer job with a DeepSpeed config): same
        shape as ``generated_checks``."""
        return []

    def check_tables(self) -> list[Path]:
        """Generated check tables of this framework (beside its package, one per pinned release)."""
        import sys
        here = Path(sys.modules[type(self).__module__].__file__).parent / "checks"
        return sorted(here.glob("*.yaml")) if here.is_dir() else []
