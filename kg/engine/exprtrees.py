"""Parsed and checked expression trees kept across runs, so a one-shot ``check`` does not parse its expressions again.

A warm ``optkg check`` reads its rules and the release's generated check rows from the content-keyed cache, then
parses and checks each expression it evaluates (~270: ``ast.parse`` and the language and cost checks were ~9 % of
the run). ``preload(texts)`` reads one cache entry per list of expression texts (kg.core.cache: keyed by the
SHA-256 of the texts themselves, MAC-checked like every entry) holding, for each text that passes
``kg.engine.expr.compile_expr``, the JSON of its tree in plain form and the functions it calls
(``kg.engine.expr.tree_json``); on a miss it builds the entry once (every text parsed and checked). The trees go to
``kg.engine.expr.add_trees``: ``compiled`` builds a text's closures from its tree when every function it calls is
allowed, and parses the text as before otherwise (a text with no tree, an error to report).
"""
from __future__ import annotations

from typing import Iterable

from kg.engine import expr

FORMAT = 2  # bump when kg.engine.expr.plain changes what a tree holds
_DONE: set[str] = set()  # keys of the entries this process has read


def preload(texts: Iterable[str]) -> None:
    """Make the checked trees of ``texts`` known to ``kg.engine.expr.compiled`` (see the module doc)."""
    todo = list(dict.fromkeys(t for t in texts if isinstance(t, str) and t))
    if not todo:
        return
    from kg.core import cache
    from kg.core.digest import sha256_hex
    key = sha256_hex([f"expr-trees {FORMAT}\0".encode(), "\0".join(todo).encode("utf-8", "surrogatepass")])
    if key in _DONE:
        return
    path = cache.cache_file(f"expr-trees-{key[:32]}.json")
    data = cache.read_data(path, "expr-trees", key)
    if not (isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in data.items())):
        data = {t: j for t in todo if (j := expr.tree_json(t)) is not None}
        cache.write_data(path, "expr-trees", key, data)
    expr.add_trees(data)
    _DONE.add(key)
