"""The checks ``optkg validate`` runs: one registry (``CHECKS``: code, severity, tags, title,
description), read by docs, SARIF rule metadata and ``--select``/``--ignore``; ``problem`` builds a
``Problem`` with its check's severity.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kg.core.errors import Problem


# ---------------------------------------------------------------------------------------------
# the checks `optkg validate` runs: one registry, so docs, SARIF rule metadata and --select/--ignore
# all read the same table

@dataclass(frozen=True)
class Check:
    """One validation check: its stable ``code``, default ``severity``, ``tags`` (for --select and
    --ignore), a title and a description of what it checks (used by ``optkg docs`` and SARIF)."""

    code: str
    severity: str
    tags: tuple[str, ...]
    title: str
    description: str


_CHECK_LIST = [
    Check("yaml", "error", ("syntax",), "File is valid YAML",
          "The file parses as one UTF-8 YAML document with the safe loader: no custom tags, no alias bombs, no tabs for indentation."),
    Check("duplicate-key", "error", ("syntax",), "No key twice in one mapping",
          "YAML keeps only the last of two equal keys, silently dropping the first; the catalog refuses the file instead."),
    Check("schema-required", "error", ("schema",), "Required fields are present",
          "Every technique has id, name, summary, status, coordinates, benefits, costs and references; every benefit and cost "
          "names a dimension; every reference has a URL; a deprecated entry names replaced_by."),
    Check("schema-unknown-field", "error", ("schema",), "No unknown fields",
          "The schema sets additionalProperties: false everywhere, so a misspelt field is an error, not silently ignored."),
    Check("schema-enum", "error", ("schema",), "Enumerated fields hold a listed value",
          "Stages, layers, dimensions, status, coupling kinds, severities and reference kinds come from fixed lists (the axes are read from catalog/axes.yaml)."),
    Check("schema-type", "error", ("schema",), "Fields have the right type",
          "Lists are lists, mappings are mappings, text is text."),
    Check("schema-format", "error", ("schema",), "Field values have the right form",
          "Ids are lower-case-with-dashes, URLs start with http(s)://, summaries and mechanisms are long enough, lists are not empty and hold no duplicates."),
    Check("schema-coupling-end", "error", ("schema", "coupling"), "A coupling points at exactly one thing",
          "A coupling names a target technique or a property, not both and not neither."),
    Check("schema", "error", ("schema",), "Other schema constraints", "Any other JSON Schema constraint of catalog/schema/technique.schema.json."),
    Check("placeholder", "error", ("template",), "No template placeholders left",
          "Values that still contain TODO (left from `optkg new`) must be filled in."),
    Check("id-filename", "error", ("ids",), "Id equals the file name", "catalog/techniques/<id>.yaml holds the technique with that id."),
    Check("duplicate-id", "error", ("ids", "cross-file"), "Ids are unique", "No two files declare the same id; ids are never reused."),
    Check("duplicate-name", "error", ("ids", "cross-file"), "Names are unique",
          "Two entries with the same name (case-insensitive) describe one technique and must be merged."),
    Check("alias-clash", "error", ("ids", "aliases", "cross-file"), "An alias never shadows another id",
          "An alias equal to another technique's id would make names ambiguous."),
    Check("duplicate-alias", "error", ("ids", "aliases", "cross-file"), "Aliases are unique across the catalog",
          "One alias resolves to one technique."),
    Check("dangling-replaced-by", "error", ("ids", "lifecycle", "cross-file"), "replaced_by names an existing technique",
          "A deprecated entry points at its successor, which must exist."),
    Check("replaced-by-deprecated", "warning", ("ids", "lifecycle", "cross-file"), "replaced_by does not point at another deprecated entry",
          "Point straight at the live successor instead of a chain of deprecated entries."),
    Check("replaced-by-not-deprecated", "warning", ("lifecycle",), "replaced_by only on deprecated entries",
          "replaced_by on a stable or experimental entry is ignored; set status: deprecated or remove it."),
    Check("self-coupling", "error", ("coupling",), "No self-coupling", "A technique does not couple with itself (also through its own alias)."),
    Check("dangling-target", "error", ("coupling", "cross-file"), "Coupling targets exist",
          "A coupling's target is the id (or an alias) of a technique in the catalog."),
    Check("dangling-property", "error", ("coupling", "cross-file"), "Coupling properties exist",
          "A coupling's property is declared in catalog/properties.yaml."),
    Check("alias-reference", "warning", ("coupling", "aliases", "cross-file"), "Couplings name ids, not aliases",
          "A coupling that names an old id or another alias still resolves (ids never die), but should name the current id."),
    Check("deprecated-target", "warning", ("coupling", "lifecycle", "cross-file"), "Couplings do not target deprecated entries",
          "A coupling to a deprecated technique should name its replacement."),
    Check("contradicting-couplings", "error", ("coupling", "cross-file"), "A coupling and its reverse agree",
          "A requires B while B conflicts_with A (or A mitigates B while B amplifies A, or A and B each replace the other, "
          "or A both requires and conflicts with B) is a contradiction unless a condition separates the cases."),
    Check("coupling-condition", "error", ("coupling",), "Coupling conditions parse",
          "A coupling's condition is an expression in the safe language of kg/engine/expr.py (the one rules use); "
          "a condition that does not parse would silently never hold."),
    Check("coupling-unknown-fact", "warning", ("coupling",), "Coupling conditions read known facts",
          "A name in a coupling condition that is not a technique parameter, property, stack setting, model fact or rule "
          "fact, but is close to one, is probably a typo: the condition would never hold."),
    Check("removed-id", "error", ("ids", "lifecycle", "cross-file"), "Ids never die",
          "A technique file was deleted but its id no longer resolves: keep the entry with status: deprecated and "
          "replaced_by, or add the old id as an alias of the entry that took over."),
    Check("outside-catalog", "error", ("usage",), "Validated files are inside the catalog",
          "Cross-file checks only see files in <catalog>/techniques/."),
    Check("engine-table", "error", ("cross-file",), "Engine flag tables name existing techniques",
          "catalog/engines/*.yaml map engine flags to technique ids; each id must resolve."),
    Check("hardware", "error", ("hardware",), "Hardware files are well-formed", "A hardware file is a mapping with an id and at least one source."),
    Check("properties", "error", ("properties",), "Properties are well-formed", "Every entry of catalog/properties.yaml has an id."),
    Check("rule-schema", "error", ("rules",), "Rule files match the rule schema", "rules/*.yaml follow the rule file schema in kg/engine/rules.py."),
    Check("duplicate-rule-id", "error", ("rules", "ids"), "Rule ids are unique", "No two rules share an id."),
    Check("rule-expression", "error", ("rules",), "Rule expressions are in the expression language",
          "condition, numbers and severity bands use only the safe expression language of kg/engine/expr.py."),
    Check("rule-version", "error", ("rules",), "Rule version ranges parse", "applies_to.versions is a PEP 440 specifier such as '>=0.6,<0.8'."),
    Check("rule-parent", "error", ("rules",), "Rule parents exist", "A rule's parent names another rule of the same ruleset."),
    Check("rule-scope", "error", ("rules", "engines"), "Engine rules carry release bounds and evidence",
          "A rule with applies_to.engines names a release range (lower bound; upper bound at the release that changed it, or evidence at the newest pinned release) and evidence from the released wheel (kg/engine/scope.py)."),
    Check("engine-flag-scope", "warning", ("engines",), "Engine flags name their releases and evidence",
          "A flag entry of catalog/engines/vllm.yaml or sglang.yaml gives since: (and until: when a release removed it) and evidence from the released wheel."),

    Check("rule-unknown-technique", "error", ("rules", "cross-file"), "Rules name existing techniques",
          "Technique ids in a rule's match, involves and fixes resolve in the catalog."),
    Check("rule-no-fixture", "warning", ("rules", "fixtures"), "Every rule ships fixtures",
          "rules/fixtures/<rule-id>.yaml holds cases on which the rule must fire and cases on which it must not."),
    Check("rule-refines", "error", ("rules", "cross-file"), "Rules agree with the coupling they refine",
          "A rule's refines: names an existing catalog coupling (<technique>/<kind>/<target>), the rule names that "
          "coupling's techniques, and both are errors or neither is (kg.knowledge.couplings.refine_problems)."),
]
CHECKS: dict[str, Check] = {c.code: c for c in _CHECK_LIST}


def problem(file: str, line: int, column: int, path: str, message: str, code: str, **kw: Any) -> Problem:
    """A Problem whose severity comes from ``CHECKS[code]`` (error for unknown codes)."""
    sev = CHECKS[code].severity if code in CHECKS else "error"
    return Problem(file, line, column, path, message, code, severity=kw.pop("severity", sev), **kw)


def fingerprint(p) -> str:
    """Stable id of a problem for baselines: check code, file name, field path and found value (not the line)."""
    import hashlib
    key = "\0".join([p.code, Path(p.file).name, p.path, repr(p.found)])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def problem_dict(p) -> dict[str, Any]:
    """``p.to_dict()`` with the check's ``tags`` and the baseline ``fingerprint`` (the problem shape of
    ``optkg validate --format json``)."""
    d = p.to_dict()
    d["tags"] = list(CHECKS[p.code].tags) if p.code in CHECKS else []
    d["fingerprint"] = fingerprint(p)
    return d
