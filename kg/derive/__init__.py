"""Derivations from model and hardware facts: KV-cache layout, weights and memory."""
