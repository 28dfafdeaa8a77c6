# The two commands of the README. Both set the project up first (scripts/bootstrap.sh is idempotent).
.PHONY: setup demo test bench

setup:
	@bash scripts/bootstrap.sh

demo: setup
	.venv/bin/python -m jobs.demo

test: setup
	bash scripts/test.sh

bench: setup
	.venv/bin/python -m benchmarks.run_all
