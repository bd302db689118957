# The two commands a user needs are `make study` and `make test`; both set up first.
VENV := .venv
STAMP := $(VENV)/.shoal-setup

.PHONY: setup study test clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

study: setup
	$(VENV)/bin/shoal study

test: setup
	$(VENV)/bin/python -m pytest

clean:
	rm -rf $(VENV) build src/*.egg-info
