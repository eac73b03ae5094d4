"""optkg: a knowledge graph and rule engine for ML-systems optimisation.

Data flows one way: catalog files -> validated model (kg.knowledge.catalog) -> graph (kg.knowledge.graph)
-> rule engine (kg.engine.durable, kg.engine.rules) -> findings (kg.analyses.check) -> renderers (kg.output.report, kg.output.diagrams).
"""
from kg.core.version import __version__  # noqa: F401
