"""SGLang (``python -m sglang.launch_server``, ``sglang serve``): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/sglang.yaml`` (flags, programs, defaults from ``python/sglang/srt/server_args.py``),
``catalog/engines/releases/sglang.yaml``, ``catalog/engines/options/sglang.yaml``,
``catalog/engines/checks/sglang-*.yaml`` and ``catalog/support/sglang-*.yaml``.

Modules, in the order of the data flow: ``launch`` (``--config FILE``), ``memfrac`` (the default
``mem_fraction_static`` computed from the GPU), ``budget`` (the static pool), ``dcp`` (its DCP sizes), ``pools`` and
``capacity`` (its token, SWA and Mamba pools in place of vLLM's per-layer plan), ``logs`` and ``reconcile``. ``checkns``: SGLang's own inputs for the generated check rows.
"""
from __future__ import annotations

from typing import Any

from kg.engines.base import Engine, SpeedBackend, dp_pool_totals


class SGLang(Engine):
    name = "sglang"
    title = "SGLang"
    flags_need_release_evidence = True
    preallocates_kv_memory = True  # diagnose: a stack of it is a serving workload
    log_priority = 1
    total_counts_every_dp_pool = True  # --dp N runs N schedulers, each with its own KV pool
    keeps_null_block = False
    kv_token_pool = True  # one token per slot (page size 1 by default), capped by max_running_requests

    # ---- launch
    def launch_words(self, launch: Any) -> list[str]:
        """The arguments with a ``--config FILE`` expanded before them (kg.engines.sglang.launch)."""
        from kg.engines.sglang.launch import expand_config
        return expand_config(list(launch.args), launch)

    def check_inputs(self, stack: Any, release: str) -> dict[str, Any] | None:
        """SGLang's ServerArgs fields, environment, platform and model facts for ``stack`` (kg.engines.sglang.checkns),
        the names of the generated check rows of catalog/engines/checks/sites/sglang-RELEASE.yaml."""
        from kg.engines.sglang.checkns import namespace
        return namespace(stack, release)

    def check_functions(self) -> dict[str, Any]:
        """kg.engines.sglang.checkns.FUNCTIONS: Python's truth, type tests and the string methods SGLang's checks call."""
        from kg.engines.sglang.checkns import FUNCTIONS
        return FUNCTIONS

    # ---- releases and defaults
    def context_limit(self, model: Any, ns: dict[str, Any] | None = None, release: str | None = None) -> int | None:
        """SGLang's context length for the model, else max_position_embeddings."""
        limit = model.sglang_context_length
        return model.max_position_embeddings if limit is None else limit

    def memory_fraction(self, stack: Any, ns: dict[str, Any]) -> tuple[float, str]:
        """``mem_fraction_static``: given, else computed from the GPU (kg.engines.sglang.memfrac: 0.5.1 - 0.5.9 and
        >= 0.5.18), else the release's or the table's default."""
        from kg.inputs.effective import setting_given
        if not setting_given(stack, "gpu_memory_utilization") and stack.hardware and stack.model is not None:
            from kg.derive.kv import gpu_memory_bytes
            from kg.core.relcmp import older_than
            from kg.engines.sglang.memfrac import default_mem_fraction
            from kg.engines.sglang.vlm import vlm_factor
            dp = int(ns.get("dp_size") or 1)
            mf = default_mem_fraction(
                gpu_memory_bytes(stack.hardware), int(ns.get("tp_size") or 1), int(ns.get("pp_size") or 1),
                is_mla=bool(stack.model.is_mla),
                attn_dp_size=dp if "dp-attention" in stack.techniques else 1,
                chunked_prefill_size=ns.get("chunked_prefill_size") if setting_given(stack, "chunked_prefill_size") else None,
                max_running_requests=ns.get("max_num_seqs") if setting_given(stack, "max_num_seqs") else None,
                cuda_graph_disabled="cuda-graphs" not in stack.techniques,
                deepep=str(ns.get("moe_a2a_backend") or "").lower() == "deepep", engine_version=stack.engine_version,
                max_prefill_tokens=ns.get("max_prefill_tokens") if setting_given(stack, "max_prefill_tokens") else None,
                vision=vlm_factor(stack.model.raw_config, stack.model.architecture, ns.get("disaggregation_mode")),
                speculative=ns.get("speculative_method") if "speculative-decoding" in stack.techniques else None)
            if mf is not None and older_than(stack.engine_version, "0.5.18"):
                return mf.fraction, (f"{mf.basis()} [sglang 0.5.9 srt/server_args.py:911-1060, 0.5.5 :665-825, "
                                     "0.5.1 :354-393]")
            if mf is not None:
                return mf.fraction, (f"{mf.basis()} [sglang 0.5.23 srt/arg_groups/memory_hook.py:281-399; "
                                     f"0.5.18 srt/server_args.py:4969-4980, 5082-5118]")
        return super().memory_fraction(stack, ns)

    # ---- budget
    def expert_shards(self, stack: Any, ns: dict[str, Any], tp: int) -> int:
        """``tp_size / moe_dp_size``: the MoE layers split the TP group into ``moe_tp_size = tp_size // ep_size //
        moe_dp_size`` ranks per expert times ``ep_size`` (so ``--tp 8 --ep 4`` splits the experts 8 ways, not 4):
        sglang 0.5.23 srt/runtime_context.py:154; 0.5.10 srt/distributed/parallel_state.py:1887; 0.4.10
        parallel_state.py:1354 (``tensor_model_parallel_size // moe_ep_size``, before ``--moe-dp-size``)."""
        return max(1, tp // int(ns.get("moe_dp_size") or 1))

    def budget(self, inp: Any) -> Any:
        from kg.engines.sglang.budget import budget
        return budget(inp)

    # ---- KV
    def loaded_dtype(self, dtype: str, explicit: bool, compute_capability: float | None, version: str | None,
                     model_type: str = "") -> str:
        """With ``--dtype auto`` a float32 checkpoint runs in float16, a Gemma one in bfloat16 (SGLang 0.5.23
        srt/configs/model_config.py:2303-2319, "Following the common practice, we use float16 for float32")."""
        if not explicit and dtype == "float32":
            return "bfloat16" if model_type.startswith("gemma") else "float16"
        return dtype

    def has_dcp(self, version: str | None) -> bool:
        from kg.engines.sglang.dcp import has_dcp
        return has_dcp(version)

    def dcp_sizes(self, version: str | None, model: Any, attention_tp: int) -> list[int] | None:
        from kg.engines.sglang.dcp import valid_dcp_sizes_sglang
        return valid_dcp_sizes_sglang(model, attention_tp) if self.has_dcp(version) else [1]

    def kv_plan(self, stack: Any, ns: dict[str, Any], model: Any, tp: int, pp: int, dcp: int, kv_cache_dtype: str,
                max_model_len: int, max_num_batched_tokens: int, draft_layers: int = 0) -> Any:
        """None: SGLang's pools (``capacity``) count its tokens, not vLLM's per-layer plan."""
        return None

    def capacity(self, cap: Any, ctx: Any) -> Any:
        """SGLang's pools (kg.engines.sglang.capacity)."""
        from kg.engines.sglang.capacity import sglang_capacity
        return sglang_capacity(cap, ctx.derived, ctx.model, ctx.attention_tp, ctx.budget, ctx.ns, ctx.kv_cache_dtype)

    def capacity_totals(self, derived: dict[str, Any], cap: Any, ctx: Any) -> None:
        """``--dp N`` runs N schedulers, each with its own KV pool (N attention groups of tp / N ranks under DP
        attention, else N replicas of tp ranks): the total counts every pool, and the deployment serves N times one
        pool's concurrency."""
        dp_pool_totals(derived, cap, ctx.dp_size, "one pool per scheduler")

    def auto_kv_cache_dtype(self, model: Any, version: str | None, kv_cache_dtype: str | None,
                            cc: float | None = None) -> dict[str, str] | None:
        from kg.engines.dsa_kv import sglang_dsa_kv  # a DSA model on compute capability >= 10: fp8_e4m3
        return sglang_dsa_kv(model, version, cc) if str(kv_cache_dtype or "auto").lower() == "auto" else None

    def apply_auto_kv_cache_dtype(self, model: Any, version: str | None, ns: dict[str, Any],
                                  derived: dict[str, Any], cc: float | None = None) -> None:
        from kg.engines.vllm.kv_dtype import apply_auto
        apply_auto(self.auto_kv_cache_dtype(model, version, ns.get("kv_cache_dtype"), cc), ns, derived)

    def default_launch_command(self, model_name: str, tp: int, pp: int) -> str | None:
        """``python -m sglang.launch_server --model-path M --tp N --pp-size M``: the budget ``check --sglang`` gives
        it (mem_fraction_static by GPU, kg.engines.sglang.memfrac), not vLLM's."""
        import shlex
        return shlex.join(["python", "-m", "sglang.launch_server", "--model-path", model_name, "--tp", str(tp),
                           "--pp-size", str(pp)])

    def kv_report_extras(self, model: Any, tp: int, kv_budget_gib: float | None, kv_cache_dtype: str,
                         mamba_ssm_cache_dtype: str | None, max_model_len: int | None) -> dict[str, Any]:
        """``sglang_pools``: SGLang 0.5.23's pools for ``--kv-budget-gib`` (kg.engines.sglang.capacity)."""
        if kv_budget_gib is None:
            return {}
        from kg.engines.sglang.capacity import sglang_pool_report
        return {"sglang_pools": sglang_pool_report(model, tp, kv_budget_gib, kv_cache_dtype, mamba_ssm_cache_dtype,
                                                   max_model_len)}

    # ---- parallel layout
    def dp_attention_splits_tp(self, techniques: Any) -> bool:
        """DP attention splits the TP group into dp attention groups (ServerArgs._handle_data_parallelism,
        layers/dp_attention.py: attn_tp = tp / dp)."""
        return "dp-attention" in techniques

    # ---- facts
    def engine_facts(self, stack: Any, ns: dict[str, Any], out: dict[str, Any]) -> None:
        """``moe_a2a_backend`` defaults to none (ServerArgs.moe_a2a_backend); the model registry's
        ``sglang_architecture_refused`` (kg.engines.sglang.registry)."""
        if ns.get("moe_a2a_backend") is None:
            out["moe_a2a_backend"] = "none"
        from kg.engines.sglang.registry import registry_facts
        out.update(registry_facts(stack))  # whether the release's model registry has the served architecture

    def support_facts(self, out: dict[str, Any], ns: dict[str, Any]) -> None:
        """``sglang_enable_spec_v2`` (SGLANG_ENABLE_SPEC_V2, catalog/support/sglang-spec-v2.yaml): the setting, else the
        release's default; from 0.5.14 the v2 worker is the only one."""
        if "spec_v2_default" in out:
            given = ns.get("sglang_enable_spec_v2")
            out["sglang_enable_spec_v2"] = True if out.get("spec_v2_always") else (
                bool(given) if given is not None else bool(out["spec_v2_default"]))

    # ---- logs
    def read_log(self, lines: list[str], path: str) -> Any:
        from kg.engines.sglang.logs import parse
        return parse(lines, path)

    def reconcile_log(self, log: Any, parts: dict[str, Any] | None, stack: Any, rec: Any) -> None:
        from kg.engines.sglang.reconcile import reconcile_log
        reconcile_log(log, parts, stack, rec)

    def logged_kv_budget(self, log: Any) -> tuple[float, str] | None:
        """K + V sizes of "KV Cache is allocated" (MHA), or its KV size (MLA)."""
        k, v, kv = log.values.get("k_size"), log.values.get("v_size"), log.values.get("kv_size")
        if k is not None and v is not None:
            return k.value + v.value, f"{log.path}:{k.line} (K + V size)"
        if kv is not None:
            return kv.value, f"{log.path}:{kv.line} (KV size)"
        return None

    def compare_logs(self, own: Any, other: Any) -> list[str]:
        from kg.engines.sglang.reconcile import compare_with_vllm
        return compare_with_vllm(own, other)

    # ---- speed
    def speed_backend(self, stack: Any) -> SpeedBackend:
        """aiconfigurator-core's ``sglang`` backend (sdk/backends/factory.py at 0.12.0); ``release``: the stack's
        SGLang release, which kg.speed maps to the nearest release the estimator's database has."""
        return SpeedBackend("sglang", getattr(stack, "engine_version", None) or "",
                            "aiconfigurator-core backend 'sglang' (sdk/backends/sglang_backend.py)")


ENGINE = SGLang()
