"""Benchmark scripts (run as files: ``python bench/<name>.py``) and their helpers."""
