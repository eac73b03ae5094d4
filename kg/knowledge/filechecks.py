"""Checks of one catalog file: JSON Schema errors turned into teaching problems (valid values, did you
mean, hints), duplicate YAML keys, template placeholders, YAML errors, and the fast yes/no schema
pre-check (fastjsonschema for large catalogs).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from kg.core.errors import Problem
from kg.core.yamlio import YamlDoc
from kg.knowledge.checks import problem


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
    _walk_placeholders(doc, doc.data, (), out)
    return out


def _walk_placeholders(doc: YamlDoc, x: Any, path: tuple, out: list[Problem]) -> None:
    # a module function, not a closure calling itself: that closure was a reference cycle holding the document (its
    # data and line map) until the cyclic collector's next full pass (~370,000 objects at 10,000 techniques)
    if isinstance(x, dict):
        for k, v in x.items():
            _walk_placeholders(doc, v, path + (k,), out)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _walk_placeholders(doc, v, path + (i,), out)
    elif isinstance(x, str) and "TODO" in x:
        line, col = doc.where(path)
        out.append(problem(doc.path, line, col, _fmt_path(path), f"{_field_name(path) or 'value'} still holds a template placeholder",
                           "placeholder", found=_short(x), hint="replace the TODO text with the real value"))


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
    line = int(parts[0]) if parts and parts[0].strip().isascii() and parts[0].strip().isdigit() else 1
    col = int(parts[1]) if len(parts) > 1 and parts[1].strip().isascii() and parts[1].strip().isdigit() else 1
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
