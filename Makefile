# The two commands of the README:
#   make main   set up, then calibrate on the embedded default dataset (the main job)
#   make test   set up, then run the whole test suite (CI runs exactly this)
.PHONY: setup main test test-fast test-cold test-research lint bench notebooks

setup:
	@bash scripts/setup.sh

main: setup
	.venv/bin/bayesrate calibrate --dataset ota-contrib

test: setup
	.venv/bin/python -m pytest -q -n 2

# the edit loop: no test that compiles or samples a model, none marked slow
test-fast: setup
	.venv/bin/python -m pytest -q -n 2 -m "not slow and not sampling and not compiles"

# the research models (research/, the bayesrate-research package): installed into .venv
# (editable, its entry points registering the models), then its own tests; CI runs this
# after `make test`
test-research: setup
	.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e research
	.venv/bin/python -m pytest -q -n 2 research/tests

# the same as CI: every compile cache empty, as on a user's first run
test-cold:
	bash scripts/cold_caches.sh $(MAKE) test

lint: setup
	.venv/bin/ruff check bayesrate tests benchmarks scripts notebooks research

notebooks: setup
	.venv/bin/python scripts/run_notebooks.py
