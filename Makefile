# Two commands for a fresh machine (each sets itself up first):
#   make demo   - compile, check against torch and time the reference kernels on the default target
#   make test   - run the test suite
# The virtual environment sees the system's packages, so a torch that is already installed
# (e.g. a CUDA build on a GPU machine) is reused instead of downloaded.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tilecraft-installed

.PHONY: demo test setup clean

# Set-up on a fresh machine, ~15 s (was ~38; session 25): the venv borrows the system's pip when it has one
# (no ensurepip: ~3 s), pip does not byte-compile what it installs (all of torch and ray: ~12 s; the test
# and demo commands below write the .pyc of the modules a run imports, once), and tilecraft is built with
# the venv's own setuptools (>= 61, which torch brings) rather than in an isolated build env (~3 s).
PIP := $(PY) -m pip install -q --no-compile --disable-pip-version-check
$(STAMP): pyproject.toml
	python3 -m venv --without-pip --system-site-packages $(VENV)
	$(PY) -m pip --version >/dev/null 2>&1 || python3 -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PIP) torch==2.13.0
	if $(PY) -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 61)" 2>/dev/null; \
	then $(PIP) --no-build-isolation -e '.[test]'; \
	else $(PIP) -e '.[test]'; fi
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m tilecraft demo

# pytest-xdist: one worker per core plus one (a worker waiting on Ray, a subprocess or a timeout leaves
# its core to the others: 415 s -> 377-384 s on the 2-core machine at the same commit, session 22);
# a test file stays on one worker (its module fixtures: the Ray cluster, the fuzzer's programs), and
# the files take turns in the order tests/conftest.py gives them (the longest first: LONG_FILES).
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: the ~60 Python processes a run starts
# (CLI and example subprocesses, Ray and fuzzer workers) then load tilecraft's .pyc (0.4 CPU-s each),
# and a second run reuses pytest's rewritten test modules (7.5 CPU-s a worker).  The hypothesis and
# pytest-benchmark plugins a system Python may carry are not used here (0.8 s a process to load).
# OMP_WAIT_POLICY=PASSIVE (unless set): torch's own OpenMP threads sleep after a parallel op instead of
# spinning on cores the other workers need (tilecraft's kernels wait passively anyway, runtime/openmp.py):
# tests/cpu on three workers 185 -> 176 CPU-s (session 25).
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$((n + 1)))
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-PASSIVE} $(PY) -m pytest -q -p no:cacheprovider -p no:hypothesispytest -p no:benchmark \
		-n $(WORKERS) --dist loadfile --no-loadscope-reorder

clean:
	rm -rf $(VENV)
