"""The offline HTML explorer (``optkg export site -o DIR``; ``optkg export --all`` writes it to ``exports/site/``).

Pipeline, one job per module: ``model`` gathers the data from the analyses (catalog, coupling graph,
map cells, gaps ranks, matrices per engine and release, rules per technique) → ``pages_map``,
``pages_technique``, ``pages_graph``, ``pages_matrix`` render HTML (``html`` escapes and frames) →
``assets`` adds the stylesheet, the scripts and the vendored cytoscape.js with its licence. The
check report (``optkg check --format html``) is ``report``.

``build_site(catalog, rules_dir)`` returns ``{file name: bytes}`` (flat folder, deterministic: the same
bytes for the same catalog and rules, whatever the hash seed). ``write_site`` writes it through
kg.core.outdir.OwnedFolder (marker ``.optkg-generated.json``; only files optkg can prove it wrote there
are replaced, unless ``force``, or removed, see kg.core.outdir); ``check_site`` lists what differs, without writing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

GENERATOR = "optkg export site"


def build_site(catalog, rules_dir: Path | None = None, model: dict | None = None) -> dict[str, bytes]:
    """Every file of the site, by name (see module doc). ``model``: a ``site_model`` already built."""
    from kg.output.site.assets import asset_files
    from kg.output.site.model import site_model
    from kg.output.site.pages_glossary import glossary_page
    from kg.output.site.pages_graph import graph_page
    from kg.output.site.pages_map import map_page, techniques_page
    from kg.output.site.pages_matrix import matrix_page
    from kg.output.site.pages_technique import technique_page
    m = model if model is not None else site_model(catalog, rules_dir)
    pages = {"index.html": map_page(m), "techniques.html": techniques_page(m), "graph.html": graph_page(m),
             "glossary.html": glossary_page()}
    for tid in m["techniques"]:
        pages[f"technique-{tid}.html"] = technique_page(m, tid)
    for p in m["matrices"]:
        pages[f"{p['slug']}.html"] = matrix_page(m, p)
    files = {name: text.encode("utf-8") for name, text in pages.items()}
    files.update(asset_files())
    return dict(sorted(files.items()))


def write_site(files: dict[str, bytes], out_dir: Path, *, force: bool = False,
               log: Callable[[str], None] | None = None) -> list[Path]:
    """Write ``files`` into the existing folder ``out_dir`` (OwnedFolder rules; OptkgError when refused,
    before anything is written). Returns the paths written."""
    from kg.core.outdir import OwnedFolder
    folder = OwnedFolder(out_dir, generator=GENERATOR, force=force)
    folder.check(list(files), files)
    written = [folder.write(name, data) for name, data in files.items()]
    folder.remove_stale(files, log)
    folder.finish()
    if log:
        log(f"wrote {out_dir}/ ({len(files)} files, {sum(len(b) for b in files.values()):,} bytes)")
    return written


def check_site(files: dict[str, bytes], out_dir: Path) -> list[str]:
    """Problems that make ``out_dir`` differ from ``files`` (missing, stale, not written by optkg)."""
    from kg.core.outdir import MARKER
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return [f"{out_dir}: missing (the site)"]
    problems = []
    for name, data in files.items():
        p = out_dir / name
        if not p.is_file():
            problems.append(f"{p}: missing")
        elif p.read_bytes() != data:
            problems.append(f"{p}: stale (differs from what the catalog generates)")
    for extra in sorted(q.name for q in out_dir.iterdir()):
        if extra not in files and extra != MARKER:
            problems.append(f"{out_dir / extra}: not written by `{GENERATOR}` (remove it)")
    return problems


__all__ = ["GENERATOR", "build_site", "check_site", "write_site"]
