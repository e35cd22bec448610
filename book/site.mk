# Course website targets; the top-level Makefile does `include book/site.mk`.
# It must define VENV, PY and the target $(VENV)/.installed (Python packages,
# jupyter-book included). Run from the repository root.
#
#   make site      build the website into _build/html (notebooks are executed,
#                  results cached in _build/.jupyter_cache)
#   make browser   install Debian's chromium and chromedriver (for tests/test_site.py)

SITE_HTML := _build/html
SITE_BUILD := $(VENV)/bin/jupyter-book build . --config book/_config.yml --toc book/_toc.yml \
	-W -n --keep-going
# Root installs packages directly; anyone else through sudo.
SITE_SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: site browser

# KaTeX, pinned by book/package-lock.json: renders the site's math at build time.
book/node_modules/.installed: book/package.json book/package-lock.json
	@command -v npm >/dev/null || { $(SITE_SUDO) apt-get update && \
		$(SITE_SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; }
	npm ci --prefix book --no-audit --no-fund
	touch $@

browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then \
		echo "chromium and chromedriver are installed"; \
	else \
		$(SITE_SUDO) apt-get update && \
		$(SITE_SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
			chromium chromium-driver; \
	fi

site: $(VENV)/.installed book/node_modules/.installed
	$(SITE_BUILD)
	@echo "Site built: file://$(CURDIR)/$(SITE_HTML)/index.html"
