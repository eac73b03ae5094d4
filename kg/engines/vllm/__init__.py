"""vLLM (``vllm serve``, the OpenAI api_server module): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/vllm.yaml`` (flags, programs, defaults; each entry cites ``vllm/engine/arg_utils.py``),
``catalog/engines/releases/vllm.yaml`` (releases and per-release defaults), ``catalog/engines/options/vllm.yaml``,
``catalog/engines/values/vllm-quantization.yaml``, ``catalog/engines/checks/vllm-*.yaml`` and
``catalog/support/vllm-*.yaml``.

Modules, in the order of the data flow: ``launch`` (``--config FILE``), ``runner`` (the V1 / V2 model runner per
release), ``kv_dtype`` (what ``--kv-cache-dtype auto`` stores for a checkpoint), ``budget`` (the profile run's
budget lines), ``kv_plan`` (the per-layer KV plan, blocks per request, the null block), ``v0`` (V0's whole-block
capacity), ``logs`` and ``reconcile`` (startup logs).
"""
from __future__ import annotations

import contextlib
from typing import Any

from kg.engines.base import Engine, SpeedBackend


class VLLM(Engine):
    name = "vllm"
    title = "vLLM"
    flags_need_release_evidence = True
    preallocates_kv_memory = True  # diagnose: a stack of it is a serving workload
    refuses_context_over_kv_pool = True  # V1's check (rules/capacity.yaml max-model-len-exceeds-kv-capacity)
    log_priority = 0  # before SGLang's reader: its lines skip SGLang's "KV Cache is allocated" (kg.engines.vllm.logs)
    finished_counter_counts_aborts = True  # vllm:request_success_total counts every finished_reason, abort included

    # ---- launch
    def launch_words(self, launch: Any) -> list[str]:
        """The arguments with a ``--config FILE`` expanded after the positional model (kg.engines.vllm.launch)."""
        from kg.engines.vllm.launch import expand_config
        return expand_config(list(launch.args), launch)

    # ---- releases and defaults
    def release_facts(self, stack: Any, ns: dict[str, Any]) -> dict[str, Any]:
        """``max_model_len_effective`` (given, else the model's derived context vLLM runs with),
        ``vllm_model_runner_v2``, the GPU model runner the release picks (kg.engines.vllm.runner), and what V0's
        long-context chunked-prefill switch reads (catalog/engines/releases/vllm.yaml): ``model_sliding_window``
        (an effective sliding window), ``model_is_multimodal``, ``model_seqlen_agnostic`` (Mamba / linear-attention
        layers), with a GPU, ``gpu_is_rocm``, and ``gpu_is_xpu`` (an Intel GPU)."""
        from kg.engines.vllm.runner import model_uses_v2_runner
        out: dict[str, Any] = {}
        m = stack.model
        mml = ns.get("max_model_len") or (m.derived_max_model_len if m is not None else None)
        if mml:
            out["max_model_len_effective"] = int(mml)
        if m is not None:
            out["model_sliding_window"] = m.sliding_window is not None
            out["model_is_multimodal"] = m.vision_model_type is not None
            out["model_seqlen_agnostic"] = bool(m.linear_attention)
        if (stack.hardware or {}).get("vendor"):
            out["gpu_is_rocm"] = str(stack.hardware["vendor"]).lower() == "amd"
        # the generated check rows of the Intel XPU platform walk (tools/vllm_generated_checks.py combine): an Intel
        # GPU; False without a GPU, which reads the CUDA / ROCm rows as before that walk existed
        out["gpu_is_xpu"] = str((stack.hardware or {}).get("vendor") or "").lower() == "intel"
        v2, _ = model_uses_v2_runner(m, stack.engine_version, ns.get("speculative_method"), int(ns.get("pp_size") or 1))
        if v2 is not None:
            out["vllm_model_runner_v2"] = v2
        return out

    def context_limit(self, model: Any, ns: dict[str, Any] | None = None, release: str | None = None) -> int | None:
        """vLLM's derived max_model_len (RoPE scaling applied as ``release`` does), else max_position_embeddings.
        ``--hf-overrides`` (a JSON object) and the older ``--rope-scaling`` (to 0.11.0) replace config.json's keys
        first: vllm 0.24.0 transformers_utils/config.py:759-761 ``config.update(hf_overrides_kw)``, 0.34.0 :1034-1036."""
        from kg.inputs.modelcfg import _rope_scaling, vllm_max_model_len
        from kg.inputs.vision import language_config
        raw = getattr(model, "raw_config", None)
        limit = model.derived_max_model_len
        text = language_config(raw) if isinstance(raw, dict) and raw else None
        if text is None and isinstance(raw, dict) and raw:  # a text model: overrides land on the keys vLLM reads
            over = _config_overrides(ns or {})
            rope = _rope_scaling({**raw, **over}) or {}
            yarn = str(rope.get("rope_type") or rope.get("type") or "") in ("yarn", "deepseek_yarn",
                                                                             "deepseek_llama_scaling")
            if over or (yarn and release is not None):
                limit = vllm_max_model_len({**raw, **over}, release=release)
        return model.max_position_embeddings if limit is None else limit

    # ---- budget
    def expert_shards(self, stack: Any, ns: dict[str, Any], tp: int) -> int:
        """Every fused-MoE layer spreads its experts over all ``dp x pcp x tp`` ranks, with or without
        ``--enable-expert-parallel`` (EP makes each rank own whole experts, TP splits each expert): vllm 0.34.0
        model_executor/layers/fused_moe/config.py:1143-1152 (``flatten_tp_across_dp_and_pcp``), :1235-1268
        (``if not use_ep``: the flattened TP size; else ``ep_size = tp_size``); 0.12.0 config.py:723-731,
        :814-844; 0.9.0 fused_moe/layer.py:146-173 (dp x tp, before PCP); 0.8.1 fused_moe/layer.py:362-390
        (``self.tp_size = self.tp_size * self.dp_size`` without EP, ``ep_size = tp_size * dp_size`` with it)."""
        return tp * int(ns.get("dp_size") or 1) * int(ns.get("pcp_size") or 1)

    def kv_sizing(self, stack: Any, ns: dict[str, Any]) -> str | None:
        """``"extensible"`` (``"extensible-rocm"`` on an AMD GPU) when vLLM >= 0.34.0 sizes the KV cache from the
        memory measured after warm-up (kg.engines.vllm.budget): on by default on CUDA / ROCm (never on an Intel GPU:
        extensible_sizing) unless
        ``--no-enable-extensible-kv-cache``, ``--kv-cache-memory-bytes``, ``--num-gpu-blocks-override``, elastic
        EP or a KV connector (optkg: any ``--kv-transfer-config``) turns it off (0.34.0 config/vllm.py:3180-3262,
        the same conditions as the gpu_memory_utilization 1.0 row of catalog/engines/releases/vllm.yaml); else None."""
        from kg.core.relcmp import older_than
        if older_than(stack.engine_version, "0.34.0") or ns.get("enable_extensible_kv_cache") is False:
            return None
        if any(ns.get(k) not in (None, "", False) for k in ("kv_cache_memory_bytes", "num_gpu_blocks_override",
                                                             "enable_elastic_ep", "kv_transfer_config")):
            return None
        from kg.engines.vllm.budget import extensible_sizing
        return extensible_sizing(stack.hardware)

    def kv_size_given(self, ns: dict[str, Any]) -> str | None:
        """``--kv-cache-memory-bytes`` (reserved as is, 0.34.0 v1/worker/gpu_worker.py:688-712) or
        ``--num-gpu-blocks-override`` (the block count replaces the profiled one, v1/core/kv_cache_planning.py:
        1617-1632): one tensor of that size is allocated (v1/worker/utils.py:645), however much memory is free."""
        if ns.get("num_gpu_blocks_override") is not None:  # replaces the count, also under --kv-cache-memory-bytes
            return f"--num-gpu-blocks-override {int(ns['num_gpu_blocks_override']):,}"
        return None if ns.get("kv_cache_memory_bytes") is None else "--kv-cache-memory-bytes"

    def given_kv_budget(self, ns: dict[str, Any]) -> tuple[float, str] | None:
        """``--kv-cache-memory-bytes``: vLLM reserves exactly this, skipping the profile and gpu_memory_utilization
        (0.33.0 gpu_worker.py:656-675)."""
        if ns.get("kv_cache_memory_bytes") is None:
            return None
        return float(ns["kv_cache_memory_bytes"]), "given (--kv-cache-memory-bytes)"

    def block_count_budget(self, ns: dict[str, Any], plan: Any) -> tuple[float, str] | None:
        """``--num-gpu-blocks-override``: the block count replaces the budget's (0.33.0
        v1/core/kv_cache_planning.py:240-247, 681-682)."""
        if ns.get("num_gpu_blocks_override") is None:
            return None
        n = int(ns["num_gpu_blocks_override"])
        return float(n * plan.bytes_per_block), (f"given (--num-gpu-blocks-override {n:,} blocks x "
                                                 f"{plan.bytes_per_block:,} B per block)")

    # ---- KV
    def auto_kv_cache_dtype(self, model: Any, version: str | None, kv_cache_dtype: str | None,
                            cc: float | None = None) -> dict[str, str] | None:
        from kg.engines.vllm.kv_dtype import vllm_auto_kv_cache_dtype
        return vllm_auto_kv_cache_dtype(model, version, kv_cache_dtype, cc)

    def apply_auto_kv_cache_dtype(self, model: Any, version: str | None, ns: dict[str, Any],
                                  derived: dict[str, Any], cc: float | None = None) -> None:
        from kg.engines.vllm.kv_dtype import apply_vllm_auto_kv_cache_dtype
        apply_vllm_auto_kv_cache_dtype(model, version, ns, derived, cc)

    def model_limits(self, stack: Any, ns: dict[str, Any], model: Any, max_num_batched_tokens: int) -> dict[str, Any]:
        """The encoder-item facts of rules/capacity.yaml encoder-item-exceeds-batched-tokens
        (kg.derive.encoder_cache.encoder_item_facts)."""
        from kg.derive.encoder_cache import encoder_item_facts
        return encoder_item_facts(model, max_num_batched_tokens)

    def capacity_totals(self, derived: dict[str, Any], cap: Any, ctx: Any) -> None:
        """``-dp N``: N engine cores, each with its own KV cache and its own requests
        (``kv_tokens_all_dp_engines``, ``max_concurrency_all_dp_engines``)."""
        dp = ctx.dp_size
        if dp > 1:
            derived["kv_tokens_all_dp_engines"] = derived["kv_tokens_total"] * dp
            if cap.max_concurrency is not None:
                derived["max_concurrency_all_dp_engines"] = round(derived["max_concurrency"] * dp, 2)

    def finish_capacity(self, derived: dict[str, Any], ctx: Any) -> None:
        """V0 counts whole blocks (kg.engines.vllm.v0)."""
        if self.uses_v0(ctx.stack.engine_version, ctx.ns):
            from kg.engines.vllm.v0 import apply_v0_blocks
            apply_v0_blocks(derived, ctx.ns, ctx.block_size, ctx.stack.engine_version)

    # ---- facts
    def uses_v0(self, version: str | None, ns: dict[str, Any]) -> bool:
        """``VLLM_USE_V1=0``, or a release below 0.8.0 (kg.engines.vllm.v0)."""
        from kg.engines.vllm.v0 import uses_v0
        return uses_v0(version, ns.get("vllm_use_v1"))

    def engine_facts(self, stack: Any, ns: dict[str, Any], out: dict[str, Any]) -> None:
        """V1 before 0.8.0 had FLASH_ATTN as its only non-MLA attention backend (vLLM PR 14221);
        ``all2all_backend`` defaults to allgather_reducescatter (EngineArgs.all2all_backend); ``cudagraph_mode``, when
        none is given, is the one the release configures (kg.engines.vllm.cudagraph); the release's model registry facts
        of the served architecture (kg.engines.vllm.registry); ``max_model_len_auto_available``: ``--max-model-len
        auto`` exists (human_readable_int_or_auto, 0.14.0 engine/arg_utils.py:301)."""
        m = stack.model
        if (not out.get("engine_uses_v0") and ns.get("attention_backend") is None and stack.engine_version
                and m is not None and not m.is_mla):
            from kg.core.relcmp import Release
            with contextlib.suppress(ValueError):  # an unparsable version was refused when the stack was read
                if Release(stack.engine_version) < Release("0.8.0"):
                    out["attention_backend"] = "FLASH_ATTN"
        if ns.get("all2all_backend") is None:
            out["all2all_backend"] = "allgather_reducescatter"
        from kg.engines.vllm.cudagraph import resolved_cudagraph_mode
        if (mode := resolved_cudagraph_mode(stack, ns)) is not None:
            out["cudagraph_mode"] = mode  # the mode the release configures when none is given
        from kg.engines.vllm.registry import registry_facts
        out.update(registry_facts(stack, ns))  # the model registry's facts of the served architecture
        from kg.core.relcmp import older_than  # --max-model-len auto / -1: fitted at start from 0.14.0
        out["max_model_len_auto_available"] = not older_than(stack.engine_version, "0.14.0")

    def loaded_dtype(self, dtype: str, explicit: bool, compute_capability: float | None, version: str | None,
                     model_type: str = "") -> str:
        """With ``--dtype auto``, vLLM 0.9.0+ falls back to float16 below compute capability 8.0 when the checkpoint
        is bfloat16 (0.9.0 config.py:3086-3101; 0.33.0 config/model.py:2444-2460); earlier releases keep it. A
        float32 checkpoint is downcast to the platform's preferred dtype, bfloat16 from compute capability 8.0
        (0.34.0 config/model.py:2484-2486, platforms/cuda.py:298-304), float16 below it or before 0.9.0. A model that
        refuses float16 (``float16_refused``) has it filtered out of the platform's dtypes (``_resolve_auto_dtype``,
        0.34.0 :2473-2477, 0.10.0 config.py:3364-3367): bfloat16 from 8.0, float32 below it (T4, V100)."""
        from kg.core.relcmp import older_than
        if not explicit and self.float16_refused(model_type, version) and dtype in ("float32", "bfloat16", "float16"):
            return "bfloat16" if compute_capability is None or compute_capability >= 8.0 else "float32"
        if not explicit and dtype == "float32":
            new = not older_than(version, "0.9.0")
            return "bfloat16" if new and (compute_capability is None or compute_capability >= 8.0) else "float16"
        if (not explicit and dtype == "bfloat16" and compute_capability is not None and compute_capability < 8.0
                and not older_than(version, "0.9.0")):
            return "float16"
        return dtype

    def lora_slot_bytes(self, model: Any, tp: int, ns: dict[str, Any]) -> tuple[float, str | None]:
        """--enable-lora: max_loras slots of every linear layer's A/B matrices (kg.derive.lora)."""
        if not ns.get("enable_lora"):
            return 0.0, None
        from kg.derive.lora import vllm_lora_slot_bytes
        got = vllm_lora_slot_bytes(model, tp, int(ns.get("max_loras") or 1), int(ns.get("max_lora_rank") or 16),
                                   bool(ns.get("fully_sharded_loras")))
        if got is None:
            return 0.0, ("LoRA slots not sized for this model (MoE / MLA / encoder-decoder): their memory is left in "
                         "the KV budget")
        return got, None

    def float16_refused(self, model_type: str, version: str | None) -> bool:
        """Whether vLLM ``version`` (None: the latest) refuses float16 for ``model_type``: its
        ``_FLOAT16_NOT_SUPPORTED_MODELS`` ("does not support float16", ``_check_valid_dtype``). Read: 0.10.0 / 0.10.1
        config.py:3293-3298 gemma2, gemma3, plamo2, glm4; 0.11.0-0.15.0 config/model.py (0.11.0 :1581-1587) also
        gemma3_text; 0.29.0-0.34.0 (0.34.0 :2442-2447) without plamo2. Not in 0.9.0; 0.9.1-0.9.2 not read (False);
        plamo2 in 0.16.0-0.28.0 not read (False)."""
        from kg.core.relcmp import older_than
        if not model_type or older_than(version, "0.10.0"):
            return False
        if model_type in ("gemma2", "gemma3", "glm4"):
            return True
        if model_type == "gemma3_text":
            return not older_than(version, "0.11.0")
        return model_type == "plamo2" and older_than(version, "0.16.0")

    def quantization_facts(self, explicit: str | None, version: str | None) -> dict[str, Any]:
        """``quantization_known_to_release`` (and the release's list): vLLM's ModelConfig refuses any name the
        release does not have ("Unknown quantization method"; catalog/engines/values/vllm-quantization.yaml)."""
        if not explicit:
            # no --quantization: no name for the release to refuse, no file to read
            return {"quantization_known_to_release": True, "quantization_config_files": ""}
        from kg.inputs.quantmethods import methods_at
        known = methods_at(self.name, version)
        if known is None:
            return {}
        return {"quantization_known_to_release": explicit in known[0],
                "quantization_methods_of_release": ", ".join(sorted(known[0])), "quantization_methods_release": known[1],
                "quantization_config_files": " or ".join(QUANT_CONFIG_FILES.get(explicit, ()))}

    def default_attention_backend(self, ns: dict[str, Any]) -> str | None:
        """V0 on an NVIDIA GPU below compute capability 8.0: XFORMERS (FlashAttention-2 needs Ampere: vLLM 0.6.5
        vllm/attention/selector.py:216-220)."""
        if not ns.get("engine_uses_v0"):
            return None
        cc = ns.get("gpu_compute_capability")
        if isinstance(cc, (int, float)) and str(ns.get("gpu_vendor") or "nvidia").lower() == "nvidia" and cc < 8.0:
            return "XFORMERS"
        return None

    # ---- logs
    def read_log(self, lines: list[str], path: str) -> Any:
        from kg.engines.vllm.logs import parse
        return parse(lines, path)

    def reconcile_log(self, log: Any, parts: dict[str, Any] | None, stack: Any, rec: Any) -> None:
        from kg.engines.vllm.reconcile import reconcile_v0, reconcile_v1
        if log.generation == "v0":
            reconcile_v0(log, parts, rec)
        else:
            reconcile_v1(log, parts, stack, rec)

    def logged_kv_tokens(self, log: Any, block_size: int) -> tuple[float, str, bool] | None:
        """V0's ``# GPU blocks`` x block_size; else V1's "GPU KV cache size", which vLLM multiplies by the DCP size."""
        blocks = log.values.get("num_gpu_blocks")
        if blocks is not None:
            return blocks.value * block_size, f"{int(blocks.value):,} blocks (line {blocks.line})", False
        got = super().logged_kv_tokens(log, block_size)
        return None if got is None else (got[0], got[1], True)

    # ---- speed
    def speed_backend(self, stack: Any) -> SpeedBackend:
        """aiconfigurator-core's ``vllm`` backend (sdk/backends/factory.py at 0.12.0); ``release``: the stack's
        vLLM release, which kg.speed maps to the nearest release the estimator's database has."""
        return SpeedBackend("vllm", getattr(stack, "engine_version", None) or "",
                            "aiconfigurator-core backend 'vllm' (sdk/backends/vllm_backend.py)")


ENGINE = VLLM()


# The files a --quantization method reads when config.json has no quantization_config: its config class's
# get_config_filenames() (vllm 0.34.0 model_executor/layers/quantization/auto_awq.py:240, auto_gptq.py:195,
# moe_wna16.py:115, modelopt.py:313, inc/inc.py:271; the names map to those classes in quantization/__init__.py:
# 158-170); get_quant_config raises "Cannot find the config file for <method>" when the checkpoint folder has none
# of them (model_loader/weight_utils.py:410 at 0.34.0, :380 at 0.33.0). Methods with no file (fp8, bitsandbytes,
# the online shorthands) quantise an unquantised checkpoint while loading.
QUANT_CONFIG_FILES: dict[str, tuple[str, ...]] = {
    **{m: ("quantize_config.json", "quant_config.json") for m in ("awq", "auto_awq", "awq_marlin")},
    **{m: ("quantize_config.json",) for m in ("gptq", "auto_gptq", "gptq_marlin", "moe_wna16")},
    **{m: ("hf_quant_config.json",) for m in ("modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed")},
    "inc": ("quantization_config.json",),
}

def _config_overrides(ns: dict[str, Any]) -> dict[str, Any]:
    """The config.json keys the command replaces: ``--hf-overrides`` given as a JSON object, and ``--rope-scaling``
    (vLLM <= 0.11.0, arg_utils.py:541 there) as ``rope_scaling``."""
    import json

    def obj(v: Any) -> dict[str, Any]:  # a JSON object given as text or already parsed; anything else: none
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except ValueError:
                return {}
        return v if isinstance(v, dict) else {}
    rs = obj(ns.get("rope_scaling"))
    return {**obj(ns.get("hf_overrides")), **({"rope_scaling": rs} if rs else {})}
