"""Job entry points (`python -m jobs.<name>`): wiring of the packages onto Ray; only the benchmarks that measure a
job's own reader and writer import `jobs`."""
