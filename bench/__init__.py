"""Benchmarks: torchbuild against the plain recipe, measured in the same run (bench/run.py)."""
