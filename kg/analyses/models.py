"""The bundled model configs (``optkg models``): hub id, shape, context limits and where each file came from.

Each row is read from the bundled ``config.json`` by ``kg.inputs.modelcfg`` (the same path ``check`` takes), the
source from ``catalog/models/SOURCES.md`` (its table's first two columns).
"""
from __future__ import annotations

import re
from typing import Any

from kg.inputs.modelcfg import bundled_models_dir, load_bundled

SCHEMA_VERSION = "1.0"


def sources() -> dict[str, str]:
    """File name -> where it was copied from (the ``repo`` column of SOURCES.md)."""
    out = {}
    for line in (bundled_models_dir() / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\|\s*`([^`]+\.json)`\s*\|\s*([^|]+?)\s*\|", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def list_models(contains: str | None = None) -> dict[str, Any]:
    """``{"schema_version", "count", "models": [{id, model_type, attention, layers, ...}]}``, sorted by id;
    ``contains`` keeps ids holding that text (case-insensitive)."""
    src = sources()
    rows = []
    for f in sorted(bundled_models_dir().glob("*.json")):
        hub = f.stem.replace("__", "/", 1)
        if contains and contains.lower() not in hub.lower():
            continue
        m = load_bundled(f)
        kinds = sorted(set(m.layer_kinds) - {"full", "none"})
        # MLA: hidden / heads (56 for DeepSeek-V3) is no dimension the model has; its query/key heads are
        # qk_nope_head_dim + qk_rope_head_dim (128 + 64 = 192) and it caches one latent of kv_lora_rank +
        # qk_rope_head_dim (512 + 64 = 576) per token and layer (DeepSeek-V3 config.json; vLLM MLA backends)
        mla_qk = (m.qk_nope_head_dim or 0) + (m.qk_rope_head_dim or 0) if m.is_mla else 0
        rows.append({"id": hub, "model_type": m.model_type, "attention": m.attention,
                     "layers": m.num_hidden_layers, "kv_heads": m.num_key_value_heads,
                     "head_dim": mla_qk or m.head_dim,
                     "mla_latent": (m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0) if m.is_mla else None,
                     "moe_experts": m.num_experts if m.is_moe else None, "other_layer_kinds": kinds,
                     "quantization": m.quant_method, "max_model_len_vllm": m.derived_max_model_len,
                     "file": f"catalog/models/{f.name}", "source": src.get(f.name, "")})
    return {"schema_version": SCHEMA_VERSION, "count": len(rows), "models": rows}
