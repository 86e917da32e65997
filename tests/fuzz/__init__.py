"""Differential fuzzer: generated programs run eagerly and compiled, every observable compared."""
