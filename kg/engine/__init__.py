"""The rule engine: the expression language, the durable-rules adapter, rule files and their fixtures."""
