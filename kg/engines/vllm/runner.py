"""Which GPU model runner vLLM picks (V1 or V2), per release, when ``VLLM_USE_V2_MODEL_RUNNER`` is not set.

It matters for the tokens in flight: with the V2 runner async scheduling stays on under pipeline parallelism
and vLLM keeps ``pp_size + 1`` batches in flight; with the V1 runner async scheduling is switched off under
PP > 1 (``pp_size`` batches) (vllm 0.33.0 ``config/vllm.py:588-599`` ``max_concurrent_batches``,
``:1651-1666`` the V1-only incompatibility list, ``:1700-1719``). Read from the released wheels
(``pip download vllm==X --no-deps``), ``VllmConfig.use_v2_model_runner``:

- before 0.22.0: V1 (``VLLM_USE_V2_MODEL_RUNNER`` defaults to False, vllm 0.21.0 ``envs.py:251, 1711-1712``);
- 0.22.0: V2 only for ``Qwen3ForCausalLM`` that is neither MoE nor quantised (0.22.0 ``config/vllm.py:69,
  493-535``); 0.23.0 adds ``LlamaForCausalLM`` / ``MistralForCausalLM`` (0.23.0 ``config/vllm.py`` the
  ``DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES`` set and ``_is_default_v2_model_runner_model``);
- 0.24.0: V2 for the listed architectures (Qwen3, DeepseekV2, Qwen2Moe, GraniteMoe, Llama, Mistral), quantised
  or not;
- 0.25.0 / 0.26.0: V2 for every generating model that is not a Mamba / linear-attention hybrid and either dense
  or a listed MoE architecture; 0.27.0 / 0.28.0: the same, a listed architecture also when hybrid;
- from 0.29.0: V2 by default on CUDA (``use_v2_model_runner`` has no architecture test any more; 0.29.0
  ``config/vllm.py`` and 0.33.0 ``config/vllm.py:748-767``).

In every release the runner falls back to V1 when a feature V2 lacks is used
(``_get_v2_model_runner_unsupported_features``); optkg models the speculative methods (the table below) and
EAGLE3 with PP (0.22.0 / 0.23.0), not stock torch.compile, sequence parallelism, DBO or external launchers.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from kg.core.relcmp import Release

FIRST_V2_RELEASE = "0.22.0"
V2_FOR_ALL_SINCE = "0.29.0"

# Architectures whose models run on V2 by default (DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES), per release range.
_V2_ARCHS: list[tuple[str, frozenset[str]]] = [
    ("0.22.0", frozenset({"Qwen3ForCausalLM"})),
    ("0.23.0", frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})),
    ("0.24.0", frozenset({"Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM",
                          "GraniteMoeForCausalLM", "LlamaForCausalLM", "MistralForCausalLM"})),
    ("0.25.0", frozenset({"DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                          "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"})),
    ("0.27.0", frozenset({"DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
                          "InklingForConditionalGeneration", "KimiK3ForConditionalGeneration",
                          "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"})),
]

# Speculative methods per release: ("only", set) = V2 supports only these; ("not", set) = V2 refuses these
# (``_get_v2_model_runner_unsupported_features``, config/vllm.py of each release).
_V2_SPEC: list[tuple[str, str, frozenset[str]]] = [
    ("0.22.0", "only", frozenset({"eagle", "eagle3", "mtp"})),
    ("0.24.0", "only", frozenset({"eagle", "eagle3", "mtp", "dflash"})),
    ("0.25.0", "only", frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})),
    ("0.29.0", "only", frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark", "extract_hidden_states"})),
    ("0.30.0", "not", frozenset({"ngram", "ngram_gpu", "draft_model", "suffix", "medusa", "mlp_speculator",
                                 "custom_class"})),
    ("0.31.0", "not", frozenset({"ngram", "ngram_gpu", "suffix", "medusa", "mlp_speculator", "custom_class"})),
    ("0.32.0", "not", frozenset({"suffix", "medusa", "mlp_speculator", "custom_class"})),
    ("0.33.0", "not", frozenset({"suffix", "custom_class"})),   # 0.33.0 config/vllm.py:3066-3068
]


def _version(engine_version: str | None) -> Release | None:
    try:
        return Release(str(engine_version)) if engine_version else None
    except ValueError:  # not a release (packaging's InvalidVersion)
        return None


def _at(table: list, v: Release):
    hit = None
    for row in table:
        if v >= Release(row[0]):
            hit = row
    return hit


# vLLM 0.34.0 removed Model Runner V1 (platforms/interface.py:1481-1490 validate_environ: VLLM_USE_V2_MODEL_RUNNER
# other than 1 is a ValueError, "Model Runner V1 has been removed")
V1_REMOVED_IN = "0.34.0"
V1_REMOVED_EVIDENCE = "vllm 0.34.0 platforms/interface.py:1485"


@lru_cache(maxsize=1024)  # a pure function of plain values: a sweep asks ~3 times per stack with the same ones
def uses_v2_model_runner(engine_version: str | None, architecture: str | None = None, is_moe: bool = False,
                         is_quantized: bool = False, is_hybrid: bool = False, attention_free: bool = False,
                         speculative_method: str | None = None, pp_size: int = 1,
                         env: bool | None = None) -> tuple[bool | None, str]:
    """(V2 runner?, why) for a generating model on CUDA at vLLM ``engine_version`` (None: the latest optkg knows,
    0.34.0, where V1 is gone). ``env``: ``VLLM_USE_V2_MODEL_RUNNER`` as given (None: unset). ``is_hybrid``: Mamba /
    linear-attention layers; ``attention_free``: no attention layer at all. (None, why) when the answer needs the
    architecture and none is given."""
    v = _version(engine_version) or Release(V1_REMOVED_IN)
    rel = f"vllm {v}"
    if v >= Release(V1_REMOVED_IN):  # Model Runner V1 removed: VLLM_USE_V2_MODEL_RUNNER=0 is refused at start
        return True, f"{rel}: the V2 model runner (Model Runner V1 removed in {V1_REMOVED_IN}: {V1_REMOVED_EVIDENCE})"
    if env is not None:
        return bool(env), f"VLLM_USE_V2_MODEL_RUNNER={int(bool(env))}"
    if v < Release(FIRST_V2_RELEASE):
        return False, f"{rel}: the V1 model runner (V2 only with VLLM_USE_V2_MODEL_RUNNER=1, default from 0.22.0)"
    if v < Release(V2_FOR_ALL_SINCE):
        if architecture is None:
            return None, f"{rel}: the default runner depends on the model architecture"
        archs = _at(_V2_ARCHS, v)[1]
        listed = architecture in archs
        if v < Release("0.24.0"):
            ok = listed and not is_moe and not is_quantized
        elif v < Release("0.25.0"):
            ok = listed
        elif v < Release("0.27.0"):
            ok = not is_hybrid and not attention_free and (listed or not is_moe)
        else:
            ok = (listed or not is_hybrid) and not attention_free and (listed or not is_moe)
        if not ok:
            return False, f"{rel}: {architecture} is not a default-V2 model (_is_default_v2_model_runner_model)"
    method = (speculative_method or "").lower() or None
    if method:
        kind, methods = _at(_V2_SPEC, v)[1:]
        if (kind == "only" and method not in methods) or (kind == "not" and method in methods):
            return False, f"{rel}: the V2 runner does not support speculative method '{method}' (falls back to V1)"
        if v < Release("0.24.0") and method == "eagle3" and pp_size > 1:
            return False, f"{rel}: the V2 runner does not support EAGLE3 with pipeline parallelism (falls back to V1)"
    return True, f"{rel}: the V2 model runner (default" + (" for this model)" if v < Release(V2_FOR_ALL_SINCE) else ")")


def model_uses_v2_runner(model, engine_version: str | None, speculative_method: str | None = None,
                         pp_size: int = 1, env: bool | None = None) -> tuple[bool | None, str]:
    """``uses_v2_model_runner`` for a ``kg.inputs.modelcfg.ModelFacts`` (None model: architecture unknown)."""
    if model is None:
        return uses_v2_model_runner(engine_version, None, speculative_method=speculative_method, pp_size=pp_size,
                                    env=env)
    hybrid, attention_free = _layer_flags(getattr(model, "layer_kinds", None))
    return uses_v2_model_runner(engine_version, getattr(model, "architecture", None),
                                bool(getattr(model, "num_experts", None)), bool(getattr(model, "quant_method", None)),
                                hybrid, attention_free, speculative_method, pp_size, env)


def _layer_flags(layer_kinds: Any) -> tuple[bool, bool]:
    """(hybrid: some Mamba / linear-attention layer, attention-free: no attention layer at all) of a model's
    ``layer_kinds``."""
    kinds = tuple(layer_kinds or ())
    try:
        return _kind_flags(kinds)
    except TypeError:  # an unhashable kind: not a layer kind of any config optkg reads, asked without the cache
        return _kind_flags.__wrapped__(kinds)


@lru_cache(maxsize=256)
def _kind_flags(kinds: tuple) -> tuple[bool, bool]:
    """``_layer_flags`` once per distinct list of layer kinds (a sweep asks ~10 times per stack about one model)."""
    return (any(k in ("linear", "mamba") for k in kinds),
            bool(kinds) and all(k in ("linear", "mamba", "none") for k in kinds))
