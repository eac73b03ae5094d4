"""The site's static files: the stylesheet and scripts (``assets/``) and the vendored graph library.

``vendor/cytoscape.min.js`` is cytoscape.js 3.35.0 (MIT; ``npm pack cytoscape@3.35.0``, file
``dist/cytoscape.min.js`` unchanged), shipped beside the pages with its licence
(``cytoscape-LICENSE.txt``) so the site works offline: no CDN, no network request.
"""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
CYTOSCAPE_VERSION = "3.35.0"
ASSETS = ("site.css", "map.js", "graph.js", "matrix.js")
VENDOR = ("cytoscape.min.js", "cytoscape-LICENSE.txt")


def asset_files() -> dict[str, bytes]:
    """{file name: bytes} of every static file the pages load."""
    out = {name: (HERE / "assets" / name).read_bytes() for name in ASSETS}
    out.update({name: (HERE / "vendor" / name).read_bytes() for name in VENDOR})
    return out


def stylesheet() -> str:
    """The site's stylesheet as text (the check report inlines it)."""
    return (HERE / "assets" / "site.css").read_text(encoding="utf-8")
