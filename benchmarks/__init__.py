"""Benchmark scripts printing measured figures side by side (run with `python -m benchmarks.<name>`)."""
