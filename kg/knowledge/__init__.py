"""The knowledge model: axes, JSON Schema, catalog loading and validation, the coupling graph."""
