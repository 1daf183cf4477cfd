# The two commands of the README:
#   make main   set up, then calibrate on the embedded default dataset (the main job)
#   make test   set up, then run the whole test suite (CI runs exactly this)
.PHONY: setup main test lint bench notebooks

setup:
	@bash scripts/setup.sh

main: setup
	.venv/bin/bayesrate calibrate --dataset ota-contrib

test: setup
	.venv/bin/python -m pytest -q -n 2

lint: setup
	.venv/bin/ruff check bayesrate tests benchmarks scripts notebooks

notebooks: setup
	.venv/bin/python scripts/run_notebooks.py
