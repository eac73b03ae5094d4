"""Speed: serving TTFT / ITL / tokens/s through aiconfigurator-core (``estimator``, ``mapping``,
``serving``) composed with optkg's KV capacity and startup verdicts. Imports nothing heavy: the
estimator is imported only when a point misses the on-disk cache."""
