"""Benchmarks of the platform on the configured database: scratch data for the benchmark
commands and the per-turn cost of retrieval by meaning."""
