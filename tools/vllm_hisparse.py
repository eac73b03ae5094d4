"""``hisparse_host_pool_gib(kv_transfer_config)`` in vLLM's generated rows (0.33.0 / 0.34.0 vllm/config/kv_transfer.py,
0.34.0 :16-47), called by VllmConfig.__post_init__ where HiSparse is configured (0.34.0 config/vllm.py:2133-2141).

The function gathers the ``kv_connector_extra_config`` of every HiSparseConnector: for a MultiConnector, those of
its ``connectors`` list (a list of JSON objects: not modelled, the value is unknown there); for any other connector,
the config's own extra config when ``kv_connector`` is HiSparseConnector, else none. With one entry it refuses a
missing or null ``host_pool_gib`` (:42-43) and a value not above 0 after ``float()`` (:44-46), and returns it;
with none it returns None (read by the caller as "no HiSparseConnector"). The walk does not translate the list
comprehension, so this gives the value and the two refusals for the non-MultiConnector case, read from the
function's own text (nothing is given when it does not have this shape).
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

PATH = "vllm/config/kv_transfer.py"
NAME = "hisparse_host_pool_gib"
NONE = cg.NONE
SHAPE = ("if kv_transfer_config is None:", "if kv_transfer_config.kv_connector == 'MultiConnector':",
         "connector.get('kv_connector') == 'HiSparseConnector'", "host_pool_gib = entries[0].get('host_pool_gib')",
         "if host_pool_gib is None:", "host_pool_gib = float(host_pool_gib)", "if host_pool_gib <= 0:")
JSON_EXTRA = "kv_transfer_config__kv_connector_extra_config"  # the JSON key's input (the walk's name)
PLAIN = ("int", "float", "str", "bool", "list", "dict")  # a JSON value that is not null


def _raises(f: ast.FunctionDef) -> dict[str, int]:
    """message start -> line of the function's ``raise ValueError("...")`` statements."""
    out = {}
    for n in ast.walk(f):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args \
                and isinstance(n.exc.args[0], ast.Constant) and isinstance(n.exc.args[0].value, str):
            out[n.exc.args[0].value] = n.lineno
    return out


def call_hook(w: Any, name: str, node: ast.Call, fr: cg.Frame, pc: list[str]) -> Any:
    """The function's value for the stack's KV transfer config, its two refusals recorded (module doc); None for
    any other call or a shape not read here."""
    if name != NAME or len(node.args) != 1 or node.keywords:
        return None
    hit = w.find_function(NAME, PATH)
    if hit is None:
        return None
    text = ast.unparse(hit[0])
    raises = _raises(hit[0])
    missing = next((v for k, v in raises.items() if k.startswith("HiSparseConnector requires host_pool_gib")), None)
    positive = next((v for k, v in raises.items() if "host_pool_gib must be positive" in k), None)
    if any(s not in text for s in SHAPE) or missing is None or positive is None:
        return None
    try:
        cfg = w.value(node.args[0], fr, pc)
        if not isinstance(cfg, cg.Obj):
            return None
        present = w.as_text(cfg, boolean=True)
        conn = w.as_text(w.get_attr(cfg, "kv_connector", pc))
    except cg.Untranslatable:
        return None
    try:
        extra = w.as_text(w.get_attr(cfg, "kv_connector_extra_config", pc))
    except cg.Untranslatable:
        # a config built from --kv-offloading-size taints it; one whose connector is HiSparseConnector comes from
        # the --kv-transfer-config JSON (the offloading path names its own connector: config/vllm.py
        # _post_init_kv_transfer_config), so the JSON key is the value where it is read below
        extra = JSON_EXTRA if JSON_EXTRA in w.input_info else None
        if extra is None:
            return None
    own = [present, f"({conn} != 'MultiConnector')", f"({conn} == 'HiSparseConnector')"]
    item = f"item({extra}, 'host_pool_gib')"
    given = f"('host_pool_gib' in keys({extra}) and (" + " or ".join(f"is_a({item}, {t!r})" for t in PLAIN) + "))"
    base = w.eff(fr, pc)
    w.site(PATH, missing, base + own + [f"(not {given})"])
    w.site(PATH, positive, base + own + [given, f"(is_a({item}, 'int') or is_a({item}, 'float'))",
                                         f"({item} <= 0)"])
    # the value: None without a config or a HiSparseConnector, unknown for a MultiConnector's list
    return cg.Expr(f"({NONE!r} if not {present} else {cg.UNK} if {conn} == 'MultiConnector' else {NONE!r} if "
                   f"{conn} != 'HiSparseConnector' else float({item}))")
