# Two commands a newcomer needs: `make book` builds the site, `make test` runs every check.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The site's JavaScript (MathJax 3, RequireJS, the ipywidgets manager), from npm, served offline.
VENDOR := book/_vendor
VENDOR_STAMP := $(VENDOR)/node_modules/.installed
PORT ?= 8000
# Offline copy of the corpus, when the project sits beside ../shared (CI, these machines).
SHARED_DATA := $(abspath ../shared/data/fra-eng)
ifneq ($(wildcard $(SHARED_DATA)/fra.txt),)
export ATTENTION_LIB_DATA ?= $(SHARED_DATA)
endif
export PYDEVD_DISABLE_FILE_VALIDATION := 1
# How nbval re-runs the notebooks (make test, make thread-check).
NBVAL := --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=1800 -p no:cacheprovider -q

.PHONY: env book serve test test-fast execute bench clean system-book system-test thread-check
.PHONY: busy-check

# A claim that fails on a reader's run shows a note and the page goes on; in the book's own
# checks it fails (attention_lib/claims.py).
test thread-check colab-check execute busy-check gpu-check: export ATTENTION_LIB_STRICT_CLAIMS := 1

env: $(STAMP)

# System packages (npm; for the tests also Chromium and a CJK font): installed as root, else named.
system-book:
	@tools/provision.sh book
system-test:
	@tools/provision.sh test

$(STAMP): requirements.txt pyproject.toml | system-book
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	# d2l with --no-deps: its pins (numpy 1.23.5, ...) would break this environment and Colab's.
	$(PY) -m pip install -q --no-deps d2l==1.0.3
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

$(VENDOR_STAMP): $(VENDOR)/package.json $(VENDOR)/package-lock.json | system-book
	npm ci --prefix $(VENDOR) --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(VENDOR_STAMP)

book: $(STAMP) $(VENDOR_STAMP)
	$(VENV)/bin/jupyter-book build . --builder html -n -W --keep-going
	# The Chinese book (zh/, generated from the English notebooks and i18n/zh/ by
	# tools/translations.py) is built beside it and served under zh/.
	$(VENV)/bin/jupyter-book build zh --builder html --path-output _build/zh -n -W --keep-going
	rm -rf _build/html/zh && cp -r _build/zh/_build/html _build/html/zh
	@echo "The site is in $(CURDIR)/_build/html: open _build/html/index.html, or run 'make serve'."

serve: book
	@echo "Serving on http://127.0.0.1:$(PORT)/ (Ctrl-C to stop)"
	$(PY) -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

# Every check: library tests, the site in a real browser, and every notebook re-run by nbval
# (outputs the code determines compared exactly; trained and timed results checked by their claims).
test: system-test book
	$(PY) -m pytest tests chapters $(NBVAL) -rs --durations=40

# Library tests only (no notebooks, no browser): seconds, for the edit-test loop.
test-fast: $(STAMP)
	$(PY) -m pytest tests -q -m "not site and not slow"

# Re-execute every notebook in place, in order, writing the outputs back.
execute: $(STAMP)
	$(PY) tools/execute_notebooks.py chapters

# Release check, a cheap stand-in for another machine: the committed notebooks were executed with
# 2 threads; re-run them with 1 thread, whose arithmetic differs in the last bits, and validate.
thread-check: $(STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest chapters $(NBVAL)

# A busy machine: the pages that time or train (tools/busy_check.py says which) re-run by nbval
# while another process keeps one core busy; each must pass, in at most 2.5 times its quiet time.
busy-check: $(STAMP)
	$(PY) tools/busy_check.py chapters -- $(NBVAL)

bench: $(STAMP)
	$(PY) -m bench.run_all

clean:
	rm -rf _build

# Point the book at another repository (a fork): _config.yml's repository.url (and branch),
# then every notebook's setup cell. make set-repo URL=https://github.com/OWNER/REPO [BRANCH=main]
.PHONY: set-repo
ifneq ($(filter set-repo,$(MAKECMDGOALS)),)
ifeq ($(URL),)
$(error usage: make set-repo URL=https://github.com/OWNER/REPO [BRANCH=main])
endif
endif
set-repo: $(STAMP)
	$(PY) tools/colab_setup.py --url "$(URL)" $(if $(BRANCH),--branch "$(BRANCH)") --write

# The Colab path: the setup cell on Colab's own versions (torch, numpy, ipywidgets, ...) in
# .venv-colab/, then the notebooks (up to their training cells) in that venv's kernel.
.PHONY: colab-check
colab-check: $(STAMP)
	$(PY) tools/colab_versions_check.py

# Every notebook on CUDA as Colab runs it: a fresh kernel each, 4 at a time, nothing written back;
# per notebook its time, peak CUDA memory and every error or failed claim (gpu-check/report.json).
# On a GPU machine with its own torch and no venv: make gpu-check GPU_PYTHON=python3
GPU_PYTHON ?= $(PY)
.PHONY: gpu-check
gpu-check: $(if $(filter $(PY),$(GPU_PYTHON)),$(STAMP))
	$(GPU_PYTHON) tools/gpu_check.py chapters --jobs 4 --out gpu-check/
