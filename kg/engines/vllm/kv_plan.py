"""The KV cache as vLLM V1 plans it: per-layer specs, the hybrid allocator's groups, blocks per
request, max concurrency and the logged "GPU KV cache size".

Read from the released vLLM 0.33.0 wheel (``pip download vllm==0.33.0 --no-deps``); every
``path:line`` below is inside its ``vllm/`` package.

Per-layer specs (one TP rank, the largest pipeline stage):
- full / sliding window / chunked local attention: page per token per layer
  ``kv_heads_per_rank * (head_size + head_size_v) * B`` (``v1/kv_cache_interface.py:586-601``);
  ``SlidingWindowSpec`` when the layer has a window, ``ChunkedLocalAttentionSpec`` on Llama-4's
  RoPE layers (``model_executor/layers/attention/attention.py:611-682``, ``models/llama4.py:251-264``).
- MLA: ``(kv_lora_rank + qk_rope_head_dim) * B`` with one head and no V (``mla_attention.py:1371-1398``);
  ``fp8_ds_mla`` / ``nvfp4_ds_mla`` store a fixed 656 / 352 B per token (``mla_attention.py:1386-1388``).
- Sparse MLA (DeepSeek-V3.2, ``index_head_dim``): every layer adds an indexer cache of
  ``index_head_dim + index_head_dim / 128 * 4`` uint8 bytes per token (128 -> 132;
  ``models/deepseek_v2.py:638-667, 729-735``); on the sparse backends every quantised KV dtype is
  stored as ``fp8_ds_mla`` (``mla_attention.py:358-375``) and the block is 64 tokens
  (``v1/attention/backends/mla/flashattn_mla_sparse.py:50-51``).
- Gated DeltaNet (Qwen3-Next): per request ``conv (2*nk*dk + nv*dv)/tp x (kernel-1)`` plus
  ``temporal (nv/tp) x dv x dk`` elements in the model dtype (``layers/mamba/mamba_utils.py:272-293``,
  ``models/qwen3_next.py:882-912``); Mamba2 (NemotronH) ``conv (heads*head_dim + 2*groups*state)/tp x
  (kernel-1)`` plus ``temporal heads/tp x head_dim x state`` with the SSM state in
  ``mamba_ssm_cache_dtype`` (``mamba_utils.py``, ``models/config.py:817-832``).

Blocks one request of ``max_model_len`` reserves (``max_memory_usage_bytes``):
- full / MLA: ``cdiv(cdiv(max_model_len, dcp), block)`` (``kv_cache_interface.py:643-648``);
- sliding window: ``cdiv(min(window - 1 + max_in_flight_tokens, max_model_len), block) + 1``
  (``kv_cache_interface.py:918-955``);
- chunked local: ``cdiv(min(chunk + max_in_flight_tokens, max_model_len), block)`` (``:864-888``);
- cross-attention (encoder-decoder): ``cdiv(max_num_batched_tokens, block)``; the encoder length before 0.13.0
  (kg.derive.encoder_cache.cross_attention_encoder_tokens);
- Mamba / GDN: 2 pages with prefix caching (``mamba_cache_mode == "align"``, on by default for
  hybrids) else 1, plus one per speculative token (``:1135-1141``).
``max_in_flight_tokens = batches_in_flight x max_num_batched_tokens``; async scheduling (default on)
keeps PP + 1 batches in flight on the V2 model runner (the default from 0.29.0, per model before:
kg.engines.vllm.runner), on V1 2 at PP 1 and PP batches otherwise (``config/vllm.py:588-599``).

Grouping (``v1/core/kv_cache_planning.py:1113-1200``, ``:416-556``): identical specs form one group
of all layers; MLA plus indexer form one group whose page is the sum of both pages; otherwise the
group size is the smallest layer count per spec (the largest when max < 1.5 x min) and each spec
type gets ``cdiv(layers, group_size)`` groups. Hybrid Mamba models raise the attention block until
``block x attention page per token >= Mamba page`` (in multiples of the kernel alignment, 16 for
FlashAttention) and pad the Mamba page to it (``platforms/interface.py:1085-1131``). With the hybrid
allocator off sliding and chunked layers are sized as full (``unify_hybrid_kv_cache_specs``,
``kv_cache_planning.py:853-876``); ``hybrid_manager`` says when it is off (per release, see there).
Llama-4 Scout (12 NoPE full + 36 chunked layers of one page size): two buckets, group size 12
(36 >= 1.5 x 12), so 1 full group + 3 chunked groups of 12 layers each — the "(FullAttention x 12)
(ChunkedLocalAttention x 12) x 3" groups of vLLM PR 21761, which added the environment variable (default off
for a ~2 ms latency cost of building the chunked metadata three times); the default became "1" in 0.14.0.

Capacity: ``bytes_per_block = group_size x page`` (``kv_cache_planning.py:574-605``);
``num_blocks = available // bytes_per_block``; max concurrency ``num_blocks / sum(blocks per request
over groups)`` (``v1/core/kv_cache_utils.py:1061-1093``); "GPU KV cache size: N tokens" is
``int(max_concurrency x max_model_len)`` (``kv_cache_utils.py:1120-1128``), not blocks x block size.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from kg.core.errors import OptkgError
from kg.derive.kv import MLA_PACKED_BYTES, kv_element_bytes, kv_heads_per_rank
from kg.derive.encoder_cache import (ENCODER_DECODER_SCHEDULING_NOTE, cross_attention_blocks_per_request,
                                    cross_attention_encoder_tokens, cross_attention_note,
                                    encoder_decoder_batched_tokens)
from kg.inputs.modelcfg import DTYPE_BYTES, ModelFacts

# vLLM 0.33.0 engine/arg_utils.py:2970-3006: `vllm serve` (OPENAI_API_SERVER) max_num_batched_tokens
# by GPU memory: >= 160 GiB -> 16,384; >= 70 GiB and not A100 -> 8,192; else 2,048
MNBT_LARGE, MNBT_H100, MNBT_SMALL = 16384, 8192, 2048
QUANTISED_KV = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "int8")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def default_max_num_batched_tokens(gpu_memory_gib: float | None, gpu_name: str = "",
                                   compute_capability: Any = None, engine_version: str | None = None) -> int:
    """``vllm serve``'s default ``max_num_batched_tokens`` for a GPU (vLLM 0.33.0
    ``engine/arg_utils.py:2970-3006``); H100/H200 (the default when no GPU is named) -> 8,192. From 0.33.0 a
    GB10 (compute capability 12.1) stays on the small tier (``and not is_gb10``, 0.33.0 :2963, :2986; 0.34.0
    :3023); ``engine_version`` None: the latest release."""
    from kg.core.relcmp import older_than
    if gpu_memory_gib is None:
        return MNBT_H100
    if gpu_memory_gib >= 160:
        return MNBT_LARGE
    gb10 = str(compute_capability or "") == "12.1" and not older_than(engine_version, "0.33.0")
    if gpu_memory_gib >= 70 and "a100" not in gpu_name.lower() and not gb10:
        return MNBT_H100
    return MNBT_SMALL


def v0_mla_aligned(engine_version: str | None) -> bool:
    """Whether V0's cache engine pads MLA entries to 256 bytes: vLLM 0.7.2 and 0.7.3 (``_align_cache``,
    worker/cache_engine.py:132-137 at 0.7.3; absent in 0.7.1 and 0.8.0)."""
    from kg.core.relcmp import older_than
    return bool(engine_version) and not older_than(engine_version, "0.7.2") and older_than(engine_version, "0.8.0")


def null_block_bytes(engine_version: str | None, bytes_per_block: float) -> float:
    """Bytes vLLM holds back from its one-request startup check and its max-model-len estimate: one pool block,
    the null block ``BlockPool`` keeps (vLLM 0.33.0 ``v1/core/kv_cache_planning.py:170-176, 1533-1541``; from
    0.29.0, ``v1/core/kv_cache_utils.py:975``). 0 for older releases (None: the latest)."""
    if engine_version:
        from kg.core.relcmp import Release
        try:
            if Release(engine_version) < Release("0.29.0"):
                return 0.0
        except ValueError:  # packaging's InvalidVersion: an unreadable release is treated as the latest, as elsewhere
            pass
    return float(bytes_per_block)


def _release(engine_version: str | None):
    """A vLLM release as a ``kg.core.relcmp.Release``; None for no release (the latest) or an unreadable one."""
    if not engine_version:
        return None
    from kg.core.relcmp import Release
    try:
        return Release(str(engine_version))
    except ValueError:  # packaging's InvalidVersion
        return None  # an unreadable release is treated as the latest, as elsewhere


def _at_least(engine_version: str | None, release: str) -> bool:
    from kg.core.relcmp import Release
    v = _release(engine_version)
    return v is None or v >= Release(release)


# Releases from which sliding-window and chunked-local layers reserve every batch in flight
# (``VllmConfig.max_in_flight_tokens``, vllm 0.26.0 config/vllm.py:525-533); before, one batch of
# ``max_num_batched_tokens`` (vllm 0.25.0 v1/kv_cache_interface.py:495, :561).
IN_FLIGHT_SINCE = "0.26.0"


def batches_in_flight(pp_size: int = 1, async_scheduling: bool = True, engine_version: str | None = None,
                      v2_runner: bool = False) -> int:
    """Batches whose tokens a sliding-window / chunked layer reserves: ``VllmConfig.max_concurrent_batches``
    (vLLM 0.33.0 ``config/vllm.py:588-599``) from 0.26.0: with async scheduling ``pp_size + 1`` on the V2 model
    runner (kg.engines.vllm.runner says which runner a release picks), 2 at PP 1 on V1, else ``pp_size`` (V1 turns
    async scheduling off under PP, ``:1651-1666``); 1 before 0.26.0 (the specs read ``max_num_batched_tokens``
    itself, vllm 0.25.0 ``v1/kv_cache_interface.py:495, 561``)."""
    if not _at_least(engine_version, IN_FLIGHT_SINCE):
        return 1
    if async_scheduling and v2_runner:
        return pp_size + 1
    if async_scheduling and pp_size <= 1:
        return 2
    return pp_size


# "GPU KV cache size: N tokens" is int(max_concurrency x max_model_len) from 0.21.0 (vllm 0.21.0
# v1/core/kv_cache_utils.py:1700-1708: "a naive num_blocks // num_groups * block_size formula underestimates
# capacity" for sliding / chunked groups); before, num_blocks // groups x block x dcp (0.20.0 :1694-1708,
# 0.14.0 :1287-1305).
KV_SIZE_FROM_CONCURRENCY_SINCE = "0.21.0"

# The hybrid allocator's group size is the smallest layer count per spec, or the largest when max < ratio x min:
# ratio 1.5 from 0.18.0 (vllm 0.18.0 v1/core/kv_cache_utils.py:1043; 0.33.0 v1/core/kv_cache_planning.py:524),
# 1.25 in 0.12.0-0.17.x (0.12.0 kv_cache_utils.py:1017; 0.17.0 :1043), always the smallest before (0.11.1 :974).
GROUP_SIZE_MAX_RATIO = (("0.18.0", 1.5), ("0.12.0", 1.25))


def group_size_max_ratio(engine_version: str | None = None) -> float | None:
    """The release's ratio below which the largest layer count sets the group size (None: never; see above)."""
    for since, ratio in GROUP_SIZE_MAX_RATIO:
        if _at_least(engine_version, since):
            return ratio
    return None


CHUNKED_HYBRID_ENV = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"
# The variable's default: read from 0.10.1 with default "0" (vllm 0.10.1 envs.py:1140-1142; 0.13.0
# envs.py:1432-1434), "1" from 0.14.0 (vllm 0.14.0 envs.py:1468-1470; 0.33.0 envs.py:1931-1933).
CHUNKED_HYBRID_ENV_SINCE, CHUNKED_HYBRID_ENV_ON_SINCE = "0.10.1", "0.14.0"
# SpeculativeConfig.use_eagle() per release: the methods that turn the manager off for chunked attention
# (vllm 0.10.0 config.py:3046; 0.10.2 config/__init__.py:2394-2395; 0.11.0 config/speculative.py:562;
# 0.20.0 speculative.py:970 adds dflash (0.19.0 :858 lacks it); 0.25.0 speculative.py:1242 adds dspark
# (0.24.0 :1110 lacks it); 0.33.0 speculative.py:2120).
EAGLE_METHODS = (("0.25.0", ("eagle", "eagle3", "mtp", "dflash", "dspark")),
                 ("0.20.0", ("eagle", "eagle3", "mtp", "dflash")),
                 ("0.11.0", ("eagle", "eagle3", "mtp")),
                 ("0.10.2", ("eagle", "eagle3", "deepseek_mtp", "ernie_mtp", "qwen3_next_mtp")),
                 ("0.0", ("eagle", "eagle3", "deepseek_mtp")))


def eagle_method(method: str | None, engine_version: str | None = None) -> bool:
    """Whether ``method`` (``--speculative-config`` method) is one ``SpeculativeConfig.use_eagle()`` counts at
    the release (None: the latest). From 0.11.0 vLLM folds ``*_mtp`` / ``nextn`` methods into ``mtp``."""
    m = str(method or "").lower()
    if not m:
        return False
    for since, methods in EAGLE_METHODS:
        if _at_least(engine_version, since):
            if "mtp" in methods and (m.endswith("_mtp") or m == "nextn"):
                m = "mtp"
            return m in methods
    return False


# KV connectors (registered --kv-transfer-config kv_connector names) whose class subclasses SupportsHMA, by the
# release they appear from (grep of kv_connector/v1 + factory.py registrations in each released wheel): before
# 0.22.0 any connector turns the manager off unless it is asked for (0.21.0 config/vllm.py:1340-1350; before 0.13.0
# always: 0.10.2 config/__init__.py:3535-3537); from 0.22.0 only one without SupportsHMA (0.22.0
# config/vllm.py:1469-1478; 0.33.0 :2257-2280 with factory.py:132-146). MultiConnector: when all its children are.
HMA_CONNECTORS = (("0.33.0", ("UMBPStoreConnector",)), ("0.30.0", ("MoRIIOConnector", "HiSparseConnector")),
                  ("0.24.0", ("NixlPullConnector", "NixlPushConnector")),
                  ("0.22.0", ("MultiConnector", "ExampleHiddenStatesConnector", "MooncakeConnector",
                              "MooncakeStoreConnector", "SimpleCPUOffloadConnector", "OffloadingConnector",
                              "DecodeBenchConnector", "NixlConnector")))


def connector_supports_hma(connector: str, engine_version: str | None = None) -> bool:
    """Whether vLLM keeps the hybrid KV-cache manager with this KV connector at the release (table above)."""
    return any(_at_least(engine_version, since) and connector in names for since, names in HMA_CONNECTORS)


@dataclass
class HybridDecision:
    """Whether vLLM's hybrid KV-cache manager is on, and why (``reason``); ``refused``: why vLLM refuses
    to start with this configuration (None when it starts)."""

    on: bool
    reason: str
    refused: str | None = None


def hybrid_manager(model: ModelFacts, engine_version: str | None = None, chunked_env: bool | None = None,
                   speculative_method: str | None = None, disable_flag: bool | None = None,
                   kv_connector: str | None = None) -> HybridDecision:
    """vLLM's decision on the hybrid KV-cache manager (``VllmConfig.__post_init__``: vllm 0.33.0
    ``config/vllm.py:2223-2294``; 0.14.0 :945-985; 0.13.0 :890-935; 0.10.2 config/__init__.py:3527-3555;
    0.10.0 config.py:4656-4677).

    ``engine_version``: the vLLM release (None: the latest optkg knows); ``chunked_env``: the value of
    ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` given in the launch command (None: not given, the
    release default); ``speculative_method``: ``--speculative-config`` method; ``disable_flag``:
    ``--disable-hybrid-kv-cache-manager`` (True), ``--no-disable-hybrid-kv-cache-manager`` (False) or None.

    - ``--disable-hybrid-kv-cache-manager`` always turns it off.
    - A model with ``attention_chunk_size``: off with an EAGLE-family speculative method (``eagle_method``);
      else off when the variable is 0 — given, or the release default (0 from 0.10.1 to 0.13.0, 1 from
      0.14.0); releases before 0.10.1 do not read it and keep the manager on.
    - ``--no-disable-hybrid-kv-cache-manager`` where the rules above turn it off: vLLM >= 0.13.0 raises
      ValueError ("explicitly enabled but is not supported", 0.33.0 ``config/vllm.py:2281-2290``); older
      releases store False as their default and turn it off anyway.
    - ``kv_connector`` (the ``--kv-transfer-config`` connector; "" when set but unnamed, None when not set): before
      0.22.0 any connector turns it off unless asked for (before 0.13.0 even then); from 0.22.0 one that does not
      subclass SupportsHMA (``HMA_CONNECTORS``; an unnamed one is assumed to).
    Not modelled: ``--kv-events-config`` (<= 0.14.0) and non-GPU platforms, which also turn it off."""
    if disable_flag:
        return HybridDecision(False, "off: --disable-hybrid-kv-cache-manager (always respected, vllm 0.33.0 "
                                     "config/vllm.py:2227, 2257-2294)")
    if kv_connector is not None and _at_least(engine_version, "0.9.1") and not (
            disable_flag is False and _at_least(engine_version, "0.13.0")):
        if not _at_least(engine_version, "0.22.0"):
            return HybridDecision(False, "off: --kv-transfer-config sets a KV connector"
                                  + (f" ({kv_connector})" if kv_connector else "") + ", which turns it off before vLLM "
                                  "0.22.0 (0.21.0 config/vllm.py:1340-1350)")
        if kv_connector and not connector_supports_hma(kv_connector, engine_version):
            return HybridDecision(False, f"off: the {kv_connector} KV connector does not subclass SupportsHMA "
                                  "(vllm 0.33.0 config/vllm.py:2257-2280, kv_connector/factory.py:132-146)")
    if not model.attention_chunk_size:
        return HybridDecision(True, "on: vLLM's default")
    need_off, why = False, ""
    if eagle_method(speculative_method, engine_version):
        need_off = True
        why = (f"off: chunked local attention with the {speculative_method} speculative config (EAGLE-family: "
               "SpeculativeConfig.use_eagle(), vllm 0.33.0 config/vllm.py:2239-2245)")
    elif _at_least(engine_version, CHUNKED_HYBRID_ENV_SINCE):
        default_on = _at_least(engine_version, CHUNKED_HYBRID_ENV_ON_SINCE)
        where = ("vllm 0.33.0 envs.py:1931-1933, default 1 from 0.14.0" if default_on
                 else "vllm 0.13.0 envs.py:1432-1434, default 0 from 0.10.1 to 0.13.0")
        if chunked_env is None:
            need_off = not default_on
            why = (f"{'on' if default_on else 'off'}: the release default {CHUNKED_HYBRID_ENV}="
                   f"{int(default_on)} ({where}; config/vllm.py:2246-2255 at 0.33.0)")
        else:
            need_off = not chunked_env
            why = (f"{'on' if chunked_env else 'off'}: {CHUNKED_HYBRID_ENV}={int(bool(chunked_env))} in the "
                   f"command (release default {int(default_on)}: {where})")
    else:
        why = ("on: vllm < 0.10.1 turns it off for chunked local attention only with EAGLE "
               "(vllm 0.10.0 config.py:4670-4677)" + (f"; {CHUNKED_HYBRID_ENV} is not read there"
                                                     if chunked_env is not None else ""))
    if disable_flag is False and need_off:
        if _at_least(engine_version, "0.13.0"):
            return HybridDecision(False, why, "vLLM refuses to start: the hybrid KV-cache manager is enabled "
                                  "explicitly (--no-disable-hybrid-kv-cache-manager) but " + why.split(": ", 1)[1]
                                  + " (ValueError, vllm 0.33.0 config/vllm.py:2281-2290)")
    return HybridDecision(not need_off, why)


@dataclass
class SpecGroup:
    """Layers of one KV-cache spec on one rank. ``page_bytes`` is one block of one layer (bytes)."""

    kind: str                 # full | sliding | chunked | mla | mla+indexer | gdn | mamba2 | cross
    layers: int
    page_bytes: int
    blocks_per_request: int
    groups: int = 1           # allocator groups this spec occupies
    window: int | None = None
    detail: str = ""


@dataclass
class KVPlan:
    """vLLM V1's KV-cache plan for one rank (see module doc); sizes in bytes, lengths in tokens."""

    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    batches_in_flight: int
    max_in_flight_tokens: int
    hybrid_allocator: bool
    kv_cache_dtype_effective: str
    specs: list[SpecGroup]
    group_size: int
    bytes_per_block: int
    blocks_per_request: int
    notes: list[str] = field(default_factory=list)
    hybrid_reason: str = ""          # why the hybrid KV-cache manager is on or off (HybridDecision.reason)
    refused: str | None = None       # why vLLM refuses to start with this configuration
    dcp_size: int = 1
    engine_version: str | None = None  # the vLLM release planned for (None: the latest optkg knows)
    model_runner: str = "V1"         # the GPU model runner vLLM picks (V1 / V2; kg.engines.vllm.runner)
    model_runner_reason: str = ""

    def window_bounded(self) -> bool:
        """Whether the groups, not the per-token layout, decide the longest request: chunked-local or sliding-window
        groups (the hybrid KV-cache manager on), whose blocks stop growing past the window; no Mamba state."""
        return bool(self.hybrid_allocator and not any(s.kind in ("gdn", "mamba2") for s in self.specs)
                    and any(s.kind in ("chunked", "sliding") for s in self.specs))

    def request_blocks(self, seq_len: int) -> int:
        """Pool blocks one request of ``seq_len`` tokens reserves, summed over the groups (the per-spec formulas
        of the module doc at ``max_model_len = seq_len``; vllm 0.33.0 ``_max_memory_usage_bytes_from_groups``,
        ``kv_cache_planning.py:1253-1285``)."""
        L, blk, fl = int(seq_len), self.block_size, self.max_in_flight_tokens
        total = 0
        for s in self.specs:
            if s.kind == "sliding":
                b = cdiv(min((s.window or 0) - 1 + fl, L), blk) + 1
            elif s.kind == "chunked":
                b = cdiv(min((s.window or 0) + fl, L), blk)
            elif s.kind in ("gdn", "mamba2", "cross"):  # per-request state / encoder blocks: not per token
                b = s.blocks_per_request
            else:
                b = cdiv(cdiv(L, self.dcp_size), blk)
            total += s.groups * b
        return total

    def longest_request(self, available_bytes: float) -> int:
        """The longest request (tokens) whose blocks fit ``available_bytes`` (give the budget less the null block
        where the release holds it back): vLLM's binary search (``_estimate_max_model_len_from_groups``,
        ``kv_cache_planning.py:1288-1334``), here not capped at ``max_model_len``. 0 when one token does not fit."""
        if not self.bytes_per_block or self.request_blocks(1) * self.bytes_per_block > available_bytes:
            return 0
        lo, hi = 1, 1 << 31
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.request_blocks(mid) * self.bytes_per_block <= available_bytes:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def groups_text(self) -> str:
        """The layer groups as the allocator forms them, e.g. ``full x12 + chunked x36 (4 groups of 12 layers)``."""
        kinds = " + ".join(f"{s.kind} x{s.layers}" for s in self.specs)
        n = sum(s.groups for s in self.specs)
        return kinds + (f" ({n} groups of {self.group_size} layers)" if n > 1 else "")

    def capacity(self, available_bytes: float) -> dict[str, Any]:
        """``num_blocks``, ``max_concurrency`` (2 decimals, as logged) and ``kv_cache_size_tokens``."""
        if available_bytes < 0:
            raise OptkgError(f"KV budget must be >= 0 bytes, found {available_bytes}")
        num_blocks = int(available_bytes // self.bytes_per_block) if self.bytes_per_block else 0
        conc = num_blocks / self.blocks_per_request if self.blocks_per_request else 0.0
        if _at_least(self.engine_version, KV_SIZE_FROM_CONCURRENCY_SINCE):
            tokens = int(conc * self.max_model_len)
        else:  # num_blocks // groups x block (x dcp): vllm 0.20.0 kv_cache_utils.py:1694-1708
            tokens = num_blocks // max(1, sum(s.groups for s in self.specs)) * self.block_size * self.dcp_size
        return {"num_blocks": num_blocks, "max_concurrency": round(conc, 2),
                "max_concurrency_exact": conc, "kv_cache_size_tokens": tokens,
                "fits_one_request": available_bytes - self.bytes_per_block >= self.bytes_per_block * self.blocks_per_request}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gdn_state_bytes(la: dict[str, Any], tp: int, dtype_b: float, ssm_dtype_b: float | None = None) -> int:
    """One request's Gated DeltaNet state on one rank (bytes): the conv state in the Mamba cache dtype
    ``dtype_b`` and the temporal (SSM) state in ``ssm_dtype_b`` (default: the conv state's dtype;
    vllm 0.33.0 ``layers/mamba/mamba_utils.py:98-130``, ``_mamba_state_dtype``)."""
    nk, nv = la["linear_num_key_heads"], la["linear_num_value_heads"]
    dk, dv = la["linear_key_head_dim"], la["linear_value_head_dim"]
    conv_dim = dk * nk * 2 + dv * nv
    if conv_dim % tp or nv % tp:
        raise OptkgError(f"--tp: {tp} does not divide the Gated DeltaNet heads ({nk} key, {nv} value)")
    conv = conv_dim // tp * (la["conv_kernel"] - 1)
    temporal = nv // tp * dv * dk
    return int(conv * dtype_b + temporal * (dtype_b if ssm_dtype_b is None else ssm_dtype_b))


def ssm_state_dtype_bytes(model: ModelFacts, mamba_cache_dtype: str | None = None,
                          mamba_ssm_cache_dtype: str | None = None) -> tuple[float, float | None]:
    """(conv-state bytes per element, SSM-state bytes per element or None = the conv state's) for a GDN model.

    ``mamba_cache_dtype`` auto = the model dtype; ``mamba_ssm_cache_dtype`` auto = the conv state's dtype,
    except Qwen3.5, whose config's ``mamba_ssm_dtype`` applies (vllm 0.33.0 ``config/cache.py:296-302``,
    ``models/config.py:953-976``). Raises OptkgError for an unknown dtype name."""
    def size(name: str) -> float:
        b = DTYPE_BYTES.get(name.lower())
        if b is None:
            raise OptkgError(f"mamba cache dtype '{name}': expected auto, float32, bfloat16 or float16")
        return float(b)
    conv = float(model.dtype_bytes) if not mamba_cache_dtype or mamba_cache_dtype == "auto" else size(mamba_cache_dtype)
    ssm = mamba_ssm_cache_dtype if mamba_ssm_cache_dtype and mamba_ssm_cache_dtype != "auto" else \
        (model.linear_attention or {}).get("ssm_cache_dtype")
    return conv, (size(ssm) if ssm else None)


def _mamba2_state_bytes(la: dict[str, Any], tp: int, dtype_b: float) -> int:
    h, hd, st, g = la["mamba_num_heads"], la["mamba_head_dim"], la["ssm_state_size"], la["n_groups"]
    # groups are replicated up to tp when n_groups < tp (mamba_utils extra_groups_for_head_shards)
    g_eff = g if g % tp == 0 else g + (tp - g)
    conv = (h * hd + 2 * g_eff * st) // tp * (la["conv_kernel"] - 1)
    ssm_b = DTYPE_BYTES.get(la.get("ssm_cache_dtype", "float32").lower(), 4)
    return int(conv * dtype_b + h // tp * hd * st * ssm_b)


def plan_kv_cache(model: ModelFacts, tp_size: int = 1, pp_size: int = 1, dcp_size: int = 1,
                  kv_cache_dtype: str = "auto", max_model_len: int | None = None, block_size: int | None = None,
                  max_num_batched_tokens: int | None = None, async_scheduling: bool = True,
                  hybrid_allocator: bool | None = None, disable_sliding_window: bool = False,
                  enable_prefix_caching: bool | None = None, num_speculative_tokens: int = 0,
                  gpu_compute_capability: float | None = None, extra_full_layers: int = 0,
                  mamba_cache_dtype: str | None = None, mamba_ssm_cache_dtype: str | None = None,
                  engine_version: str | None = None, chunked_hybrid_env: bool | None = None,
                  speculative_method: str | None = None, kv_connector: str | None = None,
                  model_runner_v2: bool | None = None, rocm: bool = False) -> KVPlan:
    """vLLM V1's KV plan for ``model`` (see the module doc for every formula and its source).

    ``hybrid_allocator``: False for ``--disable-hybrid-kv-cache-manager``, True for
    ``--no-disable-hybrid-kv-cache-manager``, None to let vLLM decide; the decision (``hybrid_manager``) also
    reads ``engine_version`` (the vLLM release, None: the latest optkg knows), ``chunked_hybrid_env``
    (``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` as given, None: the release default) and
    ``speculative_method`` and ``kv_connector``. ``engine_version`` also sets the batches in flight (``batches_in_flight``),
    with the model runner the release picks for the model (``model_runner_v2`` None; True / False:
    ``VLLM_USE_V2_MODEL_RUNNER`` given; kg.engines.vllm.runner).

    ``gpu_compute_capability`` (default: Hopper, 9.0) picks the GDN prefill kernel: FlashInfer on
    SM90 (and SM10/12 with ``head_k_dim`` 128) exports prefill checkpoints in align mode, which aligns
    the block to 64 tokens and adds one checkpoint page per request (``qwen_gdn_linear_attn.py:148-200,
    686-760``, ``v1/attention/backends/gdn_attn.py:34``); elsewhere the Triton kernel does not.
    ``extra_full_layers``: a draft's attention layers (EAGLE heads, MTP layers), which join the
    full-attention group with the target's page size (kg.derive.drafts).
    ``rocm``: an AMD GPU (V0's MLA entry alignment is CUDA-only).
    ``mamba_cache_dtype`` / ``mamba_ssm_cache_dtype``: vLLM's ``--mamba-cache-dtype`` /
    ``--mamba-ssm-cache-dtype`` (None or auto: the defaults of ``ssm_state_dtype_bytes``).
    ``max_model_len`` defaults to the engine's (``ModelFacts.vllm_default_max_model_len``);
    ``max_num_batched_tokens`` to 8,192 (``vllm serve`` on H100/H200); ``block_size`` to 16 (64 for
    sparse MLA; raised for Mamba hybrids). Raises OptkgError for non-positive sizes, DCP with
    sliding-window layers, or a model without a length key and no ``max_model_len``.
    """
    for n, v in (("tp_size", tp_size), ("pp_size", pp_size), ("dcp_size", dcp_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise OptkgError(f"{n} must be a positive integer, found {v!r}")
    mml = max_model_len or model.vllm_default_max_model_len or model.derived_max_model_len
    if not mml:
        raise OptkgError(f"{model.name}: no max_model_len given and the config has no length key")
    mnbt = max_num_batched_tokens or (encoder_decoder_batched_tokens(MNBT_H100, int(mml), 1024)
                                      if model.is_encoder_decoder else MNBT_H100)
    from kg.engines.vllm.runner import model_uses_v2_runner
    v2, runner_why = model_uses_v2_runner(model, engine_version, speculative_method, pp_size, model_runner_v2)
    nb = batches_in_flight(pp_size, async_scheduling, engine_version, bool(v2))
    in_flight = nb * mnbt
    notes: list[str] = []
    kvdt = (kv_cache_dtype or "auto").lower()
    sparse = bool(model.is_mla and model.index_head_dim)
    if sparse and kvdt in QUANTISED_KV:
        notes.append(f"kv_cache_dtype {kvdt} on sparse MLA is stored as fp8_ds_mla (656 B/token/layer)")
        kvdt = "fp8_ds_mla"
    b = kv_element_bytes(kvdt, model)
    kinds = list(model.layer_kinds or ["full"] * model.num_hidden_layers)
    per_stage = math.ceil(len(kinds) / pp_size)
    kinds = kinds[:per_stage]
    decision = hybrid_manager(model, engine_version, chunked_hybrid_env, speculative_method,
                              None if hybrid_allocator is None else not hybrid_allocator, kv_connector)
    hybrid_allocator = decision.on
    if decision.refused:
        notes.append(decision.refused)
    if model.attention_chunk_size or (not decision.on and model.sliding_window and not disable_sliding_window):
        notes.append(f"hybrid KV-cache manager {decision.reason}" + (
            "" if decision.on else ": sliding-window and chunked layers are sized as full attention (kv_cache_planning.py:853-876)"))
    if disable_sliding_window:
        kinds = ["full" if k == "sliding" else k for k in kinds]
    if not hybrid_allocator:
        kinds = ["full" if k in ("sliding", "chunked") else k for k in kinds]
    counts: dict[str, int] = {}
    for k in kinds:
        if k in ("none",):
            continue
        if k == "mamba1":
            notes.append("Mamba-1 layers are not modelled; their state is not counted")
            continue
        counts[k] = counts.get(k, 0) + 1
    if not decision.on and (counts.get("linear") or counts.get("mamba")) and not decision.refused:
        decision.refused = (f"vLLM refuses to start: with the hybrid KV-cache manager {decision.reason}, the Mamba / "
                            "linear-attention state cannot be unified with the attention layers (ValueError 'Failed to "
                            "promote local KV cache specs to one unified type', vllm 0.33.0 v1/core/kv_cache_planning.py:"
                            "810-814; 0.14.0 v1/core/kv_cache_utils.py:1198-1205)")
        notes.append(decision.refused)
    if extra_full_layers:
        counts["full"] = counts.get("full", 0) + int(extra_full_layers)
        notes.append(f"{extra_full_layers} draft layer(s) cached beside the target's (speculative decoding)")
    if model.num_cross_attention_layers:  # encoder-decoder: one cross-attention cache per decoder layer
        counts["cross"] = math.ceil(model.num_cross_attention_layers / pp_size)
        enc_tokens = cross_attention_encoder_tokens(model, mnbt, engine_version)
        notes.append(cross_attention_note(model, enc_tokens, block_size or 16, mnbt))
        notes.append(ENCODER_DECODER_SCHEDULING_NOTE)
    # page per token per attention layer
    if model.is_mla:
        packed = MLA_PACKED_BYTES.get(kvdt)
        per_tok = float(packed) if packed is not None else ((model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)) * b
        if packed is None and not rocm and v0_mla_aligned(engine_version):
            # V0 0.7.2-0.7.3 pads each latent entry to 256 bytes of the model dtype (576 -> 640 elements in bf16):
            # CacheEngine.get_cache_block_size, worker/cache_engine.py:148-160 (align_to_256bytes, utils.py:799-802),
            # VLLM_CUDA_MEM_ALIGN_KV_CACHE=1 by default (envs.py:582-583 at 0.7.3); 0.8.0 has no padding
            elems = (model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)
            per256 = 256 // int(model.dtype_bytes)
            per_tok = cdiv(elems, per256) * per256 * b
            notes.append(f"vLLM {engine_version} (V0) pads the MLA cache entry to 256 bytes: {elems} -> "
                         f"{cdiv(elems, per256) * per256} elements per token per layer")
        if sparse:
            idx = model.index_head_dim + model.index_head_dim // 128 * 4
            per_tok += idx
    else:
        per_tok = kv_heads_per_rank(model, tp_size) * (model.head_dim + model.v_head_dim) * b
    if (counts.get("sliding") or counts.get("chunked")) and dcp_size > 1:
        raise OptkgError("--dcp: sliding-window and chunked layers need dcp_size 1 (vLLM kv_cache_interface.py:946-949)")
    block = block_size or 16
    if sparse:
        block = max(block, 64)  # the sparse MLA backends take multiples of 64 (flashattn_mla_sparse.py:50-51)
    # Mamba / GDN state and the block-size coupling
    state = 0
    lin_kind = None
    checkpoint_pages = 0
    if counts.get("linear") or counts.get("mamba"):
        la = model.linear_attention or {}
        dtype_b = float(model.dtype_bytes)
        if la.get("kind") == "gdn":
            conv_b, ssm_b = ssm_state_dtype_bytes(model, mamba_cache_dtype, mamba_ssm_cache_dtype)
            state, lin_kind = _gdn_state_bytes(la, tp_size, conv_b, ssm_b), "gdn"  # Kimi's KDA: the same shape
        elif la.get("kind") == "mamba2":
            state, lin_kind = _mamba2_state_bytes(la, tp_size, dtype_b), "mamba2"
        else:
            notes.append("linear-attention layers without known state sizes: not counted")
        prefix_on = True if enable_prefix_caching is None else bool(enable_prefix_caching)
        cc = 9.0 if gpu_compute_capability is None else float(gpu_compute_capability)
        flashinfer_gdn = lin_kind == "gdn" and la.get("variant") != "kda" and prefix_on and (
            9.0 <= cc < 10.0 or (cc >= 10.0 and la.get("linear_key_head_dim") == 128))
        if flashinfer_gdn:
            checkpoint_pages = 1
            notes.append("Gated DeltaNet prefill on FlashInfer with prefix caching: blocks aligned to 64 tokens, "
                         "one prefill-checkpoint page per request")
        if state and per_tok:
            align = max(16, block)
            if flashinfer_gdn:
                align = math.lcm(align, 64)
            need = align * cdiv(state, align * int(per_tok))
            if need > block:
                notes.append(f"attention block raised to {need} tokens so its page ({need} x {int(per_tok):,} B) "
                             f"holds one {la.get('variant', lin_kind).upper()} state of {state:,} B (vLLM 0.33.0 platforms/interface.py:1084-1104)")
                block = need
            if int(per_tok * block) > state:
                # vLLM logs "Padding mamba page size by X% ..." (platforms/interface.py:1114-1131)
                notes.append(f"{la.get('variant', lin_kind).upper()} state page padded by "
                             f"{100 * (int(per_tok * block) - state) / state:.2f}% to the attention page "
                             f"({int(per_tok * block):,} B)")
    page = int(per_tok * block)
    prefix = True if enable_prefix_caching is None else bool(enable_prefix_caching)
    specs: list[SpecGroup] = []

    def bpr(kind: str) -> int:
        if kind == "sliding":
            return cdiv(min((model.sliding_window or 0) - 1 + in_flight, mml), block) + 1
        if kind == "chunked":
            return cdiv(min((model.attention_chunk_size or 0) + in_flight, mml), block)
        if kind in ("linear", "mamba"):
            return (2 + checkpoint_pages if prefix else 1) + num_speculative_tokens
        if kind == "cross":
            return cross_attention_blocks_per_request(cross_attention_encoder_tokens(model, mnbt, engine_version), block)
        return cdiv(cdiv(mml, dcp_size), block)

    for kind, n in counts.items():
        name = kind
        if kind == "full" and model.is_mla:
            name = "mla+indexer" if sparse else "mla"
        if kind in ("linear", "mamba"):
            if not state:
                continue
            name = lin_kind or kind
        specs.append(SpecGroup(name, n, page, bpr(kind), window=model.sliding_window if kind == "sliding" else
                               (model.attention_chunk_size if kind == "chunked" else None)))
    if not specs:
        raise OptkgError(f"{model.name}: no layer holds a KV cache")
    if len(specs) == 1:
        s = specs[0]
        group_size = s.layers
        bytes_per_block = s.layers * page
        total_bpr = s.blocks_per_request
    else:
        lo, hi = min(s.layers for s in specs), max(s.layers for s in specs)
        ratio = group_size_max_ratio(engine_version)
        group_size = hi if ratio is not None and hi < lo * ratio else lo
        for s in specs:
            s.groups = cdiv(s.layers, group_size)
        bytes_per_block = group_size * page
        total_bpr = sum(s.groups * s.blocks_per_request for s in specs)
    return KVPlan(block, int(mml), mnbt, nb, in_flight, bool(hybrid_allocator), kvdt, specs, group_size,
                  bytes_per_block, total_bpr, notes, decision.reason if model.attention_chunk_size or (
                      not decision.on and model.sliding_window) else "",
                  decision.refused, dcp_size, engine_version, "V2" if v2 else "V1", runner_why)


def stack_plan(stack: Any, ns: dict[str, Any], m: ModelFacts, tp: int, pp: int, dcp: int, kvdt: str, mml: int,
               max_num_batched_tokens: int, draft_layers: int = 0) -> KVPlan | None:
    """vLLM V1's KV plan for a stack (``plan_kv_cache`` with the stack's settings and ``max_num_batched_tokens``,
    given or ``vllm serve``'s default for the GPU); None when the plan cannot be made (e.g. a DCP size the
    sliding-window layers refuse)."""
    from kg.derive.kv import compute_capability
    hw = stack.hardware or {}
    spec_tokens = int(ns.get("num_speculative_tokens") or 0)
    try:
        return plan_kv_cache(
            m, tp, pp, dcp, kvdt, mml, int(ns["block_size"]) if ns.get("block_size") else None,
            int(max_num_batched_tokens),
            async_scheduling=ns.get("async_scheduling") is not False,
            hybrid_allocator=None if ns.get("disable_hybrid_kv_cache_manager") is None
            else not ns["disable_hybrid_kv_cache_manager"], engine_version=stack.engine_version,
            chunked_hybrid_env=ns.get("chunked_local_attn_hybrid_kv_cache"),
            speculative_method=ns.get("speculative_method"),
            kv_connector=(str(ns.get("kv_connector") or "") if "kv-cache-connector" in stack.techniques else None),
            disable_sliding_window=bool(ns.get("disable_sliding_window")),
            enable_prefix_caching=("prefix-caching" in stack.techniques) if ns.get("enable_prefix_caching") is None
            else bool(ns["enable_prefix_caching"]), num_speculative_tokens=spec_tokens,
            gpu_compute_capability=compute_capability(hw) if hw else None, extra_full_layers=draft_layers,
            mamba_cache_dtype=ns.get("mamba_cache_dtype"), mamba_ssm_cache_dtype=ns.get("mamba_ssm_cache_dtype"),
            rocm=str(hw.get("vendor") or "").lower() == "amd")
    except OptkgError:
        return None
