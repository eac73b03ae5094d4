"""LMDeploy (``lmdeploy serve api_server <model> ...``): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/lmdeploy.yaml`` (lmdeploy 0.18.0 ``lmdeploy/cli/serve.py`` and ``lmdeploy/cli/utils.py``):
flags and defaults; ``--quant-policy`` 0/4/8/16/17 (or none/int4/int8/fp8/fp8_e5m2) becomes the stack's
``kv_cache_dtype``. Its commands are read by the flag table alone (the protocol's default ``read_launch``).
"""
from __future__ import annotations

from kg.engines.base import Engine


class LMDeploy(Engine):
    name = "lmdeploy"
    title = "LMDeploy"
    decode_context_parallel = False
    keeps_null_block = False


ENGINE = LMDeploy()
