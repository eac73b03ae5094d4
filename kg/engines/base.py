"""The protocol every serving engine package implements, and its default for an unknown or absent engine.

Generic code (``kg.analyses``, ``kg.cli``) asks ``kg.engines.get(name)`` / ``kg.engines.of(stack)`` for an engine
and calls these methods; it never compares engine names. A package ``kg/engines/<name>/`` defines a subclass of
:class:`Engine` as ``ENGINE`` and overrides what its engine does differently; what it does not override is the
behaviour of an engine optkg knows nothing special about (the flag table's parser, the model's
``max_position_embeddings`` as its context limit, vLLM-like memory arithmetic for a given fraction ...). The
engine's data stays in the catalog: ``catalog/engines/<name>.yaml`` (flags, programs, defaults),
``catalog/engines/releases/<name>.yaml`` (releases and per-release defaults), ``catalog/engines/options/``,
``catalog/engines/checks/`` and ``catalog/support/`` (generated and hand-written tables).

The methods follow the data flow of ``optkg check`` (kg.analyses.stackfacts is the pipeline that calls them):

1. launch: ``read_launch`` (a detected command, ``kg.inputs.launch.registry.Launch``), ``launch_words``,
   ``parse_command`` (``--vllm`` / ``--sglang``: a command or a bare list of flags), ``file_formats`` (whole files
   an engine reads, e.g. the TensorRT-LLM LLM-API YAML);
2. releases and defaults: ``release_facts`` (facts the release table's ``when`` conditions read),
   ``context_limit``, ``default_max_num_batched_tokens``, ``default_max_num_seqs``, ``memory_fraction``,
   ``backend`` (for an engine with several);
3. the memory budget: ``weight_share_bytes``, ``expert_shards``, ``given_kv_budget``, ``kv_sizing``, ``budget``
   (the lines of ``kg.derive.budget.ServingBudget``), ``block_count_budget``;
4. the KV plan and capacity: ``apply_auto_kv_cache_dtype`` / ``auto_kv_cache_dtype``, ``dcp_sizes`` /
   ``has_dcp``, ``kv_plan``, ``null_block_bytes``, ``model_limits``, ``capacity``, ``capacity_totals``, ``finish_capacity``,
   ``kv_report_extras`` (``optkg kv``);
5. parallel layout: ``dp_attention_splits_tp``, ``attention_dp_size``, ``world_size``, ``total_counts_every_dp_pool``;
6. facts rules read: ``engine_facts``, ``uses_v0``, ``loaded_dtype``, ``quantization_facts``,
   ``default_attention_backend``, ``support_facts``;
7. startup logs: ``read_log``, ``reconcile_log``, ``logged_kv_budget``, ``logged_kv_tokens``, ``compare_logs``;
8. slots filled from other packages' data: ``capability_tables`` (generated from the released wheels) and
   ``speed_backend`` (the speed estimator's backend for a stack, or why it has none).

Where an engine optkg knows nothing special about needs a number (the KV budget, the per-layer KV plan, the null
block), the default is vLLM's arithmetic (``kg.engines.vllm``), the closest model optkg has of a paged engine:
that is what every engine without its own model got before the engines had packages.

Each method's docstring says what it returns for an engine that does not override it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class NotEvaluable:
    """Why something cannot be computed for a stack (a reason a user can act on)."""

    reason: str


@dataclass(frozen=True)
class SpeedBackend:
    """The speed estimator's name for an engine release: ``backend`` (aiconfigurator's backend name) and the
    ``release`` of its database the stack's release maps to, with ``basis`` (why that release)."""

    backend: str
    release: str
    basis: str = ""


class Engine:
    """An engine optkg knows nothing special about: the generic behaviour (module doc). Subclasses set ``name``
    (the engine id of stacks and catalog files) and ``title`` (how output names it), and override methods."""

    name = "unknown"
    title = "unknown engine"
    flags_need_release_evidence = False  # optkg validate wants since:/evidence: on every flag of its table
    fraction_given_source: str | None = None  # how a given memory fraction is named (None: the generic text)
    fraction_table_source: str | None = None  # how the flag table's default fraction is named
    finished_counter_counts_aborts = False  # its finished-requests counter includes aborted ones (diagnose)
    preallocates_kv_memory = False  # diagnose reads a stack of it as a serving workload
    log_priority = 100  # startup logs are offered to the engines in this order (lower first)
    decode_context_parallel = True  # False: no DCP in any release (has_dcp False, dcp_sizes [1])
    keeps_null_block = True  # its block pool holds one block back as the null block (vLLM >= 0.29.0)
    kv_command = True  # `optkg kv --engine` reports it (vLLM's plan, with kv_report_extras); False: check's pool only

    def __repr__(self) -> str:
        return f"<engine {self.name}>"

    # ---- 1. launch ---------------------------------------------------------------------------------------------
    def read_launch(self, launch: Any) -> Any:
        """The Stack of a detected launch of this engine (``kg.inputs.launch.registry.Launch``): the words after
        the program parsed with the engine's flag table (``kg.inputs.launch.argv.parse_words``), then the launch
        context (container release, ``--gpus``, notes)."""
        from kg.inputs.launch.argv import parse_words
        from kg.inputs.launch.registry import apply_context
        from kg.inputs.modelcfg import resolve_model
        st = parse_words(self.launch_words(launch), launch.catalog, self.name, label=launch.label, env=launch.env,
                         launch=launch.prefix, model_override=launch.model_override,
                         resolver=launch.resolver or resolve_model, engine_version=launch.engine_version)
        return apply_context(st, launch)

    def launch_words(self, launch: Any) -> list[str]:
        """The words ``read_launch`` parses: the launch's arguments as given (an engine may expand a ``--config``
        file here)."""
        return list(launch.args)

    def parse_command(self, command: str, catalog: Any, model_override: str | None = None,
                      flag_label: str | None = None, resolver: Callable[[str], Any] | None = None) -> Any:
        """A Stack from a command of this engine or a bare list of its flags (``--vllm`` / ``--sglang`` and
        ``kg.stack_from_command(engine=...)``): ``kg.inputs.launch.argv.parse_with_table``."""
        from kg.inputs.launch.argv import parse_with_table
        from kg.inputs.modelcfg import resolve_model
        return parse_with_table(command, catalog, self.name, model_override, flag_label, resolver or resolve_model)

    def file_formats(self) -> list[Any]:
        """Whole files this engine reads (``kg.inputs.launch.registry.FileFormat``), e.g. an LLM-API YAML: none."""
        return []

    # ---- 2. releases and defaults ---------------------------------------------------------------------------------
    def release_facts(self, stack: Any, ns: dict[str, Any]) -> dict[str, Any]:
        """Facts the release table's ``when`` conditions read beyond the stack's values (kg.inputs.effective):
        ``max_model_len_effective`` when the stack gives ``max_model_len``."""
        return {"max_model_len_effective": int(ns["max_model_len"])} if ns.get("max_model_len") else {}

    def context_limit(self, model: Any, ns: dict[str, Any] | None = None, release: str | None = None) -> int | None:
        """The longest context the engine accepts for ``model`` (and runs with when none is given): the model's
        ``max_position_embeddings``."""
        return model.max_position_embeddings

    def default_max_num_batched_tokens(self, hardware: dict[str, Any]) -> int:
        """Tokens per scheduler step when the stack gives none: ``vllm serve``'s default for the GPU
        (kg.engines.vllm.kv_plan.default_max_num_batched_tokens)."""
        from kg.engines.vllm.kv_plan import default_max_num_batched_tokens
        gib = float(hardware["memory_gib"]) if hardware.get("memory_gib") else None
        return default_max_num_batched_tokens(gib, str(hardware.get("id") or ""), hardware.get("compute_capability"))

    def default_max_num_seqs(self, hardware: dict[str, Any], max_num_batched_tokens: int) -> int:
        """Requests per step when the stack gives none: ``vllm serve``'s (256 with a 2,048-token step, else 1,024)."""
        return 256 if max_num_batched_tokens == 2048 else 1024

    def memory_fraction(self, stack: Any, ns: dict[str, Any]) -> tuple[float, str]:
        """The fraction of GPU memory the engine sizes its cache from (``gpu_memory_utilization`` in the stack's
        settings) and its source: given, else the release's default, else the flag table's
        (kg.derive.budget.resolve_utilization)."""
        from kg.derive.budget import engine_table, resolve_utilization
        from kg.inputs.effective import setting_given, stack_facts
        table_default = ((engine_table(stack.engine or "") or {}).get("defaults") or {}).get("gpu_memory_utilization")
        given = setting_given(stack, "gpu_memory_utilization")
        return resolve_utilization(stack.engine, stack.engine_version, ns.get("gpu_memory_utilization"),
                                   table_default, given, facts=None if given else stack_facts(stack, self.release_facts),
                                   **({"given_source": self.fraction_given_source} if self.fraction_given_source else {}),
                                   table_source=self.fraction_table_source)

    def backend(self, stack: Any, ns: dict[str, Any]) -> str | None:
        """Which of the engine's backends runs the stack, for an engine with several (LMDeploy): None."""
        return None

    def kv_sizing(self, stack: Any, ns: dict[str, Any]) -> str | None:
        """How the engine sizes the KV cache when it has several ways (vLLM's extensible cache): None, the one way."""
        return None

    # ---- 3. the memory budget ------------------------------------------------------------------------------------
    def weight_share_bytes(self, total_memory_bytes: float, fraction: float) -> float:
        """The memory the weights must fit in, bytes per GPU: ``total x fraction``."""
        return total_memory_bytes * fraction

    def expert_shards(self, stack: Any, ns: dict[str, Any], tp: int) -> int:
        """How many ways each pipeline stage's routed-expert weights are split over its GPUs: the TP size, or with
        expert parallelism the EP size given (``ep_size``), else TP x DP."""
        if "expert-parallelism" in stack.techniques:
            ep = int(ns.get("ep_size") or 1)
            return ep if ep > 1 else tp * int(ns.get("dp_size") or 1)
        return tp

    def kv_size_given(self, ns: dict[str, Any]) -> str | None:
        """The flag by which the stack sets the KV cache's size itself, allocated whatever the GPU holds
        (kg.analyses.stackfacts checks it against the memory after the weights), else None: None."""
        return None

    def given_kv_budget(self, ns: dict[str, Any]) -> tuple[float, str] | None:
        """A KV budget the stack gives in the engine's own terms, with its source (``kv_budget_gib`` is read
        before this): none."""
        return None

    def budget(self, inp: Any) -> Any:
        """The KV budget breakdown for one GPU (``kg.derive.budget.BudgetInputs`` -> ``ServingBudget``): vLLM's
        (kg.engines.vllm.budget)."""
        from kg.engines.vllm.budget import budget
        return budget(inp)

    def block_count_budget(self, ns: dict[str, Any], plan: Any) -> tuple[float, str] | None:
        """A KV budget fixed by a block count the stack gives, once the plan knows a block's bytes: none."""
        return None

    # ---- 4. the KV plan and capacity -----------------------------------------------------------------------------
    def auto_kv_cache_dtype(self, model: Any, version: str | None, kv_cache_dtype: str | None,
                            cc: float | None = None) -> dict[str, str] | None:
        """What the engine stores for ``kv_cache_dtype`` 'auto' when the checkpoint names a KV format or the model
        and the CUDA GPU's compute capability ``cc`` decide it (``{"dtype", "checkpoint", "source"}``): None (the
        model's dtype)."""
        return None

    def apply_auto_kv_cache_dtype(self, model: Any, version: str | None, ns: dict[str, Any],
                                  derived: dict[str, Any], cc: float | None = None) -> None:
        """Put ``auto_kv_cache_dtype`` into the check namespace (``kv_cache_dtype``) and ``derived``: nothing."""

    def has_dcp(self, version: str | None) -> bool:
        """Whether the engine has decode context parallelism at ``version`` (None: the latest known):
        ``decode_context_parallel``."""
        return self.decode_context_parallel

    def dcp_sizes(self, version: str | None, model: Any, attention_tp: int) -> list[int] | None:
        """The DCP sizes the engine splits a TP group into (``[1]``: none), or None to keep the generic sizes of
        kg.derive.kv (vLLM's rule): those, or ``[1]`` without DCP."""
        return None if self.decode_context_parallel else [1]

    def kv_plan(self, stack: Any, ns: dict[str, Any], model: Any, tp: int, pp: int, dcp: int, kv_cache_dtype: str,
                max_model_len: int, max_num_batched_tokens: int, draft_layers: int = 0) -> Any:
        """The per-layer KV plan (``kg.engines.vllm.kv_plan.KVPlan``) or None (no plan: the per-token layout of
        kg.derive.kv counts the capacity): vLLM V1's plan for the stack's settings."""
        from kg.engines.vllm.kv_plan import stack_plan
        return stack_plan(stack, ns, model, tp, pp, dcp, kv_cache_dtype, max_model_len, max_num_batched_tokens,
                          draft_layers)

    def null_block_bytes(self, version: str | None, bytes_per_block: float) -> float:
        """Bytes the engine keeps out of the pool for its null block: vLLM's (one block from 0.29.0) when
        ``keeps_null_block``, else 0."""
        if not self.keeps_null_block:
            return 0.0
        from kg.engines.vllm.kv_plan import null_block_bytes
        return null_block_bytes(version, bytes_per_block)

    def model_limits(self, stack: Any, ns: dict[str, Any], model: Any, max_num_batched_tokens: int) -> dict[str, Any]:
        """Facts of startup limits the model meets in this engine (vLLM: an encoder item over the batch): none."""
        return {}

    def capacity(self, cap: Any, ctx: Any) -> Any:
        """The KV capacity (``kg.derive.kv.KVCapacity``) in the engine's own pools, or ``NotEvaluable(reason)`` when
        the pool needs a fact optkg lacks (no token count is reported then); ``ctx`` is the step's context
        (kg.analyses.stackfacts.KVContext): the per-token capacity as it is."""
        return cap

    def capacity_totals(self, derived: dict[str, Any], cap: Any, ctx: Any) -> None:
        """Totals over the engine's data-parallel ranks, written into ``derived``: none."""

    def finish_capacity(self, derived: dict[str, Any], ctx: Any) -> None:
        """Rewrite the capacity the way an engine generation with its own counting does (vLLM V0): nothing."""

    def default_launch_command(self, model_name: str, tp: int, pp: int) -> str | None:
        """The engine's launch command with its defaults at ``tp`` x ``pp``, whose budget ``optkg kv --gpu`` prints
        (kg.analyses.kvreport.engine_default_budget reads it as ``check`` does), or None: vLLM's
        (kg.engines.vllm.budget.gpu_default_budget)."""
        return None

    def kv_report_extras(self, model: Any, tp: int, kv_budget_gib: float | None, kv_cache_dtype: str,
                         mamba_ssm_cache_dtype: str | None, max_model_len: int | None) -> dict[str, Any]:
        """Sections ``optkg kv --engine`` adds to its report: none."""
        return {}

    # ---- 5. parallel layout --------------------------------------------------------------------------------------
    total_counts_every_dp_pool = False  # kv_tokens_total counts the pool of every data-parallel rank
    # it refuses to start when one max_model_len request does not fit in its KV pool (vLLM); SGLang starts and caps
    # the request length at the pool (0.5.23 srt/managers/tp_worker.py:556-571, "Not an error")
    refuses_context_over_kv_pool = False
    kv_token_pool = False  # its KV pool holds tokens one by one (no blocks a request reserves)

    def dp_attention_splits_tp(self, techniques: Any) -> bool:
        """Whether data parallelism runs inside the TP group (attention DP) rather than as replicas: no."""
        return False

    def attention_dp_size(self, stack: Any, ns: dict[str, Any], tp: int, dp: int) -> int:
        """The data-parallel size the KV layout splits the TP group by under attention DP: the stack's ``dp``."""
        return dp

    def world_size(self, tp: int, pp: int, pcp: int, dp: int, techniques: Any) -> int:
        """GPUs the launch needs: ``tp x pp x pcp x dp``, or ``tp x pp`` when DP splits the TP group."""
        return tp * pp if self.dp_attention_splits_tp(techniques) else tp * pp * pcp * dp

    # ---- 6. facts rules read -------------------------------------------------------------------------------------
    def uses_v0(self, version: str | None, ns: dict[str, Any]) -> bool:
        """Whether the stack runs a legacy engine generation with its own arithmetic (vLLM V0): no."""
        return False

    def engine_facts(self, stack: Any, ns: dict[str, Any], out: dict[str, Any]) -> None:
        """Add the engine's own facts (defaults of options rules compare) to ``out`` (check's engine facts)."""

    def loaded_dtype(self, dtype: str, explicit: bool, compute_capability: float | None, version: str | None,
                     model_type: str = "") -> str:
        """The dtype the weights are loaded in for the effective ``dtype`` (``explicit``: given with --dtype, not
        auto): that dtype."""
        return dtype

    def lora_slot_bytes(self, model: Any, tp: int, ns: dict[str, Any]) -> tuple[float, str | None]:
        """(bytes per GPU the engine allocates for LoRA adapter slots at start-up, a note): none."""
        return 0.0, None

    def float16_refused(self, model_type: str, version: str | None) -> bool | None:
        """Whether the release refuses ``--dtype float16`` for ``model_type``: not known (None)."""
        return None

    def quantization_facts(self, explicit: str | None, version: str | None) -> dict[str, Any]:
        """Facts about a ``--quantization`` name against the release's list: none."""
        return {}

    def default_attention_backend(self, ns: dict[str, Any]) -> str | None:
        """The attention backend the engine picks when none is named, when optkg knows it: None."""
        return None

    def support_facts(self, out: dict[str, Any], ns: dict[str, Any]) -> None:
        """Effective values of the engine's per-release support data, written into ``out``: none."""

    # ---- 7. startup logs -----------------------------------------------------------------------------------------
    def read_log(self, lines: list[str], path: str) -> Any:
        """The ``kg.inputs.logs.StartupLog`` of a startup log this engine printed, or None (not its log)."""
        return None

    def reconcile_log(self, log: Any, parts: dict[str, Any] | None, stack: Any, rec: Any) -> None:
        """Fill ``rec`` (kg.analyses.reconcile.Reconciliation) from this engine's log: nothing."""

    def logged_kv_budget(self, log: Any) -> tuple[float, str] | None:
        """The KV-cache memory per GPU the log reports and where: its ``kv_cache_memory`` line."""
        x = log.values.get("kv_cache_memory")
        return (x.value, f"{log.path}:{x.line}") if x is not None else None

    def logged_kv_tokens(self, log: Any, block_size: int) -> tuple[float, str, bool] | None:
        """(tokens the log's KV pool holds, where, whether that count is already multiplied by the DCP size)."""
        tokens = log.values.get("kv_cache_tokens")
        if tokens is None:
            return None
        return tokens.value, f"{int(tokens.value):,} tokens (line {tokens.line})", False

    def compare_logs(self, own: Any, other: Any) -> list[str]:
        """Why this engine's reconciled log and another engine's hold different KV pools (sentences): none."""
        return []

    # ---- 8. slots for generated tables and the speed estimator -------------------------------------------------
    def capability_tables(self, release: str | None) -> list[Any]:
        """The capability tables generated from this engine's released wheel that hold at ``release`` (None: the
        latest known), as the checks lane's generator writes them: none for an engine without generated tables."""
        return []

    def check_inputs(self, stack: Any, release: str) -> dict[str, Any] | None:
        """The engine's own inputs for ``stack`` at ``release``: the names its generated check rows read when the
        sites file says ``inputs: <engine>`` (the checks lane's generator writes rows over the engine's fields rather
        than optkg's settings); None for an engine whose rows read optkg's settings."""
        return None

    def check_functions(self) -> dict[str, Any]:
        """The functions the rows of ``check_inputs`` call (kg.engine.expr extra functions); {} without such rows."""
        return {}

    def speed_backend(self, stack: Any) -> SpeedBackend | NotEvaluable:
        """The speed estimator's backend and database release for ``stack`` on this engine, or why there is none
        (the speed lane maps each engine; an engine without a mapping is not evaluable, never guessed)."""
        return NotEvaluable(f"no speed-estimator backend is mapped for engine '{self.name}'")


UNKNOWN = Engine()


def dp_pool_totals(derived: dict[str, Any], cap: Any, dp: int, basis: str) -> None:
    """Totals of ``dp`` KV pools of one pool's capacity ``cap`` (an engine's ``capacity_totals`` when each of its
    data-parallel ranks or schedulers keeps its own pool and requests): the tokens of all pools, ``basis`` saying
    why, and the concurrency of the whole server beside one pool's. Nothing for ``dp`` <= 1."""
    if dp <= 1:
        return
    derived["kv_tokens_total"] = cap.kv_tokens_total * dp
    derived["kv_tokens_total_basis"] = f"x dp {dp}: {basis}"
    if cap.max_concurrency is not None:
        derived["max_concurrency_per_attention_group"] = cap.max_concurrency
        derived["max_concurrency"] = round(cap.max_concurrency * dp, 2)
