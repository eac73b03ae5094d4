"""Readers of what users give: model configs, stacks and launch commands, metrics, traces."""
