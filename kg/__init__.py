"""optkg: a knowledge graph and rule engine for ML-systems optimisation.

Data flows one way: catalog files -> validated model (kg.catalog) -> graph (kg.graph)
-> rule engine (kg.engine, kg.rules) -> findings (kg.check) -> renderers (kg.report, kg.export).
"""
__version__ = "0.1.0"
