"""Markdown escaping shared by the markdown renderers (kg.output.formats, kg.output.place_report)."""
from __future__ import annotations

from typing import Any


def md_cell(s: Any) -> str:
    """Escape text for a markdown line or table cell: backslashes doubled, ``|`` escaped, ``<`` escaped
    (no raw HTML tag such as ``<script>`` or ``<img onerror>`` can start; kg.core.textsafe.markdown),
    ``javascript:`` links defused, control characters escaped, newlines as ``<br>``."""
    from kg.core.textsafe import markdown
    return "<br>".join(markdown(part) for part in str(s).split("\n"))
