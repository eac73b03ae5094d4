"""Markdown escaping shared by the markdown renderers (kg.output.formats, kg.output.place_report)."""
from __future__ import annotations

from typing import Any


def md_cell(s: Any) -> str:
    """Escape text for a markdown table cell: backslashes doubled, ``|`` escaped, newlines as ``<br>``."""
    return str(s).replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")
