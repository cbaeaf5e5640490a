# The two commands that matter: `make run` and `make test`. Both work on a fresh clone with
# Python 3.11 and nothing else (embedded defaults: SQLite, in-memory channel layer, filesystem
# Celery broker, offline model provider).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PORT   ?= 8000

.PHONY: run test test-slow test-browser test-sqlite lint fmt migrate demo demo-passwords check-deploy clean vendor

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.base-installed: requirements/base.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements/base.txt
	touch $@

$(VENV)/.dev-installed: requirements/base.txt requirements/dev.txt requirements/embeddings.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements/dev.txt
	touch $(VENV)/.base-installed $@

migrate: $(VENV)/.base-installed
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py migrate --noinput

demo: migrate
	@DEBUG=$${DEBUG:-1} $(BIN)/python manage.py setup_demo --url http://127.0.0.1:$(PORT)/

demo-passwords: migrate
	@DEBUG=$${DEBUG:-1} $(BIN)/python manage.py setup_demo --reset-passwords --url http://127.0.0.1:$(PORT)/

# Web + Celery worker with embedded beat; the demo's box (URL and log-ins) comes last before
# the processes' logs.
run: demo
	@DEBUG=$${DEBUG:-1} PORT=$(PORT) $(BIN)/honcho start -f Procfile.dev -p $(PORT)

# Two pytest-xdist workers (each with its own test database and Redis database, see
# tests/settings.py); the tests that start processes of their own share one worker
# (tests/conftest.py, PROCESS_TESTS). PYTEST_ARGS="-n 0" runs serially.
test: $(VENV)/.dev-installed
	$(BIN)/pytest -n 2 --dist loadgroup -m "not slow and not browser" $(PYTEST_ARGS)

test-slow: $(VENV)/.dev-installed
	$(BIN)/pytest -m "slow" $(PYTEST_ARGS)

# Real-browser tests: Playwright driving Debian's Chromium (/usr/bin/chromium) against the
# ASGI app served by uvicorn; screenshots in test-artifacts/.
test-browser: $(VENV)/.dev-installed
	$(BIN)/pytest -m browser $(PYTEST_ARGS)

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/lint-imports --no-cache
	$(BIN)/vulture

# Re-fetch the vendored front-end libraries from npm (the only target that needs npm) and check
# them against static/vendor/MANIFEST.json; `make run` and `make test` use the files as committed.
vendor: | $(BIN)/python
	$(BIN)/python scripts/vendor.py --fetch

fmt: $(VENV)/.dev-installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The release step's collectstatic (the manifest storage fails it on any file a shipped file
# refers to but that is not shipped), then Django's deployment checks.
check-deploy: $(VENV)/.base-installed
	DEBUG=0 $(BIN)/python manage.py collectstatic --noinput
	DEBUG=0 SECRET_KEY=$$(python3 -c 'import secrets;print(secrets.token_urlsafe(50))') \
	  ALLOWED_HOSTS=chat.example.com $(BIN)/python manage.py check --deploy --fail-level WARNING

clean:
	rm -rf $(VENV) var staticfiles
