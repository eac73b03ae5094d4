"""JSON Schemas (draft 2020-12) for catalog files, built from the axes in ``catalog/axes.yaml``.

The stage, layer and dimension enums are not written here: they are read from the axes file so
that adding a layer is a data change. ``optkg schema`` writes the generated schema to
``catalog/schema/technique.schema.json`` (for editor completion through yaml-language-server);
CI checks that the committed copy is fresh.
"""
from __future__ import annotations

from typing import Any

from kg.knowledge.axes import Axes

SCHEMA_ID = "https://optkg.dev/schema/technique.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"

COUPLING_KINDS: dict[str, str] = {
    "causes": "Using this technique brings about the target effect or property change.",
    "amplifies": "This technique makes the target's effect (usually a cost) larger.",
    "mitigates": "This technique reduces or removes the target's cost.",
    "conflicts_with": "The two cannot be used together, or only under the stated condition.",
    "requires": "This technique needs the target to be present (or the condition to hold).",
    "replaces": "This technique is an alternative that supersedes the target in the same cell.",
}

SEVERITIES: dict[str, str] = {
    "info": "Worth knowing; nothing to fix.",
    "warning": "Wastes a resource or risks quality; the stack still runs.",
    "error": "The engine rejects the combination at startup or it fails at run time.",
}

STATUSES: dict[str, str] = {
    "stable": "In production use in at least one major framework or engine.",
    "experimental": "Available behind a flag or in research code; behaviour may change.",
    "deprecated": "Kept so old ids resolve; name the successor in replaced_by.",
}

REFERENCE_KINDS: dict[str, str] = {
    "paper": "A peer-reviewed paper or arXiv preprint.",
    "doc": "An official documentation page of a framework, engine or vendor.",
    "source": "A source file in a public repository (name the path, ideally a commit).",
    "issue": "A public issue or pull-request thread.",
    "blog": "An engineering blog post by the authors or maintainers.",
}

PARAM_TYPES: dict[str, str] = {
    "integer": "A whole number (e.g. a parallel degree).",
    "number": "A real number (e.g. a memory fraction).",
    "boolean": "true or false.",
    "string": "Free text (e.g. a backend name).",
    "enum": "One of the listed values.",
}


def _described_enum(values: dict[str, str]) -> dict[str, Any]:
    """An enum whose every value carries a description (editors show it on completion)."""
    return {"oneOf": [{"const": k, "description": v} for k, v in values.items()]}


def _axis_enum(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "oneOf": [
            {"const": it["id"], "description": f"{it['name']} ({it['name_zh']}): {it['description']}"}
            for it in items
        ]
    }


def technique_schema(axes: Axes) -> dict[str, Any]:
    """Return the technique-file JSON Schema for ``axes``.

    Shape: a JSON object (dict) in draft 2020-12; ``additionalProperties: false`` everywhere.
    """
    stage = _axis_enum(axes.stages)
    layer = _axis_enum(axes.layers)
    dimension = _axis_enum(axes.dimensions)
    source = {
        "type": "object",
        "additionalProperties": False,
        "required": ["title", "url"],
        "properties": {
            "title": {"type": "string", "minLength": 3, "description": "Title of the paper, page or file."},
            "url": {"type": "string", "pattern": "^https?://", "description": "Where to read it."},
            "kind": {**_described_enum(REFERENCE_KINDS), "description": "What sort of source this is."},
            "note": {"type": "string", "description": "Which section, function or commit supports the claim."},
        },
    }
    effect = {
        "type": "object",
        "additionalProperties": False,
        "required": ["dimension", "what"],
        "properties": {
            "dimension": {**dimension, "description": "The resource dimension this effect lands in."},
            "what": {"type": "string", "minLength": 3, "description": "What improves or what is paid, in a phrase."},
            "who": {"type": "string", "description": "Who pays or gains (e.g. 'per-request latency', 'kernel authors')."},
            "magnitude": {"type": "string", "description": "How much, with units, where known (e.g. '2x KV capacity')."},
        },
    }
    parameter = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "type", "description"],
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$",
                     "description": "Field-standard name with unit where it has one (tp_size, max_model_len)."},
            "type": {**_described_enum(PARAM_TYPES), "description": "Value type."},
            "description": {"type": "string"},
            "minimum": {"type": "number"},
            "maximum": {"type": "number"},
            "values": {"type": "array", "items": {"type": ["string", "number", "boolean"]},
                       "description": "Allowed values when type is enum."},
            "default": {"type": ["string", "number", "boolean", "null"]},
            "unit": {"type": "string", "description": "Unit (tokens, bytes, GiB, s, ranks)."},
            "flags": {"type": "array", "items": {"type": "string"},
                      "description": "Engine flags that set it (e.g. --tensor-parallel-size)."},
        },
        "if": {"properties": {"type": {"const": "enum"}}},
        "then": {"required": ["values"]},
    }
    coupling = {
        "type": "object",
        "additionalProperties": False,
        "required": ["kind", "from_dimension", "to_dimension", "mechanism", "sources"],
        "properties": {
            "kind": {**_described_enum(COUPLING_KINDS), "description": "How this technique acts on the target."},
            "target": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$",
                       "description": "Id (or alias) of another technique."},
            "property": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$",
                         "description": "A model, hardware or derived property (see catalog/properties.yaml)."},
            "from_dimension": {**dimension, "description": "Dimension where the cause sits (usually this technique's benefit)."},
            "to_dimension": {**dimension, "description": "Dimension where the effect lands."},
            "condition": {"type": "string", "description": "An expression over stack facts (kg/engine/expr.py). For kind 'requires' on a property it is the constraint that must hold (e.g. 'num_attention_heads % tp_size == 0'); for every other kind it says when the edge applies (e.g. 'tp_size > num_key_value_heads')."},
            "mechanism": {"type": "string", "minLength": 10, "description": "Why, in one sentence."},
            "severity": {**_described_enum(SEVERITIES), "description": "How bad when it holds."},
            "engines": {"type": "array", "items": {"type": "string"},
                        "description": "Engines where this holds (vllm, sglang, trtllm); omit for all."},
            "sources": {"type": "array", "minItems": 1, "items": source,
                        "description": "Where the interaction is documented."},
        },
        "oneOf": [{"required": ["target"]}, {"required": ["property"]}],
    }
    return {
        "$schema": DRAFT,
        "$id": SCHEMA_ID,
        "title": "optkg technique",
        "description": "One optimisation technique: where it sits, what it saves, what it costs, what it couples with.",
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "name", "summary", "status", "coordinates", "benefits", "costs", "references"],
        "properties": {
            "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$",
                   "description": "Stable id; equals the file name without .yaml. Never reused."},
            "name": {"type": "string", "minLength": 2, "maxLength": 500, "description": "Display name (at most 500 characters: it goes into docs, diagrams and tables)."},
            "short_name": {"type": "string", "maxLength": 24, "description": "Name used in diagram cells."},
            "aliases": {"type": "array", "items": {"type": "string"}, "uniqueItems": True,
                        "description": "Other names, and old ids after a rename (they keep resolving)."},
            "summary": {"type": "string", "minLength": 20, "description": "One sentence, in our own words."},
            "status": {**_described_enum(STATUSES), "description": "Lifecycle status."},
            "replaced_by": {"type": "string", "description": "Successor id, required when deprecated."},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"}, "uniqueItems": True,
                     "description": "Free lower-case-with-dashes labels (kv-cache, parallelism, ...)."},
            "coordinates": {
                "type": "object",
                "description": "Where the technique sits: task stages x layer (or span) x primary resource dimension.",
                "additionalProperties": False,
                "required": ["stages", "layers", "dimension"],
                "properties": {
                    "stages": {"type": "array", "minItems": 1, "uniqueItems": True, "items": stage,
                               "description": "Task stages where the technique is used."},
                    "layers": {"type": "array", "minItems": 1, "maxItems": 2, "items": layer,
                               "description": "One layer, or [from, to] for a span such as [L2, L3]."},
                    "dimension": {**dimension, "description": "Primary resource dimension it improves."},
                    "secondary_dimensions": {"type": "array", "uniqueItems": True, "items": dimension,
                                             "description": "Other dimensions it improves."},
                },
            },
            "benefits": {"type": "array", "minItems": 1, "items": effect, "description": "What improves, by dimension."},
            "costs": {"type": "array", "minItems": 1, "items": effect, "description": "What is paid, by dimension."},
            "parameters": {"type": "array", "items": parameter,
                           "description": "Settings a stack can give this technique (name, type, unit, engine flags)."},
            "couplings": {"type": "array", "items": coupling,
                          "description": "How this technique acts on other techniques or on model/hardware/derived properties."},
            "references": {"type": "array", "minItems": 1, "items": source,
                           "description": "Where a reviewer can check the claims (paper, doc, source file, issue, blog)."},
        },
        "if": {"properties": {"status": {"const": "deprecated"}}, "required": ["status"]},
        "then": {"required": ["replaced_by"]},
    }
