"""Legacy and alias attribute names in a ``config.json``, read as the engines read them.

vLLM and SGLang load a config through a config class: transformers' own for the ``model_type``, or a class vLLM
registers over it. Such a class answers ``config.num_attention_heads`` with the value stored under another key when
its ``attribute_map`` says so (GPT-2's ``n_head``, Falcon-40B's legacy ``RWConfig``: ``n_head``, ``n_layer``,
``n_head_kv``). The table ``catalog/models/defaults/attribute_aliases.yaml`` is generated from the released wheels by
``tools/model_aliases.py`` (each entry with ``path:line``); nothing here is written by hand except what the table
cannot hold: vLLM's Falcon classes (defaults and the Falcon-40B hack) and NemotronH's derived layer count, each cited.
"""
from __future__ import annotations

from typing import Any

_TABLE: dict[str, Any] | None = None
# canonical names optkg sizes the model with: reading one of these through an alias is worth a note in the report
NOTED = {"num_attention_heads", "num_hidden_layers", "num_kv_heads", "num_key_value_heads", "hidden_size", "head_dim",
         "max_position_embeddings", "layer_types", "intermediate_size", "vocab_size", "new_decoder_architecture"}

FALCON_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")  # vllm 0.34.0 model_arch_config_convertor.py:846, 872-873
RW_TYPES = ("RefinedWeb", "RefinedWebModel")  # vllm 0.34.0 transformers_utils/config.py:156-157 (RWConfig)


def alias_table() -> dict[str, Any]:
    """The generated table: ``{"releases", "model_types": {mt: {"map", "source"}}, "engine_field_aliases"}``."""
    global _TABLE
    if _TABLE is None:
        from kg.core import paths
        from kg.core.cache import built_from
        from kg.core.yamlio import load_yaml
        f = paths.catalog_dir() / "models" / "defaults" / "attribute_aliases.yaml"
        # through the content-keyed cache: `optkg kv` then imports no YAML parser at all (issue 31: kv <= 5x bare python)
        _TABLE = built_from("model-aliases", [f], lambda: load_yaml(f).data or {})
    return _TABLE


def kv_head_keys() -> tuple[str, ...]:
    """The keys vLLM tries in order for the number of KV heads (``CONFIG_FIELD_ALIASES['total_num_kv_heads']``)."""
    got = (alias_table().get("engine_field_aliases") or {}).get("total_num_kv_heads") or {}
    return tuple(got.get("names") or ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"))


def apply_aliases(c: dict[str, Any], model_type: str) -> tuple[dict[str, Any], list[str]]:
    """``c`` with every canonical name the model type's config class maps filled from the key it is stored under.

    A key already present under its canonical name is kept. Returns the new dict and one line per key read through
    an alias (``num_attention_heads <- n_head (source)``), for the report's model notes."""
    entry = (alias_table().get("model_types") or {}).get(model_type)
    if not entry:
        return c, []
    out = dict(c)
    notes = []
    for canonical, stored in (entry.get("map") or {}).items():
        if canonical not in c and stored in c and c[stored] is not None:
            out[canonical] = c[stored]
            notes.append(f"{canonical} <- {stored}")
    if model_type in RW_TYPES:
        # RWConfig: n_head_kv None -> 1 (configs/falcon.py:71); hidden_size 8192 forces the new decoder
        # architecture "Hack for falcon-40b" (configs/falcon.py:77-79), vllm 0.34.0
        if out.get("n_head_kv") is None:
            out["n_head_kv"] = 1
        if out.get("hidden_size") == 8192 and not out.get("new_decoder_architecture"):
            out["new_decoder_architecture"] = True
            notes.append("new_decoder_architecture <- True (hidden_size 8192: vLLM's RWConfig 'hack for falcon-40b')")
        if "multi_query" not in out:
            out["multi_query"] = True  # RWConfig default (configs/falcon.py:48)
    if model_type == "nemotron_h" and isinstance(out.get("layers_block_type"), list):
        # NemotronHConfig.num_hidden_layers is len(layers_block_type); a num_hidden_layers key is ignored
        # (transformers 5.24.0 models/nemotron_h/configuration_nemotron_h.py:238-253)
        out["num_hidden_layers"] = len(out["layers_block_type"])
    shown = [n for n in notes if n.split(" <- ")[0] in NOTED]
    if not shown:
        return out, []
    return out, [f"config.json keys read through the {model_type} config class: {', '.join(shown)} ({entry.get('source', '')})"]


# NemotronH block names -> pattern letters (transformers 5.24.0 models/nemotron_h/configuration_nemotron_h.py:272-281;
# the legacy "mamba" / "attention" that Nemotron-3-Ultra's config.json still writes)
NEMOTRON_H_BLOCKS = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-",
                     "moe": "E"}


def nemotron_h_blocks(c: dict[str, Any], layers: int) -> str:
    """NemotronH's decoder layers, one letter each: ``M`` Mamba2 mixer, ``*`` attention, ``-`` MLP, ``E`` MoE; each
    layer holds that one block and nothing else (vllm 0.34.0 models/nemotron_h.py:548-553, :597; transformers 5.24.0
    modeling_nemotron_h.py:926-957). ``layers_block_type`` (read as ``layer_types``) wins over
    ``hybrid_override_pattern`` (configuration_nemotron_h.py:168-176). "" when neither describes ``layers`` layers."""
    lt = c.get("layers_block_type", c.get("layer_types"))
    if isinstance(lt, list) and len(lt) == layers and all(isinstance(t, str) and t in NEMOTRON_H_BLOCKS for t in lt):
        return "".join(NEMOTRON_H_BLOCKS[t] for t in lt)
    pat = c.get("hybrid_override_pattern")
    if isinstance(pat, str) and len(pat) == layers and set(pat) <= set("M*-E"):
        return pat
    return ""


def nemotron_nas_blocks(c: dict[str, Any], heads: int, hidden: int, layers: int, name: str) -> dict[str, Any] | None:
    """DeciLM / Nemotron-NAS ``block_configs``, as vLLM builds them (vllm 0.34.0 models/nemotron_nas.py:133-190): a
    layer's attention is absent when ``attention.no_op`` (no weights, no KV cache: config/model.py:1772-1774), else it
    has ``num_attention_heads // n_heads_in_group`` KV heads, and the model's KV heads are the first attention layer's
    (model_arch_config_convertor.py:536-548); the MLP is absent when ``ffn.no_op``, else ``ffn.intermediate_size`` or
    ``ffn_mult`` as ``int(2 x ffn_mult x hidden / 3)`` rounded up to a multiple of 256 (nemotron_nas.py:60-71).
    Returns ``{"kv_heads", "attention": [bool per layer], "ffn": [width per layer, 0 for none]}``, or None without
    ``block_configs``."""
    from kg.core.errors import OptkgError
    bc = c.get("block_configs")
    if not isinstance(bc, list):
        return None
    if len(bc) != layers or not all(isinstance(b, dict) and isinstance(b.get("attention"), dict)
                                    and isinstance(b.get("ffn"), dict) for b in bc):
        raise OptkgError(f"{name}: block_configs must hold one {{attention, ffn}} object per layer ({layers})")
    attn = [not b["attention"].get("no_op") for b in bc]
    kv = None
    ffn = []
    for i, b in enumerate(bc):
        g = b["attention"].get("n_heads_in_group")
        if attn[i] and (not isinstance(g, int) or g < 1 or heads % g):
            raise OptkgError(f"{name}: block_configs[{i}].attention.n_heads_in_group must divide "
                             f"num_attention_heads {heads}, found {g!r}")
        kv = kv or (heads // g if attn[i] else None)
        f = b["ffn"]
        mult, width = f.get("ffn_mult"), f.get("intermediate_size")
        if f.get("no_op"):
            ffn.append(0)
        elif isinstance(mult, (int, float)) and not isinstance(mult, bool) and 0 < mult < 1e4:
            n = int(2 * mult * hidden / 3)
            ffn.append(n if n % 256 == 0 else n + 256 - n % 256)
        elif isinstance(width, int) and width > 0:
            ffn.append(width)
        else:
            raise OptkgError(f"{name}: block_configs[{i}].ffn needs ffn_mult or intermediate_size")
    return {"kv_heads": kv or heads, "attention": attn, "ffn": ffn}


def ungated_mlp_width(c: dict[str, Any], model_type: str, hidden: int) -> int | None:
    """The MLP width of a model type whose MLP is two matrices (up and down, no gate) as vLLM 0.34.0 builds it, else
    None: Falcon and BLOOM ``4 x hidden`` (models/falcon.py:235-251, bloom.py:159-170), GPT-2 and GPT-J ``n_inner``
    or ``4 x hidden`` (gpt2.py:158, gpt_j.py:166), OPT ``ffn_dim`` (opt.py:150-163), Nemotron-4 ``intermediate_size``
    (nemotron.py:149-160, :283-286)."""
    def given(key: str) -> int | None:
        v = c.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
    if model_type in FALCON_TYPES or model_type == "bloom":
        return 4 * hidden
    key = {"gpt2": "n_inner", "gptj": "n_inner", "opt": "ffn_dim", "nemotron": "intermediate_size"}.get(model_type)
    return (given(key) or 4 * hidden) if key else None


def kimi_kda_layers(c: dict[str, Any], layers: int) -> tuple[list[str], dict[str, Any]] | None:
    """Kimi-Linear / Kimi-K3 ``linear_attn_config``: (the layer kinds, the KDA state sizes) or None without one.
    Layer i is a Kimi Delta Attention layer, with a per-request state and no KV cache, when ``i + 1`` is in
    ``kda_layers`` (vllm 0.34.0 transformers_utils/configs/kimi_linear.py:225-229), else MLA. A KDA state has the
    Gated DeltaNet shape with ``num_heads`` key and value heads of ``head_dim`` and ``short_conv_kernel_size``
    (layers/mamba/mamba_utils.py:304-327 against :280-301), its recurrent part in float32 unless
    --mamba-ssm-cache-dtype says otherwise (:141-155)."""
    lac = c.get("linear_attn_config")
    if not isinstance(lac, dict) or not isinstance(lac.get("kda_layers"), list):
        return None
    kda = {i for i in lac["kda_layers"] if isinstance(i, int) and not isinstance(i, bool)}
    kinds = ["linear" if i + 1 in kda else "full" for i in range(layers)]
    heads, dim, conv = lac.get("num_heads"), lac.get("head_dim"), lac.get("short_conv_kernel_size", 4)
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 20 for v in (heads, dim, conv)):
        return kinds, {}
    return kinds, {"kind": "gdn", "variant": "kda", "linear_num_key_heads": heads, "linear_num_value_heads": heads,
                   "linear_key_head_dim": dim, "linear_value_head_dim": dim, "conv_kernel": conv,
                   "ssm_cache_dtype": "float32"}


def falcon_multi_query(c: dict[str, Any], model_type: str) -> bool | None:
    """For Falcon model types, whether vLLM caches one KV head: ``multi_query`` unless ``new_decoder_architecture``
    (vllm 0.34.0 ``model_arch_config_convertor.py:508-524``). None for other model types."""
    if model_type not in FALCON_TYPES:
        return None
    return bool(c.get("multi_query")) and not bool(c.get("new_decoder_architecture"))
