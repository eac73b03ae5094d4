"""Load and validate the technique catalog.

Input: a catalog folder holding ``axes.yaml``, ``properties.yaml``, ``techniques/*.yaml`` and
``hardware/*.yaml``. Output: a ``Catalog`` (validated techniques, aliases, properties, axes) and
the list of ``Problem`` found, all in one pass. Checks beyond the JSON Schema: id equals file name,
ids unique, aliases unique across the catalog (and never equal to another id), no two entries with
the same name, coupling targets and properties exist, no self-coupling, deprecated entries name an
existing ``replaced_by``, a coupling and its reverse do not contradict each other, no duplicate
YAML keys, no template placeholders left. ``CHECKS`` lists every check with its code, severity,
tags and description (read by ``optkg validate --select/--ignore``, SARIF rule metadata and
``optkg docs``). Every Problem names file, line, column, the field path, what was found, the
valid values (enum values with their descriptions) and a hint.
"""
from __future__ import annotations

import contextlib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable


from kg.core import paths
from kg.knowledge.axes import Axes, load_axes
from kg.core.errors import OptkgError, Problem
from kg.knowledge.schema import technique_schema
from kg.core.yamlio import YamlDoc, load_yaml

CACHE_VERSION = 2


@dataclass
class Catalog:
    """A validated catalog. ``techniques`` maps id -> entry dict (as in the YAML)."""

    root: Path
    axes: Axes
    techniques: dict[str, dict[str, Any]]
    properties: dict[str, dict[str, Any]]
    hardware: dict[str, dict[str, Any]]
    aliases: dict[str, str] = field(default_factory=dict)  # alias (lower-case) -> id
    files: dict[str, str] = field(default_factory=dict)  # id -> file path
    warnings: list[Problem] = field(default_factory=list)  # problems of severity warning (usable catalog)

    def resolve(self, name: str) -> str | None:
        """Resolve a technique id or alias (case-insensitive) to its id. Ids never die: an old id kept
        as an alias after a rename resolves to the new id (``resolve_note`` says so)."""
        if name in self.techniques:
            return name
        return self.aliases.get(name.lower())

    def resolve_note(self, name: str) -> str | None:
        """A deprecation note when ``name`` is not the current id of a live technique, else None."""
        tid = self.resolve(name)
        if tid is None:
            return None
        t = self.techniques[tid]
        if tid != name:
            return f"'{name}' is an old id or alias of '{tid}'; it still resolves, but write '{tid}'"
        if t.get("status") == "deprecated":
            return f"'{tid}' is deprecated" + (f"; use '{t['replaced_by']}'" if t.get("replaced_by") else "")
        return None

    def without(self, tid: str) -> "Catalog":
        """A shallow copy of the catalog without technique ``tid`` and its aliases (for before/after comparisons)."""
        return Catalog(self.root, self.axes, {k: v for k, v in self.techniques.items() if k != tid}, self.properties,
                       self.hardware, {a: t for a, t in self.aliases.items() if t != tid},
                       {k: v for k, v in self.files.items() if k != tid}, list(self.warnings))

    def technique(self, name: str) -> dict[str, Any]:
        tid = self.resolve(name)
        if tid is None:
            raise OptkgError(f"unknown technique '{name}' (see `optkg matrix` or catalog/techniques/ for ids)")
        return self.techniques[tid]

    def cells(self, tid: str) -> list[tuple[str, str, str]]:
        """Every (stage, layer, dimension) cell the technique occupies: all its stages x its layer span x primary dimension."""
        t = self.techniques[tid]
        c = t["coordinates"]
        return [(s, layer, c["dimension"]) for s in c["stages"] for layer in self.axes.layer_span(c["layers"])]

    def resolve_hardware(self, name: str) -> dict[str, Any]:
        key = name.lower()
        for hid, hw in self.hardware.items():
            if hid.lower() == key or key in (a.lower() for a in hw.get("aliases", [])):
                return hw
        known = ", ".join(sorted(self.hardware))
        raise OptkgError(f"unknown GPU '{name}'; known: {known} (add catalog/hardware/<id>.yaml)")


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
    Check("rule-unknown-technique", "error", ("rules", "cross-file"), "Rules name existing techniques",
          "Technique ids in a rule's match, involves and fixes resolve in the catalog."),
    Check("rule-no-fixture", "warning", ("rules", "fixtures"), "Every rule ships fixtures",
          "rules/fixtures/<rule-id>.yaml holds cases on which the rule must fire and cases on which it must not."),
]
CHECKS: dict[str, Check] = {c.code: c for c in _CHECK_LIST}


def problem(file: str, line: int, column: int, path: str, message: str, code: str, **kw: Any) -> Problem:
    """A Problem whose severity comes from ``CHECKS[code]`` (error for unknown codes)."""
    sev = CHECKS[code].severity if code in CHECKS else "error"
    return Problem(file, line, column, path, message, code, severity=kw.pop("severity", sev), **kw)


# ---------------------------------------------------------------------------------------------
# schema problems -> teaching messages

_TYPE_WORDS = {"array": "a list", "object": "a mapping", "string": "text", "integer": "a whole number",
               "number": "a number", "boolean": "true or false", "null": "nothing"}

# field name -> hint when the field is missing
_REQUIRED_HINTS = {
    "dimension": "every benefit and cost names the dimension it lands in (costs land elsewhere than benefits: that is the point)",
    "replaced_by": "a deprecated entry stays so its id keeps resolving; name its successor: replaced_by: <id>",
    "url": "every reference needs a link a reviewer can open",
    "sources": "every coupling cites where the interaction is documented",
    "references": "cite at least one paper, doc or source file",
    "costs": "every technique pays somewhere: name at least one cost and its dimension",
    "benefits": "name what improves and in which dimension",
    "coordinates": "coordinates place the technique: stages, layers, dimension",
    "values": "a parameter of type enum lists its allowed values",
    "from_dimension": "the dimension where the cause sits (usually this technique's benefit)",
    "to_dimension": "the dimension where the effect lands",
}
_MIN_ITEMS_HINTS = {
    "costs": "every technique pays somewhere: name at least one cost and the dimension it lands in",
    "benefits": "name at least one benefit and its dimension",
    "references": "cite at least one source",
    "sources": "cite at least one source for the coupling",
    "stages": "name at least one stage",
    "layers": "name one layer, or a [from, to] span",
}


def _valid_values(schema: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(schema, dict):
        return ()
    if "oneOf" in schema and all(isinstance(s, dict) and "const" in s for s in schema["oneOf"]):
        return tuple((str(s["const"]), s.get("description", "")) for s in schema["oneOf"])
    if "enum" in schema:
        return tuple((str(v), "") for v in schema["enum"])
    return ()


def _type_word(v: Any) -> str:
    if v is None:
        return "nothing (an empty value)"
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, int):
        return "a whole number"
    if isinstance(v, float):
        return "a number"
    return "text"


def _near(word: Any, options: Iterable[str]) -> list[str]:
    from difflib import get_close_matches
    opts = list(options)
    w = str(word)
    exact = [o for o in opts if o.lower() == w.lower()]
    return exact or get_close_matches(w, opts, n=3, cutoff=0.6)


def _did_you_mean(word: Any, options: Iterable[str]) -> str:
    near = _near(word, options)
    return f"did you mean {' or '.join(repr(n) for n in near)}?" if near else ""


def _field_name(path: tuple) -> str:
    for p in reversed(path):
        if isinstance(p, str):
            return p
    return ""


def _schema_problems(doc: YamlDoc, validator: jsonschema.protocols.Validator) -> list[Problem]:
    """Turn JSON Schema errors into Problems that name the field, what was found, the valid values and a fix."""
    out: list[Problem] = []
    for err in validator.iter_errors(doc.data):
        out.extend(_teach(err, doc, validator.schema))
    return out


def _teach(err: Any, doc: YamlDoc, root_schema: dict[str, Any]) -> list[Problem]:
    path = tuple(err.absolute_path)
    fpath = _fmt_path(path)
    line, col = doc.where(path)
    schema = err.schema if isinstance(err.schema, dict) else {}
    field_name = _field_name(path)
    v = err.validator

    if v == "additionalProperties" and isinstance(err.instance, dict):
        props = schema.get("properties", {})
        extra = sorted(set(err.instance) - set(props), key=str)
        allowed = tuple((k, str(props[k].get("description", ""))) for k in sorted(props))
        out = []
        for key in extra:
            kl, kc = doc.where(path + (key,))
            dym = _did_you_mean(key, props)
            out.append(problem(doc.path, kl, kc, _fmt_path(path + (key,)), f"unknown field '{key}'", "schema-unknown-field",
                               found=key, expected="one of the fields listed below",
                               hint=dym or "remove it; the schema allows no other fields here", valid_values=allowed))
        return out

    if v == "required" and isinstance(err.instance, dict):
        props = schema.get("properties", {})
        missing = [k for k in err.validator_value if k not in err.instance]
        parent = _then_parent(err, root_schema)
        cond = [k for k in parent.get("if", {}).get("properties", {}) if k in err.instance]
        if cond:  # a conditional requirement (if/then): point at the field that triggered it
            line, col = doc.where(path + (cond[0],))
            props = parent.get("properties", {}) or props
        out = []
        for key in missing:
            sub = props.get(key, {})
            where = f"under {fpath}" if fpath else "at the top level"
            hint = _REQUIRED_HINTS.get(key, f"add `{key}:` {where}")
            out.append(problem(doc.path, line, col, _fmt_path(path + (key,)), f"missing required field '{key}'",
                               "schema-required", found=None, expected=str(sub.get("description", "")),
                               hint=hint, valid_values=_valid_values(sub)))
        return out

    vv = _valid_values(schema)
    if v in ("oneOf", "enum") and vv:
        values = [x for x, _ in vv]
        what = field_name.replace("_", " ") or "value"
        if isinstance(path[-1] if path else None, int) and len(path) >= 2:
            what = str(path[-2]).rstrip("s").replace("_", " ") or what
        dym = _did_you_mean(err.instance, values)
        return [problem(doc.path, line, col, fpath, f"{err.instance!r} is not a valid {what}", "schema-enum",
                        found=_short(err.instance), expected=str(schema.get("description", "")),
                        hint=dym or "choose one of the listed values", valid_values=vv)]

    if v == "oneOf" and schema.get("oneOf") and all("required" in s for s in schema["oneOf"]):
        keys = [s["required"][0] for s in schema["oneOf"]]
        present = [k for k in keys if isinstance(err.instance, dict) and k in err.instance]
        if present:
            msg = f"names both {' and '.join(present)}; a coupling points at one of them"
            hint = "split it into two couplings, one to the technique and one to the property"
        else:
            msg = f"needs one of: {', '.join(keys)}"
            hint = "target: <technique id> for a technique, property: <id from catalog/properties.yaml> for a property"
        props = schema.get("properties", {})
        return [problem(doc.path, line, col, fpath, msg, "schema-coupling-end", found=present or None,
                        expected="exactly one of target, property", hint=hint,
                        valid_values=tuple((k, str(props.get(k, {}).get("description", ""))) for k in keys))]

    if v == "type":
        want = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        expected = " or ".join(_TYPE_WORDS.get(w, w) for w in want)
        msg = f"{field_name or 'value'} must be {expected}, found {_type_word(err.instance)}"
        if err.instance is None:
            hint = "the field is empty: fill it in or remove the line"
        elif "array" in want and not isinstance(err.instance, (list, dict)):
            hint = f"write it as a list: {field_name}: [{err.instance}]"
        elif "object" in want:
            hint = "write it as `key: value` lines indented under the field"
        else:
            hint = f"write {expected}"
        return [problem(doc.path, line, col, fpath, msg, "schema-type", found=_short(err.instance),
                        expected=expected, hint=hint, valid_values=vv)]

    if v == "pattern":
        pat = err.validator_value
        if pat.startswith("^https?"):
            msg, hint = "a URL must start with http:// or https://", "paste the full link, e.g. https://arxiv.org/abs/..."
        elif field_name in ("id", "target") or "a-z0-9][a-z0-9-]" in pat:
            msg, hint = f"{field_name or 'value'} uses only lower-case letters, digits and dashes", \
                f"e.g. {_slug(err.instance)}"
        elif "[a-z0-9_]" in pat:
            msg, hint = f"{field_name or 'value'} uses only lower-case letters, digits and underscores (snake_case)", \
                f"e.g. {_slug(err.instance).replace('-', '_')}"
        else:
            msg, hint = f"{field_name or 'value'} does not match the pattern {pat}", ""
        return [problem(doc.path, line, col, fpath, msg, "schema-format", found=_short(err.instance),
                        expected=f"text matching {pat}", hint=hint)]

    if v in ("minLength", "maxLength"):
        n = len(err.instance) if isinstance(err.instance, str) else 0
        if v == "minLength":
            msg = f"{field_name} is too short ({n} characters; at least {err.validator_value})"
            hint = "one full sentence in your own words" if field_name in ("summary", "mechanism") else "write it out"
        else:
            msg = f"{field_name} is too long ({n} characters; at most {err.validator_value})"
            hint = "use a shorter form"
        return [problem(doc.path, line, col, fpath, msg, "schema-format", found=_short(err.instance),
                        expected=str(schema.get("description", "")), hint=hint)]

    if v in ("minItems", "maxItems"):
        n = len(err.instance) if isinstance(err.instance, list) else 0
        if v == "minItems":
            msg = f"{field_name} needs at least {err.validator_value} item(s), found {n}"
            hint = _MIN_ITEMS_HINTS.get(field_name, "add an item")
        else:
            msg = f"{field_name} has {n} items; at most {err.validator_value}"
            hint = "one layer [L4], or a span [from, to] such as [L4, L5]" if field_name == "layers" else "remove items"
        return [problem(doc.path, line, col, fpath, msg, "schema-format", found=_short(err.instance),
                        expected=str(schema.get("description", "")), hint=hint)]

    if v == "uniqueItems":
        seen, dup = set(), None
        for x in err.instance if isinstance(err.instance, list) else []:
            k = repr(x)
            if k in seen:
                dup = x
                break
            seen.add(k)
        return [problem(doc.path, line, col, fpath, f"{field_name} lists {dup!r} twice", "schema-format",
                        found=_short(err.instance), hint="remove the repeated value")]

    msg = err.message if len(err.message) < 200 else err.message[:197] + "..."
    return [problem(doc.path, line, col, fpath, msg, "schema", found=_short(err.instance),
                    expected=str(schema.get("description", "")), valid_values=vv)]


def _then_parent(err: Any, root_schema: dict[str, Any]) -> dict[str, Any]:
    """For an error raised inside a ``then`` clause: the schema holding that if/then (else {})."""
    sp = list(err.schema_path)
    if "then" not in sp:
        return {}
    node: Any = root_schema
    try:
        for part in sp[: len(sp) - 1 - sp[::-1].index("then")]:
            node = node[part]
    except (KeyError, IndexError, TypeError):
        return {}
    return node if isinstance(node, dict) else {}


def _slug(v: Any) -> str:
    import re
    s = re.sub(r"[^a-z0-9]+", "-", str(v).lower()).strip("-")
    return s or "my-technique"


def _placeholders(doc: YamlDoc) -> list[Problem]:
    """Values still holding the TODO markers ``optkg new`` writes."""
    out: list[Problem] = []

    def walk(x: Any, path: tuple) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, path + (k,))
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, path + (i,))
        elif isinstance(x, str) and "TODO" in x:
            line, col = doc.where(path)
            out.append(problem(doc.path, line, col, _fmt_path(path), f"{_field_name(path) or 'value'} still holds a template placeholder",
                               "placeholder", found=_short(x), hint="replace the TODO text with the real value"))

    walk(doc.data, ())
    return out


def _duplicate_key_problems(doc: YamlDoc) -> list[Problem]:
    """``_duplicate_keys`` from the repeats ``load_yaml`` already recorded (no second parse of the file)."""
    return [problem(doc.path, line, col, _fmt_path(path),
                    f"key '{path[-1]}' appears twice in this mapping (first on line {first})", "duplicate-key",
                    found=path[-1], hint="YAML keeps only the last one; merge the two into one")
            for path, line, col, first in doc.duplicate_keys]


def _duplicate_keys(text: str, name: str) -> list[Problem]:
    """Keys that appear twice in one mapping (YAML would silently keep the last)."""
    import yaml
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        node = yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        return []  # the loader reports it
    out: list[Problem] = []
    stack = [(node, ())]
    seen_nodes: set[int] = set()
    while stack:
        n, path = stack.pop()
        if n is None or id(n) in seen_nodes:
            continue
        seen_nodes.add(id(n))
        if isinstance(n, yaml.MappingNode):
            first: dict[str, Any] = {}
            for k, v in n.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                if key in first:
                    out.append(problem(name, k.start_mark.line + 1, k.start_mark.column + 1, _fmt_path(path + (key,)),
                                       f"key '{key}' appears twice in this mapping (first on line {first[key].start_mark.line + 1})",
                                       "duplicate-key", found=key,
                                       hint="YAML keeps only the last one; merge the two into one"))
                else:
                    first[key] = k
                stack.append((v, path + (key,)))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                stack.append((v, path + (i,)))
    return out


def _short(v: Any) -> Any:
    s = repr(v)
    return v if len(s) <= 80 else s[:77] + "..."


def _fmt_path(path: Iterable[Any]) -> str:
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s


# ---------------------------------------------------------------------------------------------

def _load_hardware(folder: Path, problems: list[Problem]) -> dict[str, dict[str, Any]]:
    hw: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return hw
    for f in sorted(folder.glob("*.yaml")):
        try:
            d = load_yaml(f).data
        except OptkgError as e:
            problems.append(_yaml_problem(str(f), str(e)))
            continue
        if not isinstance(d, dict) or "id" not in d:
            problems.append(problem(str(f), 1, 1, "id", "hardware file needs a mapping with an id", "hardware"))
            continue
        if not d.get("sources"):
            problems.append(problem(str(f), 1, 1, "sources", "hardware facts need at least one source", "hardware",
                                    hint="add sources: [{title: ..., url: https://...}] (the vendor datasheet)"))
        hw[d["id"]] = d
    return hw


def _load_properties(path: Path, problems: list[Problem]) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    try:
        doc = load_yaml(path)
    except OptkgError as e:
        problems.append(_yaml_problem(str(path), str(e)))
        return {}
    d = doc.data if isinstance(doc.data, dict) else {}
    out: dict[str, dict[str, Any]] = {}
    for i, p in enumerate(_list(d.get("properties"))):
        line, col = doc.where(("properties", i))
        if not isinstance(p, dict) or not isinstance(p.get("id"), str):
            problems.append(problem(str(path), line, col, f"properties[{i}]", "property needs an id", "properties",
                                    hint="each property is a mapping with id, kind, name, dimension, description"))
            continue
        if p["id"] in out:
            first, _ = doc.where(("properties", out[p["id"]]["__index"]))
            problems.append(problem(str(path), line, col, f"properties[{i}].id",
                                    f"property id '{p['id']}' is declared twice (first on line {first})", "properties",
                                    found=p["id"], hint="merge the two entries; the second would silently replace the first"))
            continue
        out[p["id"]] = {**p, "__index": i}
    for p in out.values():
        del p["__index"]
    return out


def _file_digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    h.update(f"optkg-catalog-{CACHE_VERSION}".encode())
    h.update(Path(__file__).read_bytes())  # a changed Catalog shape or check never meets an old pickle
    for f in files:
        h.update(str(f).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _cache_path(root: Path, digest: str) -> Path:
    from kg.core import cache
    return cache.cache_file(f"catalog-{digest[:32]}.pickle")


def load_catalog(root: Path | None = None, *, only: list[Path] | None = None,
                 use_cache: bool = True, extra: list[Path] | None = None) -> tuple[Catalog, list[Problem]]:
    """Load and validate the catalog at ``root`` (default: the bundled/checkout catalog).

    ``only``: report problems only for these files (cross-file checks still see the whole
    catalog). ``extra``: technique files outside ``<root>/techniques`` to load as if they were in it
    (``optkg place`` on a draft). Returns (catalog, problems): ``problems`` holds the errors (empty
    for a usable catalog); warnings (severity ``warning``, see ``CHECKS``) are in
    ``catalog.warnings``. A clean catalog is cached, keyed on the bytes of every file, in
    ``$OPTKG_CACHE_DIR`` (default ``~/.cache/optkg``) so an unchanged catalog is not re-parsed.
    Raises OptkgError when the folder or its axes file is missing.
    """
    root = Path(root) if root else paths.catalog_dir()
    if not (root / "axes.yaml").is_file():
        raise OptkgError(f"{root}: not a catalog folder (no axes.yaml)")
    tech_files = sorted((root / "techniques").glob("*.yaml"))
    if extra:
        have = {f.resolve() for f in tech_files}
        tech_files += [Path(f) for f in extra if Path(f).resolve() not in have]
    other = [root / "axes.yaml", root / "properties.yaml"] + sorted((root / "hardware").glob("*.yaml"))
    all_files = [f for f in other if f.is_file()] + tech_files
    digest = _file_digest(all_files)
    cache = _cache_path(root, digest)
    if use_cache and only is None and not extra:
        from kg.core import cache as _cache
        cached = _cache.read(cache, Catalog)
        if cached is not None:
            cached.root = root
            return cached, []

    axes = load_axes(root / "axes.yaml")
    problems: list[Problem] = []
    properties = _load_properties(root / "properties.yaml", problems)
    hardware = _load_hardware(root / "hardware", problems)
    import jsonschema  # here: a cached catalog needs no validator (startup time is benchmarked)

    schema = technique_schema(axes)
    validator = jsonschema.Draft202012Validator(schema)
    fast = _fast_validator(schema, len(tech_files))  # same verdict, much faster; messages come from `validator`

    docs: dict[str, YamlDoc] = {}
    techniques: dict[str, dict[str, Any]] = {}
    files: dict[str, str] = {}
    for f in tech_files:
        try:
            doc = load_yaml(f)
        except OptkgError as e:
            problems.append(_yaml_problem(str(f), str(e)))
            continue
        problems.extend(_duplicate_key_problems(doc))
        if not isinstance(doc.data, dict):
            problems.append(problem(str(f), 1, 1, "", "a technique file must be a YAML mapping (id: ..., name: ..., ...)",
                                    "schema-type", found=_type_word(doc.data), expected="a mapping",
                                    hint="start from `optkg new <id>`"))
            continue
        sp = [] if fast(doc.data) else _schema_problems(doc, validator)
        problems.extend(sp)
        flagged = {p.path for p in sp}
        problems.extend(p for p in _placeholders(doc) if p.path not in flagged)
        tid = doc.data.get("id")
        if not isinstance(tid, str):
            continue
        if tid != f.stem:
            line, col = doc.where(("id",))
            problems.append(problem(str(f), line, col, "id", f"id '{tid}' does not match the file name '{f.name}'", "id-filename",
                                    found=tid, expected=f.stem, hint=f"rename the file to {tid}.yaml or set id: {f.stem}"))
        if tid in techniques:
            line, col = doc.where(("id",))
            problems.append(problem(str(f), line, col, "id", f"duplicate id '{tid}' (also in {files[tid]})",
                                    "duplicate-id", found=tid, hint="ids are unique and never reused; pick a new id"))
            continue
        techniques[tid] = doc.data
        docs[tid] = doc
        files[tid] = str(f)

    problems.extend(_cross_checks(techniques, docs, properties, hardware))
    problems.extend(_condition_problems(techniques, docs, properties))
    aliases = {}
    ids_lower = {x.lower() for x in techniques}  # once, not per alias (quadratic at 10k entries)
    for tid, t in techniques.items():
        for a in _list(t.get("aliases")):
            if isinstance(a, str) and a.lower() not in ids_lower:
                aliases.setdefault(a.lower(), tid)
    if only is not None:
        keep = {str(Path(p)) for p in only} | {str(Path(p).resolve()) for p in only}
        problems = [p for p in problems if p.file in keep or str(Path(p.file).resolve()) in keep]
    problems.sort(key=lambda p: (p.file, p.line, p.column, p.code))
    warnings = [p for p in problems if p.severity != "error"]
    errors = [p for p in problems if p.severity == "error"]
    cat = Catalog(root, axes, techniques, properties, hardware, aliases, files, warnings)
    if not errors and only is None and not extra and use_cache:
        from kg.core import cache as _cache
        _cache.write(cache, cat)  # an unwritable cache folder only costs speed
    return cat, errors


FASTJSONSCHEMA_FROM = 300  # technique files; below this, compiling (~0.15 s) costs more than it saves


def _fast_validator(schema: dict[str, Any], n_files: int) -> Any:
    """A yes/no check of a technique document against ``schema`` (its ``_enum_schema`` form).

    For large catalogs the schema is compiled to Python code once with fastjsonschema (~0.2 ms per
    entry instead of ~0.8 ms with jsonschema); otherwise, or without fastjsonschema, jsonschema.
    Any failure of the compiled code counts as "invalid", so the authoritative jsonschema pass
    (``_schema_problems``) decides and explains.
    """
    import jsonschema
    enum = _enum_schema(schema)
    if n_files >= FASTJSONSCHEMA_FROM:
        try:
            import fastjsonschema
            compiled = fastjsonschema.compile(enum)
        except Exception:  # missing or unable to compile: the jsonschema path below is always right
            compiled = None
        if compiled is not None:
            def ok(doc: Any) -> bool:
                try:
                    compiled(doc)
                    return True
                except Exception:
                    return False
            return ok
    return jsonschema.Draft202012Validator(enum).is_valid


def _enum_schema(s: Any) -> Any:
    """``s`` with every ``oneOf`` of ``const`` values (the described enums) written as a plain ``enum``.

    Equivalent for validation (the consts are distinct, so exactly-one equals any-of) and much
    cheaper in jsonschema, which builds an error per failed ``oneOf`` branch. Used only for the
    yes/no check; problems are reported from the original schema, which keeps the descriptions.
    """
    if isinstance(s, dict):
        one = s.get("oneOf")
        if isinstance(one, list) and one and all(isinstance(x, dict) and set(x) <= {"const", "description"}
                                                 and "const" in x for x in one):
            s = {k: v for k, v in s.items() if k != "oneOf"}
            s["enum"] = [x["const"] for x in one]
        return {k: _enum_schema(v) for k, v in s.items()}
    if isinstance(s, list):
        return [_enum_schema(x) for x in s]
    return s


def _read(f: Path) -> str:
    try:
        return f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _yaml_problem(file: str, msg: str) -> Problem:
    """A Problem from a yamlio OptkgError message 'file:line:col: YAML error: ...'."""
    rest = msg[len(file) + 1:] if msg.startswith(file + ":") else msg
    parts = rest.split(":", 2)
    line = int(parts[0]) if parts and parts[0].strip().isdigit() else 1
    col = int(parts[1]) if len(parts) > 1 and parts[1].strip().isdigit() else 1
    text = rest.split(": ", 1)[-1] if ": " in rest else rest
    src = _read(Path(file)).splitlines()
    bad_line = src[line - 1] if 0 < line <= len(src) else ""
    if "not valid UTF-8" in text or "special characters are not allowed" in text or "\x00" in bad_line:
        hint = "this is not a UTF-8 text file (binary?): a technique file is YAML text; start from `optkg new <id>`"
    elif "\t" in bad_line[: len(bad_line) - len(bad_line.lstrip())] or "tab" in text.lower():
        hint = "YAML indents with spaces, not tabs: replace the tab at the start of this line"
    else:
        hint = "check indentation and quoting around this line (a value containing ': ' needs quotes)"
    return problem(file, line, col, "", text.strip(), "yaml", hint=hint)


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


_CONTRADICTS = {("requires", "conflicts_with"), ("conflicts_with", "requires"),
                ("mitigates", "amplifies"), ("amplifies", "mitigates"), ("replaces", "replaces")}


def _cross_checks(techniques: dict[str, dict[str, Any]], docs: dict[str, YamlDoc],
                  properties: dict[str, Any], hardware: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    alias_owner: dict[str, str] = {}
    ids_lower = {t.lower(): t for t in techniques}
    # names and aliases shared by several entries are reported on every one of them, so that
    # validating only the changed file still shows the clash
    name_users: dict[str, list[str]] = {}
    alias_users: dict[str, list[str]] = {}
    for tid, t in sorted(techniques.items()):
        if isinstance(t.get("name"), str) and t["name"].strip():
            name_users.setdefault(t["name"].strip().lower(), []).append(tid)
        for a in dict.fromkeys(x.lower() for x in _list(t.get("aliases")) if isinstance(x, str)):
            alias_users.setdefault(a, []).append(tid)
    for tid, t in sorted(techniques.items()):
        doc = docs[tid]
        if isinstance(t.get("name"), str) and t["name"].strip():
            others = [o for o in name_users[t["name"].strip().lower()] if o != tid]
            if others:
                line, col = doc.where(("name",))
                where = ", ".join(f"'{o}' ({docs[o].path})" for o in others)
                out.append(problem(doc.path, line, col, "name", f"name '{t['name']}' is also used by {where}",
                                   "duplicate-name", found=t["name"],
                                   hint=f"two entries with one name are one technique: merge them, or rename this one"))
        for i, a in enumerate(_list(t.get("aliases"))):
            if not isinstance(a, str):
                continue
            key = a.lower()
            line, col = doc.where(("aliases", i))
            others = [o for o in alias_users.get(key, []) if o != tid]
            if key in ids_lower and ids_lower[key] != tid:
                out.append(problem(doc.path, line, col, f"aliases[{i}]", f"alias '{a}' is the id of another technique",
                                   "alias-clash", found=a, hint=f"an alias must not shadow an id; remove it (or merge with '{ids_lower[key]}')"))
            elif others:
                where = ", ".join(f"'{o}' ({docs[o].path})" for o in others)
                out.append(problem(doc.path, line, col, f"aliases[{i}]", f"alias '{a}' is also an alias of {where}",
                                   "duplicate-alias", found=a,
                                   hint="aliases are unique across the catalog: one name resolves to one technique"))
            if key not in ids_lower:
                alias_owner.setdefault(key, tid)

    def resolve(name: str) -> str | None:
        if name in techniques:
            return name
        return alias_owner.get(name.lower()) or ids_lower.get(name.lower())

    for tid, t in sorted(techniques.items()):
        doc = docs[tid]
        rb = t.get("replaced_by")
        if isinstance(rb, str):
            line, col = doc.where(("replaced_by",))
            if t.get("status") != "deprecated":
                out.append(problem(doc.path, line, col, "replaced_by", "replaced_by is set but status is not deprecated",
                                   "replaced-by-not-deprecated", found=rb,
                                   hint="set status: deprecated (the entry stays so its id resolves), or remove replaced_by"))
            target = resolve(rb)
            if target is None:
                near = _near(rb, techniques)
                out.append(problem(doc.path, line, col, "replaced_by", f"replaced_by '{rb}' is not a technique id",
                                   "dangling-replaced-by", found=rb, expected="the id of the technique that supersedes this one",
                                   hint=("did you mean " + " or ".join(repr(n) for n in near) + "?") if near else
                                   "add the successor first, or fix the id"))
            elif target == tid:
                out.append(problem(doc.path, line, col, "replaced_by", "an entry cannot be replaced by itself",
                                   "dangling-replaced-by", found=rb))
            elif techniques[target].get("status") == "deprecated":
                out.append(problem(doc.path, line, col, "replaced_by", f"replaced_by '{rb}' is itself deprecated",
                                   "replaced-by-deprecated", found=rb,
                                   hint=f"point at '{techniques[target].get('replaced_by') or '?'}' instead"))
        for i, c in enumerate(_list(t.get("couplings"))):
            if not isinstance(c, dict):
                continue
            tgt = c.get("target")
            if isinstance(tgt, str):
                line, col = doc.where(("couplings", i, "target"))
                rid = resolve(tgt)
                if rid == tid:
                    out.append(problem(doc.path, line, col, f"couplings[{i}].target", "a technique cannot couple with itself",
                                       "self-coupling", found=tgt,
                                       hint="couple with the other technique, or with a property (property: <id>) the effect goes through"))
                elif rid is None:
                    near = _near(tgt, list(techniques) + sorted(alias_owner))
                    out.append(problem(doc.path, line, col, f"couplings[{i}].target", f"coupling target '{tgt}' does not exist",
                                       "dangling-target", found=tgt, expected="an existing technique id or alias",
                                       hint=("did you mean " + " or ".join(repr(n) for n in near) + "?") if near else
                                       "add the technique first (optkg new <id>), or fix the id"))
                else:
                    if rid != tgt:
                        out.append(problem(doc.path, line, col, f"couplings[{i}].target",
                                           f"'{tgt}' is an old id or alias of '{rid}'; it still resolves", "alias-reference",
                                           found=tgt, expected=rid, hint=f"write target: {rid}"))
                    if techniques[rid].get("status") == "deprecated" and rid != tid:
                        succ = techniques[rid].get("replaced_by")
                        out.append(problem(doc.path, line, col, f"couplings[{i}].target", f"'{rid}' is deprecated",
                                           "deprecated-target", found=tgt, expected=succ or "",
                                           hint=f"couple with its replacement '{succ}'" if succ else "couple with its replacement"))
            prop = c.get("property")
            if isinstance(prop, str) and prop not in properties:
                line, col = doc.where(("couplings", i, "property"))
                near = _near(prop, properties)
                out.append(problem(doc.path, line, col, f"couplings[{i}].property", f"property '{prop}' is not in properties.yaml",
                                   "dangling-property", found=prop,
                                   hint=("did you mean " + " or ".join(repr(n) for n in near) + "?") if near else
                                   "add it to catalog/properties.yaml with a description",
                                   valid_values=tuple((p, str(properties[p].get("description", ""))) for p in near)))
    # a coupling and its reverse (or two couplings on one pair) must not contradict each other
    kinds: dict[tuple[str, str], list[tuple[Any, int, bool]]] = {}
    for tid, t in techniques.items():
        for i, c in enumerate(_list(t.get("couplings"))):
            if isinstance(c, dict) and isinstance(c.get("target"), str):
                tgt = resolve(c["target"])
                if tgt is None or tgt == tid:
                    continue
                kinds.setdefault((tid, tgt), []).append((c.get("kind"), i, bool(c.get("condition"))))
    for (a, b), ks in sorted(kinds.items()):
        doc = docs[a]
        for k1, i, cond1 in ks:
            if cond1:
                continue
            for k2, j, cond2 in kinds.get((b, a), []):
                if (k1, k2) in _CONTRADICTS and not cond2:
                    line, col = doc.where(("couplings", i, "kind"))
                    ol, _ = docs[b].where(("couplings", j, "kind"))
                    out.append(problem(doc.path, line, col, f"couplings[{i}].kind",
                                       f"'{a}' {k1} '{b}' but '{b}' {k2} '{a}' ({docs[b].path}:{ol})", "contradicting-couplings",
                                       found=k1, hint="add a condition that separates the two cases, or fix one side"))
            for k2, j, cond2 in ks:
                if j > i and not cond2 and {k1, k2} == {"requires", "conflicts_with"}:
                    line, col = doc.where(("couplings", j, "kind"))
                    out.append(problem(doc.path, line, col, f"couplings[{j}].kind",
                                       f"'{a}' both requires and conflicts with '{b}' (couplings[{i}] and couplings[{j}])",
                                       "contradicting-couplings", found=k2,
                                       hint="add a condition that separates the two cases, or remove one"))
    return out


def _known_fact_names(techniques: dict[str, dict[str, Any]], properties: dict[str, Any]) -> set[str]:
    """Names a coupling condition may read: technique parameter names, property ids, stack settings
    (kg.inputs.stack.BASE_SETTINGS, PARALLEL_DEFAULTS), ModelFacts fields and properties and every name the rules read."""
    import dataclasses
    from kg.engine.expr import ExprError, names_in
    from kg.inputs.modelcfg import ModelFacts
    from kg.inputs.stack import BASE_SETTINGS, PARALLEL_DEFAULTS  # lazy: kg.inputs.stack imports this module

    known: set[str] = set(properties) | set(BASE_SETTINGS) | set(PARALLEL_DEFAULTS)
    known |= {f.name for f in dataclasses.fields(ModelFacts)}
    known |= {n for n, v in vars(ModelFacts).items() if isinstance(v, property)}  # is_moe, is_mla, ...
    for t in techniques.values():
        for prm in _list(t.get("parameters")):
            if isinstance(prm, dict) and isinstance(prm.get("name"), str):
                known.add(prm["name"])
    for f in sorted(paths.rules_dir().glob("*.yaml")):
        try:
            data = load_yaml(f).data
        except OptkgError:
            continue
        for r in _list(data.get("rules") if isinstance(data, dict) else None):
            if not isinstance(r, dict):
                continue
            texts = [r.get("condition")] + list((r.get("numbers") or {}).values() if isinstance(r.get("numbers"), dict) else [])
            texts += [b.get("when") for b in _list(r.get("severity_bands")) if isinstance(b, dict)]
            if isinstance(r.get("numbers"), dict):
                known |= {k for k in r["numbers"] if isinstance(k, str)}
            for text in texts:
                if isinstance(text, str) and text.strip():
                    with contextlib.suppress(ExprError):  # a broken rule expression is reported by its own check
                        known |= names_in(text)
    return known


def _typo_distance(a: str, b: str) -> int:
    """Characters inserted, deleted or replaced to turn ``a`` into ``b`` (difflib opcodes).

    A typo is 1-2 characters ('tp_sizee' -> 'tp_size' is 1); a different fact usually differs
    by a whole word ('max_power_limit_watts' vs 'power_limit_watts' is 4), so it is not flagged."""
    from difflib import SequenceMatcher
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b).get_opcodes() if op != "equal")


def _condition_problems(techniques: dict[str, dict[str, Any]], docs: dict[str, YamlDoc],
                        properties: dict[str, Any]) -> list[Problem]:
    """Every coupling ``condition`` parses (error ``coupling-condition``); a name it reads that is
    unknown but close to a known fact name is reported (warning ``coupling-unknown-fact``)."""
    from difflib import get_close_matches
    from kg.engine.expr import ExprError, compile_expr, names_in

    out: list[Problem] = []
    known: set[str] | None = None
    for tid, t in sorted(techniques.items()):
        doc = docs[tid]
        for i, c in enumerate(_list(t.get("couplings"))):
            if not isinstance(c, dict) or c.get("condition") is None:
                continue
            text = c["condition"]
            where = f"couplings[{i}].condition"
            line, col = doc.where(("couplings", i, "condition"))
            if not isinstance(text, str):
                continue  # the schema reports the type
            try:
                compile_expr(text, ("has",))
            except ExprError as e:
                out.append(problem(doc.path, line, col, where, f"condition {text!r} does not parse: {e}",
                                   "coupling-condition", found=text,
                                   expected="an expression such as: tp_size > 1 and kv_cache_dtype == 'fp8'",
                                   hint="conditions use the rule expression language (kg/engine/expr.py): names, numbers, "
                                        "and/or/not, comparisons, arithmetic"))
                continue
            if known is None:
                known = _known_fact_names(techniques, properties)
                known_sorted = sorted(known)
                typo_of: dict[str, list[str]] = {}  # unknown name -> close known names (difflib is slow: once per name)
            for name in sorted(names_in(text) - known):
                if name not in typo_of:
                    typo_of[name] = [k for k in get_close_matches(name, known_sorted, n=5, cutoff=0.6)
                                     if _typo_distance(name, k) <= 2]
                near = typo_of[name]
                if near:
                    out.append(problem(doc.path, line, col, where, f"unknown fact '{name}' (did you mean '{near[0]}'?)",
                                       "coupling-unknown-fact", found=name, expected=near[0],
                                       hint=f"write {near[0]}"))
    return out
