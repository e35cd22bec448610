# The course's commands. A newcomer needs two:
#   make site   set everything up (a virtual environment in .venv) and build the website
#   make test   run every test (unit tests, notebooks under nbval, the site in a browser)
# Both install what they need from this repository's own files.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup test bench bench-grade fuzz exercises translations check-exercises clean help mutation
.DEFAULT_GOAL := help

help:
	@echo "make site    - set up .venv and build the website into _build/html"
	@echo "make test    - run every test (same command as CI)"
	@echo "make bench   - print scalelib's import time, each notebook's run time, the whole suite's and its 10 slowest tests (SUITE=no: not the suite)"
	@echo "make bench-grade - time grading 30 notebooks one at a time and GRADE_JOBS (2) at a time"
	@echo "make fuzz    - explore the property tests with fresh random examples (not in CI; prints what fails)"
	@echo "make exercises - regenerate exercises/ from solutions/, resync setup cells, rewrite the API pages and the book map"
	@echo "make translations - rewrite the catalogs under locales/ru/ from the English, regenerate the Russian edition"

# Python packages, pinned in requirements.txt; scalelib itself installed editable.
# JAX=0.7.0 (say) puts that JAX release in place of the pinned one: CI runs every test with the lowest
# and the highest JAX the notebooks' setup cell installs (pyproject.toml's notebooks extra).
JAX ?=
$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -r requirements.txt
	$(if $(JAX),$(PY) -m pip install --quiet "jax==$(JAX)" "jaxlib==$(JAX)")
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

setup: $(VENV)/.installed book/node_modules/.installed browser

include book/site.mk

# Independent tests run in parallel, one worker per core (pytest-xdist); a test module, a notebook or a
# test class stays on one worker (--dist loadscope): nbval's cells share one kernel, in order.
# Every property test runs derandomized (tests/conftest.py): the same tree gives the same result.
WORKERS ?= auto
PYTEST := $(PY) -m pytest -n $(WORKERS) --dist loadscope

test: setup site
	$(PYTEST)

# Random exploration of the property tests (Hypothesis's examples drawn afresh each run, FUZZ_RUNS runs,
# each test given FUZZ_SCALE times its usual number of examples).
# Not in CI and not in make test: what it finds is printed with its reproduction, and becomes a named
# regression test. Failing examples are kept in .hypothesis/ and replayed first by the next make fuzz.
FUZZ_RUNS ?= 3
FUZZ_SCALE ?= 10
fuzz: $(VENV)/.installed
	@status=0; for run in $$(seq $(FUZZ_RUNS)); do \
		echo "== make fuzz: run $$run of $(FUZZ_RUNS)"; \
		SCALELIB_HYPOTHESIS=fuzz FUZZ_SCALE=$(FUZZ_SCALE) $(PY) -m pytest -n $(WORKERS) -q -p no:cacheprovider tests \
			|| status=1; \
	done; exit $$status

# SUITE=yes (the default) also times one run of the whole test suite, which needs the built site.
SUITE ?= yes
bench: $(VENV)/.installed $(if $(filter yes,$(SUITE)),setup site)
	$(PY) -m scalelib.course.bench $(if $(filter yes,$(SUITE)),--suite -- -n $(WORKERS) --dist loadscope)

# Grading speed: 30 small submissions graded with --jobs 1 and with --jobs $(GRADE_JOBS) (same grades required).
GRADE_JOBS ?= 2
bench-grade: $(VENV)/.installed browser
	$(PY) -m scalelib.course.gradebench --notebooks 30 --jobs $(GRADE_JOBS)

exercises: $(VENV)/.installed
	$(VENV)/bin/scalelib sync-setup
	$(VENV)/bin/scalelib generate
	$(VENV)/bin/scalelib api-docs
	$(VENV)/bin/scalelib book-map
	$(MAKE) translations

# The Russian edition: catalogs under locales/ru/ rewritten from the English (new entries untranslated, changed
# ones fuzzy), then the Russian notebooks, pages, toc and config generated from the English and the catalogs.
translations: $(VENV)/.installed
	$(VENV)/bin/scalelib translate update
	$(VENV)/bin/scalelib translate generate
	$(VENV)/bin/scalelib translate stats | tail -1

check-exercises: $(VENV)/.installed
	$(VENV)/bin/scalelib sync-setup --check
	$(VENV)/bin/scalelib generate --check
	$(VENV)/bin/scalelib api-docs --check
	$(VENV)/bin/scalelib book-map --check
	$(VENV)/bin/scalelib translate update --check
	$(VENV)/bin/scalelib translate generate --check

clean:
	rm -rf _build .pytest_cache .hypothesis

# Mutation testing of the formulas (cosmic-ray, in its own venv), on a scratch copy of the
# committed tree so that no mutant ever touches the working tree. Not part of CI: a run of
# MUTANTS sampled mutants takes about 7 s each. Prints the share of mutants the unit tests kill.
MUTANTS ?= 240
SEED ?= 0
MUTATION_DIR ?= /tmp/scalelib-mutation
MUTATION_CONFIG ?= .ci/mutation.toml
CR := $(CURDIR)/.venv-mutation/bin

.venv-mutation/.installed:
	$(PYTHON) -m venv .venv-mutation
	$(CR)/pip install --quiet "cosmic-ray==8.7.0"
	touch $@

mutation: $(VENV)/.installed .venv-mutation/.installed
	rm -rf $(MUTATION_DIR) && mkdir -p $(MUTATION_DIR)
	git archive HEAD | tar -x -C $(MUTATION_DIR)
	cd $(MUTATION_DIR) && $(CR)/cosmic-ray init $(MUTATION_CONFIG) session.sqlite \
		&& $(CR)/cr-filter-operators session.sqlite $(MUTATION_CONFIG) \
		&& $(CR)/python .ci/mutation_sample.py session.sqlite $(MUTANTS) $(SEED) \
		&& PATH="$(CURDIR)/$(VENV)/bin:$$PATH" PYTHONPATH="$(MUTATION_DIR)" $(CR)/cosmic-ray exec $(MUTATION_CONFIG) session.sqlite \
		&& $(CR)/python .ci/mutation_sample.py --score session.sqlite
