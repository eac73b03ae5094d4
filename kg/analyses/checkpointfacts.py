"""The checkpoint's own size beside optkg's weight estimate (kg.inputs.checkpoint_index), for check.

When the model folder (or its Hugging Face cache snapshot) holds ``model.safetensors.index.json`` (or one
``model.safetensors``), the bytes it stores replace the estimate for the fit decision and the KV budget: the
estimate's split over the GPUs (tensor / pipeline / expert shards, replicated parts) is kept and scaled by
checkpoint total / estimated total. The estimate stays in the report beside it; a note says which was used.
The checkpoint counts every tensor it stores, including ones an engine may skip (MTP layers without speculative
decoding, a vision tower with --language-model-only), so it can only make the weights larger than loaded.
"""
from __future__ import annotations

from typing import Any

from kg.inputs.checkpoint_index import checkpoint_size
from kg.inputs.stack import Stack

GIB = 1024 ** 3
CHECKPOINT_BASIS = "weights per GPU from the checkpoint (the estimate's split x checkpoint / estimated total)"


def apply_checkpoint_size(stack: Stack, derived: dict[str, Any], weights: float) -> float:
    """The weights per GPU to use: ``weights`` (the estimate), or the checkpoint-scaled value when the model's
    folder has one; fills ``weight_bytes_total_checkpoint``, ``weight_bytes_per_gpu_checkpoint``,
    ``weight_checkpoint_file`` and re-decides ``weights_exceed_gpu_memory``. ``weight_bytes_per_gpu`` /
    ``weight_bytes_total`` / ``weight_bytes_source`` are the values used (the rules' numbers read them)."""
    derived["weight_bytes_per_gpu"] = derived["weight_bytes_per_gpu_estimate"]  # the values the rules read
    derived["weight_bytes_total"] = derived.get("weight_bytes_total_estimate")
    derived["weight_bytes_source"] = "estimate"
    m = stack.model
    ck, note = _checkpoint_size(m.source if m is not None else "")
    if note and note not in stack.notes:
        stack.notes.append(note)
    est_total = float(derived.get("weight_bytes_total_estimate") or 0)
    if ck is None or est_total <= 0:
        return weights
    per_gpu = weights * ck.total_bytes / est_total
    derived["weight_bytes_total_checkpoint"] = ck.total_bytes
    derived["weight_bytes_per_gpu_checkpoint"] = round(per_gpu)
    derived["weight_checkpoint_file"] = ck.path
    derived.update(weight_bytes_per_gpu=round(per_gpu), weight_bytes_total=ck.total_bytes,
                   weight_bytes_source=f"checkpoint ({ck.how})")
    derived["weights_exceed_gpu_memory"] = per_gpu > derived["gpu_memory_usable_bytes"]
    stack.notes.append(
        f"weights from the checkpoint: {ck.how} of {ck.path} = {ck.total_bytes / GIB:,.2f} GiB (optkg's estimate "
        f"{est_total / GIB:,.2f} GiB); {per_gpu / GIB:,.2f} GiB per GPU (estimate {weights / GIB:,.2f}) is what the "
        "fit decision and the KV budget use; the checkpoint counts every stored tensor, also ones the engine may skip")
    return per_gpu


def _checkpoint_size(source: str):
    """kg.inputs.checkpoint_index.checkpoint_size, read once per model source in a sweep (kg.engine.incremental:
    its data files are read as it first read them; the checkpoint's likewise)."""
    from kg.engine.incremental import current
    session = current()
    if session is None:
        return checkpoint_size(source)
    key = ("checkpoint-size", source)
    hit = session.extra.get(key)
    if hit is None:
        hit = session.extra[key] = checkpoint_size(source)
    return hit


def apply_cpu_offload(stack: Stack, derived: dict[str, Any], gib: Any) -> None:
    """vLLM / SGLang ``--cpu-offload-gb N``: N GiB of each GPU's weights stay in host memory (vLLM: "the space in GiB
    to offload to CPU, per GPU", vllm/config/offload.py:23-31 at 0.34.0, parameters offloaded until N * 1024**3
    bytes, model_executor/offloader/uva.py:84-92; SGLang 0.5.23 OffloaderV1(cpu_offload_max_bytes=N * 1024**3),
    srt/utils/offloader.py:69-72). The per-GPU weights the fit decision and the KV budget read lose that much
    (never below 0); ``weight_bytes_offloaded_per_gpu`` is what moved."""
    try:
        off_cap = float(gib) * GIB
    except (TypeError, ValueError):
        return
    on_gpu = float(derived.get("weight_bytes_per_gpu") or 0)
    if off_cap <= 0 or on_gpu <= 0:
        return
    off = min(off_cap, on_gpu)
    derived["weight_bytes_offloaded_per_gpu"] = round(off)
    for k in ("weight_bytes_per_gpu_estimate", "weight_bytes_per_gpu_checkpoint", "weight_bytes_per_gpu"):
        if isinstance(derived.get(k), (int, float)):
            derived[k] = round(max(0.0, derived[k] - off))
    if "gpu_memory_usable_bytes" in derived:
        derived["weights_exceed_gpu_memory"] = derived["weight_bytes_per_gpu"] > derived["gpu_memory_usable_bytes"]
    stack.notes.append(
        f"--cpu-offload-gb {float(gib):g}: {off / GIB:,.2f} GiB of each GPU's weights stay in host memory and are "
        f"read over the host link in every forward pass; the weights per GPU below ({on_gpu / GIB:,.2f} GiB before) "
        "and the KV budget count what stays on the GPU")


def relabel_weights_line(derived: dict[str, Any]) -> None:
    """The budget breakdown's weights line says it came from the checkpoint when it did."""
    if "weight_bytes_per_gpu_checkpoint" not in derived:
        return
    for line in derived.get("kv_budget_breakdown") or []:
        if line.get("name") == "weights":
            line["basis"] = CHECKPOINT_BASIS
            line["source"] = str(derived.get("weight_checkpoint_file"))
