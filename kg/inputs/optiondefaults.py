"""What an engine's flag table says about options a stack does not give, and about options given twice.

Data: the flag entries of ``catalog/engines/<engine>.yaml``. An entry may carry

- ``defaults: {setting: value}``: the value the engine uses when the option is not given, at the releases
  the entry holds for (``since`` / ``until``), with evidence among the entry's ``evidence`` items (the
  config field's default in the released source). ``""`` stands for "not given" where the engine's own
  default is ``None`` (a path, an unset JSON field), so a rule can compare it instead of being left
  unevaluable. An entry for an environment variable (``env:``) may carry ``default:`` the same way.
- ``given_as: <setting>``: a boolean setting, true when the flag is given (``--watermark-config`` turns
  watermarking on whatever its fields).
- ``given_value: {<derived>: <setting>}``: ``<derived>`` is the setting's value when given, else ``""``, for
  rules that must decide without giving the setting itself a default other readers would take as given.
- ``exclusive_with: [{json: <setting of a JSON flag>, field: <key>, since: <release>}]``: the engine
  refuses the plain flag together with that key of the JSON flag ("X and Y.key are mutually exclusive").

``ranged_facts: {name: [{since, until?, value, evidence}]}`` (top level of the table): an engine fact whose value
changes with the release; ``ranged_fact(engine, release, name)`` gives the value at ``release``.

``option_facts(engine, release, settings)`` returns the defaults for settings not in ``settings`` and
``options_given_twice``: the plain flags (first name) whose JSON twin is given too, at releases from
``since``. Release ``None`` means the newest knowledge. Pure: reads the table, changes nothing.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

from kg.core.relcmp import Release
from kg.inputs.stack import _engine_tables


@lru_cache(maxsize=1024)
def _version(text: str) -> Release:
    """Parsed once per text: every checked stack asks for every flag entry's bounds."""
    return Release(text)


def _holds(entry: Mapping[str, Any], release: Release | None) -> bool:
    if release is None:
        return entry.get("until") is None
    if entry.get("since") is not None and release < _version(str(entry["since"])):
        return False
    return not (entry.get("until") is not None and release >= _version(str(entry["until"])))


def option_facts(engine: str | None, release: str | None, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults of options not given, and ``options_given_twice`` (list of flag names), for ``engine``.

    ``settings``: the stack's settings (name -> value; a JSON flag's object under its ``set`` name).
    An engine without a flag table gives ``{}``."""
    table = _engine_tables().get(engine or "")
    if not table:
        return {}
    try:
        rel = Release(str(release)) if release else None
    except ValueError:  # packaging's InvalidVersion
        rel = None
    out: dict[str, Any] = {}
    twice: list[str] = []
    for spec in table.get("flags") or []:
        if not isinstance(spec, dict) or not _holds(spec, rel):
            continue
        for derived, source in (spec.get("given_value") or {}).items():
            if settings.get(derived) is None:
                out[str(derived)] = "" if settings.get(source) is None else settings[source]
        if spec.get("given_as") and settings.get(spec["given_as"]) is None:
            out[str(spec["given_as"])] = settings.get(spec.get("set")) is not None
        for name, value in (spec.get("defaults") or {}).items():
            if settings.get(name) is None and name not in out:
                out[name] = value
        for ex in spec.get("exclusive_with") or []:
            if rel is not None and ex.get("since") is not None and rel < _version(str(ex["since"])):
                continue
            obj = settings.get(str(ex["json"]))
            if settings.get(spec.get("set")) is not None and isinstance(obj, dict) and ex["field"] in obj:
                twice.append(str(spec["names"][0]))
    for name, e in (table.get("env") or {}).items():
        if isinstance(e, dict) and "default" in e and e.get("set") and settings.get(e["set"]) is None:
            out.setdefault(str(e["set"]), e["default"])
    for key in ("removed", "unknown"):  # env_validation (kg.inputs.launch.argv): no such variable without a command
        name = (table.get("env_validation") or {}).get(key)
        if name and settings.get(name) is None:
            out.setdefault(str(name), "")
    out["options_given_twice"] = twice
    return out


def ranged_fact(engine: str | None, release: str | None, name: str) -> Any:
    """The value of the table's ``ranged_facts[name]`` entry holding at ``release`` (None: the newest, open-ended
    entry), or None when the engine's table has no such fact or no entry holds."""
    table = _engine_tables().get(engine or "")
    try:
        rel = Release(str(release)) if release else None
    except ValueError:  # packaging's InvalidVersion
        rel = None
    for entry in ((table or {}).get("ranged_facts") or {}).get(name) or []:
        if isinstance(entry, dict) and _holds(entry, rel):
            return entry.get("value")
    return None
