# The two commands: `make demo` runs the product locally, `make test` runs the suite.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/.tools/bin:$(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install tools test test-fast lint crds dev dev-down demo bench clean

$(PY):
	python3 -m venv $(VENV)

# Reinstalls only when the dependency declarations change. The test cluster (tests/testcluster)
# is a package of its own that the product's tests depend on.
$(STAMP): pyproject.toml tests/testcluster/pyproject.toml constraints.txt | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev,cli]'
	$(PY) -m pip install --quiet -c constraints.txt -e 'tests/testcluster[test]'
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

# Parallel by test module (module-scoped stacks stay on one worker); TEST_WORKERS=0 runs serially.
# The suite's processes mostly wait on each other, so more workers than cores pays off.
TEST_WORKERS ?= 3

# pytest exits 5 when no test is collected: make treats any non-zero exit as failure.
test: install tools lint
	$(VENV)/bin/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The unit tier only: pure tests, no server, database, subprocess or binary (tests/conftest.py).
test-fast: install
	$(VENV)/bin/pytest -q -p no:cacheprovider -m unit $(PYTEST_ARGS)

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
