"""List the bundled model configs: hub id, attention, layers, KV heads, context limit and the file's source.

A bundled id works anywhere a model is named (``vllm serve <id>`` in ``check``, ``--model``, ``kv``) without a
network; any other model needs its config.json (``--config``) or a Hugging Face cache that holds it.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kg.cli.common import write_output


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("contains", nargs="?", help="only ids that contain this text (case-insensitive)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    p.add_argument("--force", action="store_true", help="allow overwriting the output file")


def run(args: argparse.Namespace) -> int:
    from kg.analyses.models import list_models
    from kg.output.models_report import render_text
    from kg.output.report import to_json
    d = list_models(args.contains)
    write_output(to_json(d) if args.format == "json" else render_text(d), args.output, force=args.force)
    return 0
