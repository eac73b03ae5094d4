"""``glossary.html``: the terms and abbreviations optkg's reports use (catalog/glossary.yaml, the same entries as
docs/glossary.md), one anchor per term; the HTML check report links each term it uses here."""
from __future__ import annotations

from kg.output.glossary import terms
from kg.output.site.html import esc, page, source_link


def glossary_page() -> str:
    items = []
    for t in terms():
        src = t.get("source") or {}
        cite = f'<p class="muted">Source: {source_link(src.get("title"), src.get("url"))}</p>' if src else ""
        items.append(f'<dt id="{esc(t["anchor"])}">{esc(t["term"])}</dt>'
                     f'<dd><p>{esc(" ".join(str(t["long"]).split()))}</p>{cite}</dd>')
    body = ("<h1>Glossary</h1><p>Terms and abbreviations in optkg's reports and pages. "
            f"The same entries as <code>docs/glossary.md</code>.</p><dl class=\"glossary\">{''.join(items)}</dl>")
    return page("Glossary", body, current="glossary.html")
