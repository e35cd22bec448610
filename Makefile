# The course's commands. A newcomer needs two:
#   make site   set everything up (a virtual environment in .venv) and build the website
#   make test   run every test (unit tests, notebooks under nbval, the site in a browser)
# Both install what they need from this repository's own files.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup test bench exercises check-exercises clean help
.DEFAULT_GOAL := help

help:
	@echo "make site    - set up .venv and build the website into _build/html"
	@echo "make test    - run every test (same command as CI)"
	@echo "make bench   - print scalelib's import time and each notebook's run time"
	@echo "make exercises - regenerate exercises/ from solutions/, resync setup cells, rewrite the API pages"

# Python packages, pinned in requirements.txt; scalelib itself installed editable.
$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

setup: $(VENV)/.installed book/node_modules/.installed browser

include book/site.mk

test: setup site
	$(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) -m scalelib._bench

exercises: $(VENV)/.installed
	$(VENV)/bin/scalelib sync-setup
	$(VENV)/bin/scalelib generate
	$(VENV)/bin/scalelib api-docs

check-exercises: $(VENV)/.installed
	$(VENV)/bin/scalelib sync-setup --check
	$(VENV)/bin/scalelib generate --check
	$(VENV)/bin/scalelib api-docs --check

clean:
	rm -rf _build .pytest_cache .hypothesis
