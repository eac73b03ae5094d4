"""Renderers: text and JSON reports, CI formats, filters, generated docs, diagrams."""
