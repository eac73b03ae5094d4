"""Shared infrastructure at the bottom: errors, paths, the cache, safe YAML I/O."""
