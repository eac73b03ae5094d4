"""SGLang's reduction of its computed ``mem_fraction_static`` for a vision-language model.

When SGLang computes the fraction itself (``--mem-fraction-static`` not given) and the model is multimodal, it
multiplies the fraction by ``0.95 x clamp(1 - 0.1 x (L x H^2 / (24 x 1024^2) - 1), 0.8, 1.05)``, L and H the
vision tower's ``num_hidden_layers`` and ``hidden_size`` as read from the config object (24 and 1024 when it
has no such attribute), to leave room for the image encoder: sglang 0.5.23 ``srt/arg_groups/memory_hook.py:283-
288, 331-336, 417-466`` (``adjust_mem_fraction_for_vlm``; the fraction is not rounded again); the same formula in 0.5.1
``srt/server_args.py:402-403, 2297``, 0.5.3 :683, 3105-3140, 0.5.9 :1068-1069, 5483-5519, 0.5.17 :4794-4800.

Multimodal: the first ``architectures`` entry in SGLang's ``multimodal_model_archs`` (0.5.23
``srt/configs/model_config.py:2391-2473``; ``MiMoV2ForCausalLM`` only with both a vision and an audio config,
:78, :706-714), not one SGLang serves text-only by default (Gemma 3, Llama 4, Step3-VL, Inkling: :691-705), and
not a ``--disaggregation-mode decode`` server (0.5.17 :4795-4799); the reduction needs a ``vision_config``
(memory_hook.py:431-433). L and H: SGLang's own config classes for Qwen3-VL and Qwen3.5 (``srt/configs/
qwen3_vl.py:4-27``, ``qwen3_5.py:7``) keep the tower depth as ``depth``, so L is the default 24; Kimi-K2.5's
(``srt/configs/kimi_k25.py:45-46``) defaults to 27 layers of 1152; other towers name ``num_hidden_layers``.
"""
from __future__ import annotations

from typing import Any

# sglang 0.5.23 srt/configs/model_config.py:2391-2473 (multimodal_model_archs) and :78 (MIMO_V2_MULTIMODAL_ARCHS)
MULTIMODAL_ARCHS = frozenset((
    "CLIPModel", "Cohere2VisionForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration",
    "DeepseekVL2ForCausalLM", "Ernie4_5_VLMoeForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration",
    "Gemma3ForConditionalGeneration", "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration",
    "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration", "Glm5NextForConditionalGeneration",
    "GlmOcrForConditionalGeneration", "GlmAsrForConditionalGeneration", "GlmImageForConditionalGeneration",
    "Grok1VForCausalLM", "Grok1AForCausalLM", "LlavaLlamaForCausalLM",
    "Llama4ForConditionalGeneration", "LlavaMistralForCausalLM", "LlavaQwenForCausalLM",
    "LlavaForConditionalGeneration", "LlavaVidForCausalLM", "Lfm2VlForConditionalGeneration",
    "LightOnOCRForConditionalGeneration", "MiMoV2ASRForCausalLM", "MiniCPMO",
    "MiniCPMV", "Mistral3ForConditionalGeneration", "MultiModalityCausalLM",
    "MllamaForConditionalGeneration", "MossVLForConditionalGeneration", "NemotronH_Nano_VL_V2",
    "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3", "MuseGlimmerForConditionalGeneration",
    "MuseSparkForConditionalGeneration", "PixtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration",
    "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration", "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "Qwen3ASRForConditionalGeneration", "Qwen3OmniMoeForConditionalGeneration", "KimiVLForConditionalGeneration",
    "LocateAnythingForConditionalGeneration", "InternVLChatModel", "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration", "Phi4MMForCausalLM", "VoxtralForConditionalGeneration",
    "WhisperForConditionalGeneration", "Step3VLForConditionalGeneration", "POINTSV15ChatModel",
    "DotsVLMForCausalLM", "Dots3NoteForCausalLM", "DotsOCRForCausalLM",
    "Sarashina2VisionForCausalLM", "NVILAForConditionalGeneration", "NVILALiteForConditionalGeneration",
    "DeepseekOCRForCausalLM", "UnlimitedOCRForCausalLM", "JetVLMForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "MiDashengLMModel", "StepVLForConditionalGeneration",
    "Step3p7ForConditionalGeneration", "KimiK25ForConditionalGeneration", "BailingMMNativeForConditionalGeneration",
    "BailingMM2NativeForConditionalGeneration", "BailingMoeV3VLForConditionalGeneration",
    "MiMoV2ForCausalLM",
))
TEXT_ONLY_BY_DEFAULT = ("Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                        "Step3VLForConditionalGeneration", "InklingForConditionalGeneration")
# the (layers, hidden) SGLang's own vision config class reads when config.json does not name them
CLASS_DEFAULTS = {"KimiK25ForConditionalGeneration": (27, 1152)}


def vlm_factor(raw_config: Any, architecture: str | None,
               disaggregation_mode: str | None = None) -> tuple[float, str] | None:
    """(factor, how) SGLang multiplies its computed mem_fraction_static by for this model (module doc); None for a
    model it serves text-only."""
    raw = raw_config if isinstance(raw_config, dict) else {}
    vision = raw.get("vision_config")
    if (architecture not in MULTIMODAL_ARCHS or architecture in TEXT_ONLY_BY_DEFAULT or not isinstance(vision, dict)
            or str(disaggregation_mode or "").lower() == "decode"):
        return None
    if architecture == "MiMoV2ForCausalLM" and not isinstance(raw.get("audio_config"), dict):
        return None
    layers, hidden = CLASS_DEFAULTS.get(architecture, (24, 1024))
    layers = vision.get("num_hidden_layers", layers) if architecture not in CLASS_DEFAULTS else layers
    hidden = vision.get("hidden_size", hidden) if architecture not in CLASS_DEFAULTS else hidden
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    factor = 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return factor, (f"x {factor:.4f} for the vision tower ({layers} layers x hidden {hidden}: 0.95 x (1 - 0.1 x "
                    f"({ratio:.4f} - 1)), sglang 0.5.23 srt/arg_groups/memory_hook.py:417-466)")
