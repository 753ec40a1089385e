# The two commands: `make demo` runs the product locally, `make test` runs the suite.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/.tools/bin:$(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install tools test lint crds dev dev-down demo bench clean

$(PY):
	python3 -m venv $(VENV)

# Reinstalls only when the dependency declarations change.
$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

install: $(STAMP)

.tools/bin/helm .tools/bin/kubectl: tools/install-kube-tools.sh | $(STAMP)
	PYTHON=$(CURDIR)/$(PY) tools/install-kube-tools.sh

.tools/bin/helm3: tools/install-helm3.sh | $(STAMP)
	PYTHON=$(CURDIR)/$(PY) tools/install-helm3.sh

tools: .tools/bin/helm .tools/bin/kubectl .tools/bin/helm3

lint: install
	$(VENV)/bin/ruff check operator tests bench
	$(VENV)/bin/lint-imports

crds: install
	$(PY) -m sessionops.api.crds

# pytest exits 5 when no test is collected: make treats any non-zero exit as failure.
test: install tools lint
	$(VENV)/bin/pytest -q -p no:cacheprovider $(PYTEST_ARGS)

dev: install tools
	$(PY) -m tests.localstack up

dev-down:
	$(PY) -m tests.localstack down

demo: dev
	$(PY) -m tests.localstack demo

bench: install tools
	$(PY) bench/admission.py

clean:
	rm -rf $(VENV) .tools .dev
