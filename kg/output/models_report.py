"""Text for ``optkg models``: one line per bundled config, at most 100 columns."""
from __future__ import annotations

from typing import Any

from kg.core.numfmt import REPORT, fmt_num


def render_text(d: dict[str, Any]) -> str:
    out = [f"{d['count']} bundled model config(s) (catalog/models; sources in catalog/models/SOURCES.md)", ""]
    head = f"{'model id':<48} {'attn':<4} {'layers':>6} {'KV h':>4} {'hd':>4} {'max len':>9}  other"
    out.append(head)
    for m in d["models"]:
        other = [f"latent {m['mla_latent']}"] if m.get("mla_latent") else []
        if m["moe_experts"]:
            other.append(f"MoE {m['moe_experts']}")
        other += m["other_layer_kinds"]
        if m["quantization"]:
            other.append(str(m["quantization"]))
        mid = m["id"] if len(m["id"]) <= 48 else m["id"][:47] + "…"
        line = (f"{mid:<48} {m['attention']:<4} {m['layers']:>6} {m['kv_heads']:>4} {m['head_dim']:>4} "
                f"{fmt_num(m['max_model_len_vllm'], REPORT) if m['max_model_len_vllm'] else 'any*':>9}  {', '.join(other)}")
        out.append(line if len(line) <= 100 else line[:99] + "…")
    out.append("")
    out.append("attn: gqa / mha / mqa / mla; KV h: KV heads; hd: head_dim (MLA: the query/key head, nope + rope);")
    out.append("max len: the longest max_model_len vLLM accepts; other: the MLA latent cached per token and layer")
    out.append("(kv_lora_rank + rope), MoE experts, layer kinds other than full attention, checkpoint quantisation.")
    if any(not m["max_model_len_vllm"] for m in d["models"]):
        out.append("any*: config.json has no length key; vLLM accepts any --max-model-len and runs with 2,048 when")
        out.append("none is given (vllm 0.34.0 config/model.py:2633).")
    return "\n".join(out) + "\n"
