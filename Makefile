# ablate: the commands a user runs.
CARGO ?= cargo
ABLATE := target/release/ablate

.PHONY: test ablate build release check-suite plan

## make test: the whole test suite (unit, integration, CLI) and the suite proof.
test:
	$(CARGO) test --all-targets
	$(CARGO) run --quiet -- suite check tasks/core

## make ablate: bare vs full harness and leave-one-out on tasks/core.
ablate: release
	$(ABLATE) run configs/ablate.toml

release:
	$(CARGO) build --release

build:
	$(CARGO) build

check-suite: build
	target/debug/ablate suite check tasks/core

plan: build
	target/debug/ablate plan configs/ablate.toml
