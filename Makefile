# garden — two commands: `make demo` runs the demo on the embedded default, `make test` runs
# the suite (against PostgreSQL and Redis when they answer, see scripts/services_env.py).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-peer faults lint run worker screenshots clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@touch $(STAMP)

demo: $(STAMP)
	@env -u DATABASE_URL -u REDIS_URL $(PY) manage.py demo

# Each run gets its own var/ (broker files, SQLite test database, locks), so two runs on one
# machine never consume each other's tasks. When the suite runs on PostgreSQL, the step
# machinery's tests ($(SQLITE_TESTS): the group loop and the 1:1 loop, approvals, Stop,
# rollover, retries, the critical writes' ORM form, costs, search and export) also run on the
# embedded default that `make demo` and `make run` use (SQLite, the filesystem broker, no
# Redis), beside the main run. Its output follows the main run's; either failing fails
# `make test`. SQLITE_TESTS=tests/groups runs every group test there; SQLITE_TESTS= skips it.
#
# A whole run on the services (no PYTEST_ARGS) also runs $(SPLIT_TESTS) — the dashboard's
# browser and server tests, the Redis restarts and the worker stopped under a served site,
# which mostly wait on
# pages, sockets and processes — as a second PostgreSQL run
# beside the main one, on services of its own (scripts/split_env.py: another database, the next
# Redis database, its own var/ and cache prefix), so the suite takes about half as long on two
# cores. Its output follows the main run's; SPLIT_TESTS= keeps everything in the main run.
SQLITE_TESTS ?= $(addprefix tests/groups/test_,$(addsuffix .py,loop loop_budget one_to_one \
  agent_conversations approvals stopped_turns memory_rollover task_retries statements costs \
  search export steps_in_place))
SPLIT_TESTS ?= tests/dashboard tests/garden/test_redis_outage.py tests/garden/test_worker_stop.py
test: $(STAMP)
	@export GARDEN_VAR_DIR=$$(mktemp -d -t garden-test-XXXXXX) && \
	  export GARDEN_CACHE_PREFIX=$$(basename $$GARDEN_VAR_DIR) && \
	  eval "$$($(PY) scripts/services_env.py)" && \
	  lite=""; if [ -n "$$DATABASE_URL" ] && [ -n "$(SQLITE_TESTS)" ]; then \
	    lite=$$(mktemp -d -t garden-test-sqlite-XXXXXX); mkdir "$$lite/var"; \
	    ( start=$$(date +%s); \
	      env -u DATABASE_URL -u REDIS_URL -u GARDEN_REQUIRE_SERVICES GARDEN_VAR_DIR="$$lite/var" \
	        $(PY) -m pytest $(SQLITE_TESTS) -p no:cacheprovider >"$$lite/log" 2>&1; \
	      echo $$? >"$$lite/status"; echo $$(( $$(date +%s) - start )) >"$$lite/seconds" ) & \
	  fi; \
	  split=""; ignore=""; \
	  if [ -n "$$DATABASE_URL" ] && [ -n "$$REDIS_URL" ] && [ -n "$(SPLIT_TESTS)" ] && [ -z "$(PYTEST_ARGS)" ]; then \
	    split=$$(mktemp -d -t garden-test-split-XXXXXX); mkdir "$$split/var"; \
	    for t in $(SPLIT_TESTS); do ignore="$$ignore --ignore=$$t"; done; \
	    ( start=$$(date +%s); \
	      eval "$$($(PY) scripts/split_env.py split)"; \
	      GARDEN_VAR_DIR="$$split/var" GARDEN_CACHE_PREFIX=$$(basename $$split) \
	        $(PY) -m pytest $(SPLIT_TESTS) -p no:cacheprovider >"$$split/log" 2>&1; \
	      s=$$?; echo $$(( $$(date +%s) - start )) >"$$split/seconds"; echo $$s >"$$split/status" ) & \
	  fi; \
	  $(PY) -m pytest $$ignore $(PYTEST_ARGS); status=$$?; \
	  if [ -n "$$split" ]; then \
	    while [ ! -f "$$split/status" ]; do sleep 1; done; split_status=$$(cat "$$split/status"); \
	    echo "== $(SPLIT_TESTS) beside it, on services of their own, $$(cat "$$split/seconds") s =="; \
	    if [ "$$split_status" = 0 ]; then tail -n 1 "$$split/log"; else cat "$$split/log"; status=1; fi; \
	    rm -rf "$$split"; \
	  fi; \
	  if [ -n "$$lite" ]; then \
	    wait; lite_status=$$(cat "$$lite/status"); \
	    echo "== $(words $(SQLITE_TESTS)) test files on the embedded default (SQLite, no Redis), $$(cat "$$lite/seconds") s =="; \
	    if [ "$$lite_status" = 0 ]; then tail -n 1 "$$lite/log"; else cat "$$lite/log"; status=1; fi; \
	    rm -rf "$$lite"; \
	  fi; \
	  rm -rf "$$GARDEN_VAR_DIR"; exit $$status

# Benchmarks on PostgreSQL and Redis (their own database garden_bench and Redis db 2), about ten
# minutes on 2 cores: projection cost, loop overhead per call vs a bare Celery hop and the floor
# step (also written to $(BENCH_JSON)), load (200 groups x 12 calls on a simulated 1 s
# provider, 1 and 2 workers; then a thousand rooms at once on a 10 s provider, 2 workers; both
# also as JSON beside it); and a step's overhead with traces and metrics on vs off.
BENCH_JSON ?= var/bench-loop.json
bench: $(STAMP)
	@mkdir -p $(dir $(BENCH_JSON))
	@$(PY) bench/bench_projection.py
	@$(PY) bench/bench_loop.py --groups 40 --workers 1 2 --json $(BENCH_JSON)
	@$(PY) bench/bench_load.py --groups 200 --latency 1 --workers 1 2 --json $(dir $(BENCH_JSON))bench-load.json
	@$(PY) bench/bench_load.py --groups 1000 --latency 10 --workers 2 --json $(dir $(BENCH_JSON))bench-load-1000.json
	@$(PY) bench/bench_observe.py --json var/bench-observe.json

# A peer measured on the same machine: LangGraph's durable step (its PostgreSQL checkpointer,
# durability="sync") in bench/bench_peer.py, on its own database garden_peer (PEER_DATABASE_URL),
# under a minute. It runs in its own venv $(PEER_VENV) with pyproject.toml's `peer` pins, never in
# garden's. When `make bench` has written $(BENCH_JSON), the ratios garden ÷ LangGraph follow.
PEER_VENV  := .venv-peer
PEER_PY    := $(PEER_VENV)/bin/python
PEER_STAMP := $(PEER_VENV)/.installed
PEER_JSON  ?= var/bench-peer.json
$(PEER_STAMP): pyproject.toml
	@test -x $(PEER_PY) || $(PYTHON) -m venv $(PEER_VENV)
	@$(PYTHON) -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["peer"], sep="\n")' >$(PEER_VENV)/peer-requirements.txt
	@$(PEER_PY) -m pip install --quiet --disable-pip-version-check -r $(PEER_VENV)/peer-requirements.txt
	@touch $(PEER_STAMP)

bench-peer: $(PEER_STAMP)
	@mkdir -p $(dir $(PEER_JSON))
	@$(PEER_PY) bench/bench_peer.py --json $(PEER_JSON)
	@if [ -f $(BENCH_JSON) ]; then $(PEER_PY) bench/peer_ratio.py $(BENCH_JSON) $(PEER_JSON); fi

# The fault harness (~6 minutes on 2 cores): SIGKILL/SIGSTOP of real workers, Redis restarts
# (a private redis-server), dropped PostgreSQL connections, a faulty provider; prints a table of
# trials and violations and fails on any. Scale down with FAULTS_ARGS="--trials 40"; run it
# behind a PgBouncer of its own in transaction mode with FAULTS_ARGS="--pgbouncer".
faults: $(STAMP)
	@$(PY) bench/faults.py $(FAULTS_ARGS)

# Style, formatting, migrations in step with the models, and the layers (pyproject.toml's
# import-linter contracts: imports run one way, from config down to the garden runtime).
lint: $(STAMP)
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@d=$$(mktemp -d -t garden-lint-XXXXXX) && env -u DATABASE_URL -u REDIS_URL GARDEN_VAR_DIR=$$d \
	  $(PY) manage.py makemigrations --check --dry-run; s=$$?; rm -rf "$$d"; exit $$s
	@$(VENV)/bin/lint-imports

# The dashboard at http://$(HOST):$(PORT)/ (make run PORT=8001 HOST=0.0.0.0); without REDIS_URL
# its worker and beat run in the same process.
HOST ?= 127.0.0.1
PORT ?= 8000
run: $(STAMP)
	@$(PY) manage.py migrate --verbosity 0 && $(PY) manage.py rundashboard $(HOST):$(PORT)

worker: $(STAMP)
	@$(PY) -m celery -A config worker --pool=threads --concurrency=8 --loglevel=info

# PNGs of the dashboard in docs/screenshots/, from a fresh seeded database (needs /usr/bin/chromium).
screenshots: $(STAMP)
	@env -u DATABASE_URL -u REDIS_URL $(PY) -m dashboard.screenshots

clean:
	rm -rf var/ .pytest_cache .ruff_cache .hypothesis
