# The two commands of the README:
#   make main   set up, then run the main job on the embedded default dataset
#   make test   set up, then run the whole test suite (CI runs exactly this)
.PHONY: setup main test lint bench

setup:
	@bash scripts/setup.sh

main: setup
	.venv/bin/bayesrate data summary --dataset ota-contrib

test: setup
	.venv/bin/python -m pytest -q

lint: setup
	.venv/bin/ruff check bayesrate tests benchmarks
