"""Benchmarks: micro-benchmarks (bench_*.py scripts) and the side-by-side harness against Apache
Kafka (`python -m benchmarks`, see __main__.py)."""
