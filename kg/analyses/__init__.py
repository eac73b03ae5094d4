"""Analyses over stacks, catalogs, metrics and traces: check, sweep, matrix, gaps, place, diagnose, fit."""
