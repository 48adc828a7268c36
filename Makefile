# Two commands for a fresh machine (each sets itself up first):
#   make demo   - compile, check against torch and time the reference kernels on the default target
#   make test   - run the test suite
# The virtual environment sees the system's packages, so a torch that is already installed
# (e.g. a CUDA build on a GPU machine) is reused instead of downloaded.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tilecraft-installed

.PHONY: demo test setup clean

$(STAMP): pyproject.toml
	python3 -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(PY) -m tilecraft demo

# one pytest-xdist worker per core; a test file stays on one worker (its module fixtures: the Ray cluster)
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n auto --dist loadfile

clean:
	rm -rf $(VENV)
