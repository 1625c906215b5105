# garden — two commands: `make demo` runs the demo on the embedded default, `make test` runs
# the suite (against PostgreSQL and Redis when they answer, see scripts/services_env.py).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint run worker clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	@$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	@touch $(STAMP)

demo: $(STAMP)
	@env -u DATABASE_URL -u REDIS_URL $(PY) manage.py demo

test: $(STAMP)
	@eval "$$($(PY) scripts/services_env.py)" && $(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	@$(PY) bench/bench_projection.py

lint: $(STAMP)
	@$(VENV)/bin/ruff check .

run: $(STAMP)
	@$(PY) manage.py migrate --verbosity 0 && $(PY) -m daphne -b 127.0.0.1 -p 8000 config.asgi:application

worker: $(STAMP)
	@$(PY) -m celery -A config worker --loglevel=info

clean:
	rm -rf var/ .pytest_cache .ruff_cache .hypothesis
