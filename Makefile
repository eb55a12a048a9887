# Every target builds and uses .venv from this project's own files.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test bench binary binary-onefile clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: venv
	$(BIN)/python -m paddedcell.demo

test: venv
	$(BIN)/pytest -q

bench: venv
	$(BIN)/python benchmarks/redaction.py

clean:
	rm -rf $(VENV) build dist *.egg-info
