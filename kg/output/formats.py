"""CI output formats for ``validate``, ``check`` and ``place`` reports: SARIF 2.1.0, GitHub annotations, markdown.

``render(fmt, kind, d)`` takes the versioned report dict a command builds (``kind`` is
``validate``, ``check`` or ``place``; the dicts are the ones ``--format json`` prints) and returns
text. Nothing here reaches back into the catalog or the engine: each report is first turned into
a flat list of ``Result`` (rule id, level, message, file, line, column) plus rule metadata, and the
three writers only format those.

- ``sarif``: a SARIF 2.1.0 log (OASIS standard; the schema is vendored in
  tests/fixtures/sarif-schema-2.1.0.json and every output is validated against it in the tests).
  Rule metadata (short and full description, help, tags, default level, help URI) goes in
  ``tool.driver.rules``; results carry repository-relative locations (``uriBaseId`` ``SRCROOT``) so
  code scanning shows them on the pull request's lines, and ``partialFingerprints`` so a result
  keeps its identity when lines move.
- ``github``: workflow commands (``::error file=...,line=...,col=...,title=...::message``) that
  GitHub Actions turns into annotations on the changed lines.
- ``markdown``: a pull-request comment (tables plus details), starting with a hidden marker
  ``<!-- optkg:<kind> -->`` so a workflow can update its previous comment instead of adding one.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from kg.core.errors import OptkgError
from kg.core.numfmt import REPORT, fmt_num
from kg.output.mdtext import md_cell as _md

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
KINDS = ("validate", "check", "place")
FORMATS = ("sarif", "github", "markdown")

# our severities (plain and banded) -> SARIF result levels
_LEVEL = {"error": "error", "critical": "error", "severe": "error", "warning": "warning", "moderate": "warning",
          "low": "note", "info": "note", "none": "none"}
# SARIF level -> GitHub workflow command
_GH_CMD = {"error": "error", "warning": "warning", "note": "notice", "none": "notice"}


@dataclass
class RuleMeta:
    """SARIF reportingDescriptor input: one rule or check."""

    id: str
    title: str
    description: str = ""
    help_text: str = ""
    help_uri: str | None = None
    tags: list[str] = field(default_factory=list)
    severity: str = "warning"


@dataclass
class Result:
    """One thing to report at one place."""

    rule_id: str
    severity: str
    message: str
    file: str | None = None
    line: int = 0
    column: int = 0
    field_path: str = ""
    title: str = ""
    details: list[str] = field(default_factory=list)  # extra lines: found, expected, valid values, hint
    fingerprint: str = ""
    related: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, message)
    valid_values: list[tuple[str, str]] = field(default_factory=list)  # (value, description)

    @property
    def level(self) -> str:
        return _LEVEL.get(self.severity, "warning")


# ---------------------------------------------------------------------------------------------
# report dict -> results

def _validate_results(d: dict[str, Any]) -> tuple[list[Result], list[RuleMeta], str]:
    from kg.knowledge.checks import CHECKS
    rules = [RuleMeta(c.code, c.title, c.description, c.description, None, list(c.tags), c.severity)
             for c in CHECKS.values()]
    known = {c.code for c in CHECKS.values()}
    for p in d.get("problems", []):
        if p["code"] not in known:
            known.add(p["code"])
            rules.append(RuleMeta(p["code"], p["code"], "", "", None, list(p.get("tags", [])), p.get("severity", "error")))
    results = []
    for p in d.get("problems", []):
        details = []
        if p.get("found") is not None and p["code"] != "yaml":
            details.append(f"found: {p['found']!r}")
        if p.get("expected"):
            details.append(f"expected: {p['expected']}")
        if p.get("valid_values"):
            details.append("valid values: " + "; ".join(
                f"{v['value']} ({v['description']})" if v.get("description") else str(v["value"]) for v in p["valid_values"]))
        if p.get("hint"):
            details.append(f"hint: {p['hint']}")
        msg = f"{p['path']}: {p['message']}" if p.get("path") else p["message"]
        results.append(Result(p["code"], p.get("severity", "error"), msg, p["file"], p.get("line", 0), p.get("column", 0),
                              p.get("path", ""), f"{p['code']}: {p['path']}" if p.get("path") else p["code"], details,
                              p.get("fingerprint", ""), [],
                              [(str(v["value"]), v.get("description") or "") for v in p.get("valid_values") or []]))
    total = len(results)
    errors = sum(1 for r in results if r.level == "error")
    summary = (f"{total} problem(s) in {len({r.file for r in results})} file(s): {errors} error(s), {total - errors} warning(s)"
               if results else f"catalog OK: {d.get('techniques', 0)} techniques, no problems")
    return results, rules, summary


def _stack_lines(source: str | None) -> dict[str, tuple[int, int]]:
    """Where each technique (as written) and the model sit in a stack file: name -> (line, column)."""
    if not source or not Path(source).is_file():
        return {}
    from kg.core.yamlio import load_yaml
    try:
        doc = load_yaml(source)
    except OptkgError:
        return {}
    out: dict[str, tuple[int, int]] = {}
    data = doc.data if isinstance(doc.data, dict) else {}
    for key in ("model", "config", "techniques", "settings", "hardware", "engine"):
        if key in data:
            out[f"@{key}"] = doc.where((key,))
    techs = data.get("techniques")
    if isinstance(techs, list):
        for i, item in enumerate(techs):
            name = item if isinstance(item, str) else (next(iter(item)) if isinstance(item, dict) and item else None)
            if isinstance(name, str):
                out[name] = doc.where(("techniques", i))
    elif isinstance(techs, dict):
        for name in techs:
            out[str(name)] = doc.where(("techniques", name))
    return out


def _check_results(d: dict[str, Any]) -> tuple[list[Result], list[RuleMeta], str]:
    stack = d.get("stack") or {}
    source = stack.get("source")
    lines = _stack_lines(source)
    rules: dict[str, RuleMeta] = {}
    results = []
    for f in d.get("findings", []):
        srcs = f.get("sources") or []
        help_lines = [f.get("mechanism") or ""]
        if f.get("fix"):
            help_lines.append(f"Fix: {f['fix']}")
        help_lines += [f"Source: {s.get('title')} <{s.get('url')}>" for s in srcs]
        rules.setdefault(f["rule_id"], RuleMeta(f["rule_id"], f.get("title", f["rule_id"]), f.get("mechanism", ""),
                                                "\n".join(x for x in help_lines if x),
                                                srcs[0]["url"] if srcs else None, list(f.get("tags") or []), f["severity"]))
        where = None
        loc = f.get("location")  # file:line of the flag or key behind it (manifests, compose, LLM-API YAML)
        if isinstance(loc, str) and ":" in loc and loc.rsplit(":", 1)[1].isdigit():
            where = (int(loc.rsplit(":", 1)[1]), 1)
        for t in [] if where else f.get("techniques") or []:
            if t in lines:
                where = lines[t]
                break
        if where is None and lines:
            where = lines.get("@model") or lines.get("@config") or lines.get("@techniques") or (1, 1)
        details = []
        if f.get("numbers"):
            details.append("numbers: " + "; ".join(f"{k} = {fmt_num(v, REPORT)}" for k, v in f["numbers"].items()))
        if f.get("cost_dimension"):
            details.append(f"cost lands in: {f.get('from_dimension') + ' -> ' if f.get('from_dimension') else ''}{f['cost_dimension']}")
        if f.get("fix"):
            details.append(f"fix: {f['fix']}")
        rule_loc = (f.get("rule_file") or "", int(f.get("rule_line") or 0))
        related = [(rule_loc[0], rule_loc[1], f"rule {f['rule_id']}")] if rule_loc[0] else []
        if where is not None:
            r = Result(f["rule_id"], f["severity"], f["message"], source, where[0], where[1], "", f.get("title", ""),
                       details, f.get("fingerprint", ""), related)
        else:  # a pasted command has no file in the user's repository (the rule file is optkg's, not theirs):
            # no location; an input file optkg reads without line positions (DeepSpeed JSON, TOML) at its line 1
            own = source if source and not str(source).startswith("-") and os.path.isfile(str(source)) else None
            r = Result(f["rule_id"], f["severity"], f["message"], own, 1 if own else 0, 1 if own else 0, "",
                       f.get("title", ""), details + ([] if own else [f"stack: {source or stack.get('name')}"]),
                       f.get("fingerprint", ""), related)
        results.append(r)
    n = len(results)
    name = stack.get('name', 'stack')
    if d.get("outcomes"):  # fired / held / not evaluable: never "no findings" when rules could not run
        from kg.output.report import summary_line
        summary = f"{name}: {summary_line(d)}"
    else:
        summary = f"{name}: {n} finding(s)" if n else f"{name}: no findings"
    return results, list(rules.values()), summary


def _place_results(d: dict[str, Any]) -> tuple[list[Result], list[RuleMeta], str]:
    from kg.analyses.place import PLACE_RULES
    rules = [RuleMeta(k, v["title"], v["description"], v["description"], None, ["placement"], v["severity"])
             for k, v in PLACE_RULES.items()]
    results = [Result(i["rule_id"], i["severity"], i["message"], i.get("file"), i.get("line", 0), i.get("column", 0),
                      i.get("path", ""), i.get("title", ""), list(i.get("details") or []), i.get("fingerprint", ""))
               for i in d.get("items", [])]
    if d.get("problems"):
        v, vrules, _ = _validate_results({"problems": d["problems"]})
        results = v + results
        rules = vrules + rules
    t = d.get("technique") or {}
    summary = f"{t.get('id', '?')}: {d.get('verdict_text') or d.get('verdict') or 'not placed (fix the problems first)'}"
    return results, rules, summary


_ADAPTERS: dict[str, Callable[[dict[str, Any]], tuple[list[Result], list[RuleMeta], str]]] = {
    "validate": _validate_results, "check": _check_results, "place": _place_results,
}


# ---------------------------------------------------------------------------------------------
# writers

def _rel(path: str | None) -> tuple[str | None, bool]:
    """(URI, relative?) for a file: repository-relative (to the working directory) when inside it."""
    if not path:
        return None, False
    p = Path(path)
    if not p.is_absolute():
        return quote(p.as_posix()), True
    try:
        rel = os.path.relpath(p, Path.cwd())
    except ValueError:
        rel = ".."
    if not rel.startswith(".."):
        return quote(Path(rel).as_posix()), True
    return p.as_uri(), False


def _location(file: str | None, line: int, column: int) -> dict[str, Any] | None:
    uri, rel = _rel(file)
    if uri is None:
        return None
    art: dict[str, Any] = {"uri": uri}
    if rel:
        art["uriBaseId"] = "SRCROOT"
    phys: dict[str, Any] = {"artifactLocation": art}
    if line and line > 0:
        phys["region"] = {"startLine": int(line), **({"startColumn": int(column)} if column and column > 0 else {})}
    return {"physicalLocation": phys}


def to_sarif(kind: str, d: dict[str, Any]) -> dict[str, Any]:
    """The SARIF 2.1.0 log (a dict) for a report dict of ``kind``."""
    from kg.core.version import __version__
    results, rules, summary = _ADAPTERS[kind](d)
    index = {r.id: i for i, r in enumerate(rules)}
    descriptors = []
    for r in rules:
        desc: dict[str, Any] = {
            "id": r.id, "name": r.id,
            "shortDescription": {"text": r.title or r.id},
            "defaultConfiguration": {"level": _LEVEL.get(r.severity, "warning")},
            "properties": {"tags": sorted(set(r.tags) | {"optkg", kind}), "precision": "high"},
        }
        if r.description:
            desc["fullDescription"] = {"text": r.description}
        if r.help_text:
            desc["help"] = {"text": r.help_text}
        if r.help_uri:
            desc["helpUri"] = r.help_uri
        descriptors.append(desc)
    out_results = []
    for res in results:
        text = res.message + ("\n" + "\n".join(res.details) if res.details else "")
        item: dict[str, Any] = {"ruleId": res.rule_id, "ruleIndex": index[res.rule_id], "level": res.level,
                                "message": {"text": text}}
        loc = _location(res.file, res.line, res.column)
        if loc is None and res.related:  # a pasted command: code scanning keeps only located results, so the rule
            loc = _location(res.related[0][0], res.related[0][1], 1)  # that fired stands in (as before)
        if loc is not None:
            if res.field_path:
                loc["logicalLocations"] = [{"fullyQualifiedName": res.field_path, "kind": "member"}]
            item["locations"] = [loc]
        if res.fingerprint:
            item["partialFingerprints"] = {"optkgFingerprint/v1": res.fingerprint}
        related = []
        for i, (f, ln, msg) in enumerate(res.related):
            rl = _location(f, ln, 1)
            if rl is not None:
                rl["id"] = i
                rl["message"] = {"text": msg}
                related.append(rl)
        if related:
            item["relatedLocations"] = related
        out_results.append(item)
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {"name": "optkg", "version": __version__, "semanticVersion": __version__,
                                "rules": descriptors}},
            "automationDetails": {"id": f"optkg/{kind}/"},
            "originalUriBaseIds": {"SRCROOT": {"uri": Path.cwd().as_uri() + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": out_results,
            "properties": {"optkg": {"kind": kind, "schema_version": d.get("schema_version"), "summary": summary,
                                     **({"not_evaluable": [{"rule_id": u.get("rule_id"),
                                                            "missing": list(u.get("needs") or u.get("missing") or [])}
                                                           for u in d.get("not_evaluable") or []]}
                                        if kind == "check" else {})}},
        }],
    }


def _gh_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(s: str) -> str:
    return _gh_data(s).replace(":", "%3A").replace(",", "%2C")


def to_github(kind: str, d: dict[str, Any]) -> str:
    """GitHub Actions workflow commands: one annotation per result, then a notice with the summary."""
    results, _, summary = _ADAPTERS[kind](d)
    lines = []
    for r in results:
        props = []
        uri, rel = _rel(r.file)
        if r.file:
            from urllib.parse import unquote
            props.append(f"file={_gh_prop(unquote(uri) if rel else r.file)}")
            if r.line > 0:
                props.append(f"line={r.line}")
                if r.column > 0:
                    props.append(f"col={r.column}")
        props.append(f"title={_gh_prop(f'optkg {kind}: ' + (r.title or r.rule_id))}")
        body = f"{r.message} [{r.rule_id}]" + ("\n" + "\n".join(r.details) if r.details else "")
        lines.append(f"::{_GH_CMD[r.level]} {','.join(props)}::{_gh_data(body)}")
    lines.append(f"::notice title={_gh_prop(f'optkg {kind}')}::{_gh_data(summary)}")
    return "\n".join(lines) + "\n"


def _md_loc(r: Result) -> str:
    if not r.file:
        return ""
    uri, rel = _rel(r.file)
    from urllib.parse import unquote
    from kg.core.textsafe import one_line
    name = one_line(unquote(uri) if rel else r.file).replace("`", "'").replace("|", "\\|")  # a table cell, one line
    return f"`{name}:{r.line}:{r.column}`" if r.line else f"`{name}`"


def _md_not_evaluable(d: dict[str, Any]) -> list[str]:
    """The rules that could not be evaluated, with the facts each lacked (a collapsed list), or []."""
    unknown = d.get("not_evaluable") or []
    if not unknown:
        return []
    out = ["", f"<details><summary>{len(unknown)} rule(s) could not be evaluated</summary>", ""]
    for u in unknown:
        miss = ", ".join(u.get("needs") or u.get("missing") or []) or "a comparison of mismatched types"
        out.append(f"- `{_md(str(u.get('rule_id')))}`: missing {_md(miss)}")
    out += ["", "</details>"]
    return out


def to_markdown(kind: str, d: dict[str, Any]) -> str:
    """A pull-request comment."""
    results, _, summary = _ADAPTERS[kind](d)
    out = [f"<!-- optkg:{kind} -->"]
    if kind == "place":
        from kg.output.place_report import render_markdown
        out.append(render_markdown(d))
        return "\n".join(out).rstrip() + "\n"
    head = {"validate": "optkg validate", "check": "optkg check"}[kind]
    out.append(f"### {head}: {_md(summary)}")
    out.append("")
    if not results:
        if kind == "validate":
            out.append("No problems found.")
        else:  # never a bare "No findings" when rules could not be evaluated (kg.output.report.summary_line)
            from kg.output.report import summary_line
            out.append(_md(summary_line(d)) if d.get("outcomes") else "No findings.")
        out += _md_not_evaluable(d) if kind == "check" else []
        return "\n".join(out) + "\n"
    if kind == "validate":
        out.append("| Severity | Location | Field | Problem | Hint |")
        out.append("| --- | --- | --- | --- | --- |")
        for r in results:
            hint = next((x[6:] for x in r.details if x.startswith("hint: ")), "")
            msg = r.message[len(r.field_path) + 2:] if r.field_path and r.message.startswith(r.field_path + ": ") else r.message
            out.append(f"| {r.level} | {_md_loc(r)} | `{_md(r.field_path)}` | {_md(msg)} (`{r.rule_id}`) | {_md(hint)} |")
        with_values = [r for r in results if r.valid_values]
        if with_values:
            out.append("")
            out.append("<details><summary>Valid values</summary>")
            out.append("")
            for r in with_values:
                out.append(f"- {_md_loc(r)} `{r.field_path}`:")
                for v, desc in r.valid_values:
                    out.append(f"  - `{v}`: {desc}" if desc else f"  - `{v}`")
            out.append("")
            out.append("</details>")
    else:
        stack = d.get("stack") or {}
        if d.get("kind") == "training":  # a training job names its framework and GPUs, not an engine
            fw = " ".join(str(x) for x in (stack.get("framework"), stack.get("framework_version")) if x) or "-"
            from kg.output.training_report import gpus_phrase
            out.append(f"Model `{stack.get('model') or 'shape from arguments'}`, framework `{fw}`, "
                       f"GPUs: {_md(gpus_phrase(d))}")
        else:
            out.append(f"Model `{stack.get('model')}`, engine `{stack.get('engine') or '-'}`, "
                       f"hardware `{stack.get('hardware') or '-'}`" + (f" x{stack['gpu_count']}" if stack.get("gpu_count") else ""))
        out.append("")
        out.append("| Severity | Rule | Finding | Cost lands in | Fix |")
        out.append("| --- | --- | --- | --- | --- |")
        for f in d.get("findings", []):
            cross = (f"{f['from_dimension']} → {f['cost_dimension']}" if f.get("from_dimension") else f.get("cost_dimension")) or ""
            fix = f.get("fix") or ", ".join(x["technique"] for x in f.get("fixes", []))
            out.append(f"| {f['severity']} | `{f['rule_id']}` | {_md(f['message'])} | {_md(cross)} | {_md(fix)} |")
        out.append("")
        out.append("<details><summary>Numbers and sources</summary>")
        out.append("")
        for f in d.get("findings", []):
            out.append(f"**{f['rule_id']}**: {_md(f.get('title', ''))}")
            if f.get("numbers"):
                out.append("- numbers: " + "; ".join(f"{k} = {fmt_num(v, REPORT)}" for k, v in f["numbers"].items()))
            if f.get("mechanism"):
                out.append(f"- why: {_md(f['mechanism'])}")
            for s in f.get("sources") or []:
                out.append(f"- source: [{_md(s.get('title'))}]({_md(s.get('url'))})")
            out.append("")
        out.append("</details>")
        out += _md_not_evaluable(d)
    if d.get("suppressed"):
        out.append("")
        out.append(f"_{d['suppressed']} suppressed by --select/--ignore/--baseline._")
    from kg.core.textsafe import join_lines
    return join_lines(out) + "\n"  # each element is one line: a name's line break stays inside it


def render(fmt: str, kind: str, d: dict[str, Any]) -> str:
    """Render report dict ``d`` of ``kind`` (validate|check|place) as ``fmt`` (sarif|github|markdown).

    Raises OptkgError for an unknown format or kind.
    """
    if kind not in _ADAPTERS:
        raise OptkgError(f"no renderer for report kind '{kind}' (kinds: {', '.join(KINDS)})")
    if fmt == "sarif":
        return json.dumps(to_sarif(kind, d), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if fmt == "github":
        return to_github(kind, d)
    if fmt == "markdown":
        return to_markdown(kind, d)
    raise OptkgError(f"--format: unknown format '{fmt}' (formats: text, json, {', '.join(FORMATS)})")
