"""Escaping text for each diagram target: Graphviz HTML labels (``html_text``), quoted DOT strings
(``dot_string``), Mermaid labels and ids (``mermaid_text``, ``mermaid_id``). Names with quotes, ``<``,
``&``, braces or Chinese render as text and cannot change a diagram's structure.
"""
from __future__ import annotations

import html
import re
from typing import Any


_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# ---------------------------------------------------------------------------------------------
# escaping

def _clean(s: Any) -> str:
    """Text with control characters (which XML and DOT cannot carry) replaced by spaces."""
    return _CTRL.sub(" ", str(s)).replace("\n", " ").replace("\t", " ")


def html_text(s: Any) -> str:
    """Text for inside a Graphviz HTML-like label: ``& < > " '`` become entities and a backslash is
    doubled (Graphviz expands ``\\N``, ``\\G``, ``\\n`` even inside HTML labels; ``\\\\`` shows one)."""
    return html.escape(_clean(s), quote=True).replace("\\", "\\\\")


def dot_string(s: Any) -> str:
    """A double-quoted DOT string for ids and escString attributes (tooltip): a backslash becomes
    four (the DOT parser and the escString expansion each halve them, so ``\\N`` stays text) and
    quotes are escaped."""
    return '"' + _clean(s).replace("\\", "\\\\\\\\").replace('"', '\\"') + '"'


_MERMAID_SAFE = set(" -_.,:/+=→×·")


def mermaid_text(s: Any) -> str:
    """Text for inside a quoted Mermaid label: everything but letters, digits and ``-_.,:/+=→×·``
    and space becomes a ``#<code>;`` entity, so quotes, brackets, pipes and ``#`` cannot end the label."""
    out = []
    for ch in _clean(s):
        out.append(ch if (ch.isalnum() or ch in _MERMAID_SAFE) else f"#{ord(ch)};")
    return "".join(out)


def mermaid_id(node: str) -> str:
    """A Mermaid node id for ``t:<id>`` / ``p:<id>`` / ``x:<id>`` (injective: technique ids have no ``_``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", node.replace(":", "_", 1))
