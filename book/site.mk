# Course website targets; the top-level Makefile does `include book/site.mk`.
# It must define VENV, PY and the target $(VENV)/.installed (Python packages,
# jupyter-book included). Run from the repository root.
#
#   make site      build the website into _build/html (notebooks are executed,
#                  results cached in _build/.jupyter_cache)
#   make site SOLUTIONS=no
#                  the same site without the solution pages, for courses that grade:
#                  built from a copy of the toc without its solutions/ entries
#                  (_build/no-solutions/_toc.yml), links to them left as plain text,
#                  into _build/no-solutions/_build/html (apart from the full site)
#   The full site has a Russian edition under ru/ (its own build in _build/ru, copied in; see RU_* below).
#   make browser   install Debian's chromium, chromedriver and colour emoji font (tests/test_site.py, make pdf)
#                  and bubblewrap (the namespace sandbox `scalelib grade` runs each kernel in)
#   make pdf       the PDF edition (scalelib/course/pdf.py): the site built as one page and printed by
#                  chromium into _build/pdf/how-to-scale-your-model.pdf, then copied into the site,
#                  where the introduction links to it; `make site` ends with this step. With
#                  SOLUTIONS=no: from that site's toc, into _build/no-solutions/_build/{pdf,html}
#
# Nothing is rebuilt that has not changed: `make site` skips the website's build when the digest of its
# inputs (scalelib/course/sitestamp.py: the toc, the config, book/, solutions/, exercises/, scalelib/,
# the pins) equals the one written in _build/site.inputs after its last successful build, and the PDF
# likewise (_build/pdf/pdf.inputs). So `make test` after `make site` on an unchanged tree spends no time
# on the site. When they do run, the notebooks are executed only when changed (Jupyter Book's cache)
# and Sphinx rereads only the pages whose source changed. `make site FORCE=yes` rebuilds both steps
# (still with the notebook cache); `make pdf` always reprints the PDF.

SOLUTIONS ?= yes
ifeq ($(SOLUTIONS),no)
SITE_TOC := _build/no-solutions/_toc.yml
SITE_HTML := _build/no-solutions/_build/html
SITE_ENV := SCALELIB_SITE_SOLUTIONS=no
SITE_OUT := --path-output _build/no-solutions
else ifeq ($(SOLUTIONS),yes)
SITE_TOC := book/_toc.yml
SITE_HTML := _build/html
SITE_ENV :=
SITE_OUT :=
else
$(error SOLUTIONS must be yes or no, got '$(SOLUTIONS)')
endif
SITE_BUILD := $(SITE_ENV) $(VENV)/bin/jupyter-book build . --config book/_config.yml --toc $(SITE_TOC) \
	$(SITE_OUT) -W -n --keep-going
# The PDF edition of the site built into $(SITE_HTML): reuses its notebook cache, lands beside it.
SITE_PDF := $(SITE_ENV) $(VENV)/bin/scalelib pdf --toc $(SITE_TOC) --build-dir $(SITE_HTML:/html=)
# Whether each step's inputs changed since its last successful run (a digest of their contents).
SITE_STAMP := $(SITE_ENV) $(PY) scalelib/course/sitestamp.py
SITE_INPUTS := $(SITE_HTML:/html=)/site.inputs
PDF_INPUTS := $(SITE_HTML:/html=)/pdf/pdf.inputs
FORCE ?= no
ifeq ($(FORCE),yes)
SITE_FRESH := false
PDF_FRESH := false
else
SITE_FRESH := $(SITE_STAMP) check $(SITE_INPUTS) --toc $(SITE_TOC) --output $(SITE_HTML)/index.html
PDF_FRESH := $(SITE_STAMP) check $(PDF_INPUTS) --pdf --toc $(SITE_TOC) --output $(SITE_HTML:/html=)/pdf/how-to-scale-your-model.pdf
endif
# The Russian edition (scalelib/course/translate.py: generated from the English and locales/ru/): built into
# _build/ru with its own notebook cache and stamps, printed into its own PDF, then copied into the site as ru/.
# Only the full site has it (SOLUTIONS=no builds the English edition alone).
RU_TOC := book/ru/_toc.yml
RU_CONFIG := book/ru/_config.yml
RU_HTML := _build/ru/_build/html
RU_BUILD := $(VENV)/bin/jupyter-book build . --config $(RU_CONFIG) --toc $(RU_TOC) --path-output _build/ru -W -n --keep-going
RU_PDF := $(VENV)/bin/scalelib pdf --toc $(RU_TOC) --config $(RU_CONFIG) --build-dir _build/ru/_build
RU_STAMP := $(PY) scalelib/course/sitestamp.py
RU_INPUTS := _build/ru/site.inputs
RU_PDF_INPUTS := _build/ru/_build/pdf/pdf.inputs
ifeq ($(FORCE),yes)
RU_FRESH := false
RU_PDF_FRESH := false
else
RU_FRESH := $(RU_STAMP) check $(RU_INPUTS) --toc $(RU_TOC) --output $(RU_HTML)/index.html
RU_PDF_FRESH := $(RU_STAMP) check $(RU_PDF_INPUTS) --pdf --toc $(RU_TOC) --output _build/ru/_build/pdf/how-to-scale-your-model.pdf
endif

# Root installs packages directly; anyone else through sudo.
SITE_SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: site browser pdf

# KaTeX, pinned by book/package-lock.json: renders the site's math at build time.
book/node_modules/.installed: book/package.json book/package-lock.json
	@command -v npm >/dev/null || { $(SITE_SUDO) apt-get update && \
		$(SITE_SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; }
	npm ci --prefix book --no-audit --no-fund
	touch $@

# With Noto's colour emoji: the checker's ✅ ❌ ⬜ print as themselves, not as empty boxes (PDF, screenshots).
EMOJI_FONT := /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && [ -f $(EMOJI_FONT) ] && [ -x /usr/bin/bwrap ]; then \
		echo "chromium, chromedriver, an emoji font and bubblewrap are installed"; \
	else \
		$(SITE_SUDO) apt-get update && \
		$(SITE_SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
			chromium chromium-driver fonts-noto-color-emoji bubblewrap; \
	fi

site: $(VENV)/.installed book/node_modules/.installed browser
ifeq ($(SOLUTIONS),no)
	$(PY) -c "from scalelib.course.authoring import write_toc_without_solutions as w; w('book/_toc.yml', '$(SITE_TOC)')"
endif
	@$(SITE_FRESH) || { $(SITE_STAMP) begin $(SITE_INPUTS) --toc $(SITE_TOC) && \
		echo '$(SITE_BUILD)' && $(SITE_BUILD) && $(SITE_STAMP) done $(SITE_INPUTS); }
	@$(PDF_FRESH) || { $(SITE_STAMP) begin $(PDF_INPUTS) --pdf --toc $(SITE_TOC) && \
		echo '$(SITE_PDF)' && $(SITE_PDF) && $(SITE_STAMP) done $(PDF_INPUTS); }
ifeq ($(SOLUTIONS),yes)
	@$(RU_FRESH) || { $(RU_STAMP) begin $(RU_INPUTS) --toc $(RU_TOC) && \
		echo '$(RU_BUILD)' && $(RU_BUILD) && $(RU_STAMP) done $(RU_INPUTS); }
	@$(RU_PDF_FRESH) || { $(RU_STAMP) begin $(RU_PDF_INPUTS) --pdf --toc $(RU_TOC) && \
		echo '$(RU_PDF)' && $(RU_PDF) && $(RU_STAMP) done $(RU_PDF_INPUTS); }
	rm -rf $(SITE_HTML)/ru && cp -r $(RU_HTML) $(SITE_HTML)/ru
endif
	@echo "Site built: file://$(CURDIR)/$(SITE_HTML)/index.html (Russian edition: $(SITE_HTML)/ru/index.html)"

pdf: $(VENV)/.installed book/node_modules/.installed browser
ifeq ($(SOLUTIONS),no)
	$(PY) -c "from scalelib.course.authoring import write_toc_without_solutions as w; w('book/_toc.yml', '$(SITE_TOC)')"
endif
	$(SITE_STAMP) begin $(PDF_INPUTS) --pdf --toc $(SITE_TOC)
	$(SITE_PDF)
	$(SITE_STAMP) done $(PDF_INPUTS)
