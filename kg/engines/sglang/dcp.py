"""SGLang's decode context parallelism: from which release it exists and the sizes it splits a TP group into."""
from __future__ import annotations

from kg.derive.kv import dcp_group_sizes
from kg.inputs.modelcfg import ModelFacts


# SGLang has --dcp-size from 0.5.15 (catalog/engines/sglang.yaml); before it DCP is impossible there
SGLANG_DCP_SINCE = "0.5.15"


def valid_dcp_sizes_sglang(model: ModelFacts, tp_size: int) -> list[int]:
    """DCP sizes SGLang (0.5.15 on) splits a TP group into: ``[1]`` means DCP is impossible.

    SGLang 0.5.23 builds each DCP group from ``dcp_size`` consecutive ranks of a TP group
    (distributed/parallel_state.py:2719-2725), so ``dcp_size`` divides ``tp_size``; KV heads then shard over
    ``tp_size // dcp_size`` groups (configs/model_config.py:1700-1711 get_num_kv_heads): an MLA latent (one KV head)
    is cached once per DCP group at every divisor, a GQA model only while each rank still holds its group's heads
    (``dcp_size <= tp_size / H_kv``, the condition attention_hook.py:67-71 states). Sliding-window models are left at
    ``[1]`` as for vLLM (not checked in SGLang's source).
    """
    return dcp_group_sizes(model, tp_size, query_groups_divide=False)


def has_dcp(version: str | None) -> bool:
    """Whether SGLang ``version`` (None: the latest release optkg knows) has decode context parallelism: from
    ``SGLANG_DCP_SINCE``."""
    from packaging.version import InvalidVersion, Version
    from kg.inputs.effective import latest_release
    v = version or latest_release("sglang")
    try:
        return v is not None and Version(str(v)) >= Version(SGLANG_DCP_SINCE)
    except InvalidVersion:
        return False
