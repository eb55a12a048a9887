# Every target builds and uses .venv from this project's own files.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NATIVE_SRC := src/paddedcell/redactor/_native.c
NATIVE_STAMP := $(VENV)/.native

.PHONY: venv demo test test-unprivileged bench binary binary-onefile clean

# compileall: bytecode at install, as pip does for a wheel; where PYTHONDONTWRITEBYTECODE
# is set an editable install would otherwise compile PaddedCell's modules on every start.
# It runs at every `make venv` (a no-op when the bytecode is fresh): after a pull or a
# rebase, the changed modules are compiled again, not at each CLI start.
venv: $(STAMP) $(NATIVE_STAMP)
	@# setuptools (PyInstaller's dependency, setup.py's build backend) installs a .pth that
	@# imports _distutils_hack at every interpreter start (~0.3-0.6 ms of each pass_mgr get,
	@# pcexec, ...). Nothing here imports distutils, and setuptools loads its own when
	@# imported (the native build, PyInstaller): the shim only costs. Here, not in the
	@# install rule, so that a venv made before this rule loses it too.
	@rm -f $(VENV)/lib/python*/site-packages/distutils-precedence.pth
	@$(BIN)/python -m compileall -q src

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q src
	touch $(STAMP)

# The redactor's optional C gates (src/paddedcell/redactor/_native.c, built in place by the
# editable install above), rebuilt when the C file changes; the old module is removed first,
# with its build directory, so a C edit that does not build leaves none (the pure-Python
# gates then run, never stale C).
# No compiler: a warning, and the same redactor in Python (setup.py: optional=True).
$(NATIVE_STAMP): $(STAMP) $(NATIVE_SRC) setup.py
	rm -rf build/native src/paddedcell/redactor/_native.*.so src/paddedcell/redactor/_native.*.pyd
	$(BIN)/python setup.py --quiet build_ext --inplace --build-temp build/native --build-lib build/native
	touch $(NATIVE_STAMP)

demo: venv
	$(BIN)/python -m paddedcell.demo

# make test runs the suite and, as root, beside it scripts/test-unprivileged.sh: the tests
# that touch identity, processes and files again as an ordinary user, in a fresh copy
# (scripts/test-passes.sh runs both and fails if either does).
# make test also needs Node 24 and OpenClaw 2026.9.6 (plugin tests, e2e suite against a
# real gateway): scripts/openclaw-env.sh installs them into ~/.cache/paddedcell-openclaw
# (PADDEDCELL_OPENCLAW_CACHE overrides) and fails loudly when it cannot.
test: venv binary
	@scripts/openclaw-env.sh >/dev/null || { echo "make test: cannot install Node 24 + OpenClaw 2026.9.6 (see the message above); the e2e suite needs them" >&2; exit 1; }
	@scripts/mcp-clients-env.sh >/dev/null || { echo "make test: cannot install the MCP clients (TypeScript SDK, Codex, Claude Code; see the message above); tests/e2e/test_mcp_clients.py needs them" >&2; exit 1; }
	@scripts/ensure-test-tools.sh
	BIN=$(BIN) PYTHON=$(PYTHON) scripts/test-passes.sh

# The second pass alone: as root, the sandbox, pcexec, pass_mgr, daemon, demo and e2e
# tests again as an ordinary user it creates (a no-op when you are not root).
test-unprivileged:
	PYTHON=$(PYTHON) scripts/test-unprivileged.sh

bench: venv
	$(BIN)/python benchmarks/redaction.py
	$(BIN)/python benchmarks/vault.py
	$(BIN)/python benchmarks/restart_api.py --samples 500
	$(BIN)/python benchmarks/supervisor.py

# pass_mgr as a PyInstaller binary: onedir (dist/pass_mgr/pass_mgr, fast start) and
# onefile (dist/onefile/pass_mgr). Reproducible: a fixed hash seed and the last
# commit's time as SOURCE_DATE_EPOCH. Rebuilt only when a file it bundles changes.
PASS_MGR_SOURCES := $(wildcard src/paddedcell/__init__.py src/paddedcell/config.py \
	src/paddedcell/config_base.py \
	src/paddedcell/exits.py src/paddedcell/agent_session.py src/paddedcell/cli/__init__.py \
	src/paddedcell/cli/pass_mgr*.py src/paddedcell/session/*.py \
	src/paddedcell/vault/*.py src/paddedcell/egress/__init__.py \
	src/paddedcell/egress/binding.py src/paddedcell/egress/policy.py) \
	packaging/pass_mgr.spec packaging/pass_mgr_entry.py packaging/pass_mgr_preboot.py
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 1700000000)
PYINSTALLER := PYTHONHASHSEED=1 SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/pyinstaller \
	--noconfirm --log-level WARN

binary: dist/pass_mgr/pass_mgr

dist/pass_mgr/pass_mgr: $(STAMP) $(PASS_MGR_SOURCES)
	$(PYINSTALLER) --workpath build/pyinstaller --distpath dist packaging/pass_mgr.spec
	touch $@

binary-onefile: dist/onefile/pass_mgr

dist/onefile/pass_mgr: $(STAMP) $(PASS_MGR_SOURCES)
	PASS_MGR_ONEFILE=1 $(PYINSTALLER) --workpath build/pyinstaller-onefile \
		--distpath dist/onefile packaging/pass_mgr.spec
	touch $@

clean:
	rm -rf $(VENV) build dist *.egg-info
	rm -f src/paddedcell/redactor/_native.*.so src/paddedcell/redactor/_native.*.pyd
