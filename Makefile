# ablate: the commands a user runs.
CARGO ?= cargo
ABLATE := target/release/ablate

.PHONY: test ablate build release check-suite plan model model-small screenshot bench-report

## make test: the whole test suite (unit, integration, CLI) and the suite proof.
test:
	$(CARGO) test --all-targets
	$(CARGO) run --quiet -- suite check tasks/core
	@echo "--- statistics simulations (coverage, A/A and regression gates) ---"
	$(CARGO) test --quiet --lib simulation -- --nocapture

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

## make model: fetch and verify the default GGUF model into models/ (no-op when present).
model:
	bash scripts/fetch-model.sh default

## make model-small: the small SmolLM2-135M model used by tests.
model-small:
	bash scripts/fetch-model.sh small

## make screenshot RUN=results/<run>: render report.html in headless Chromium to report.png.
screenshot:
	bash scripts/screenshot.sh $(RUN)

## make bench-report: time and peak memory of `ablate report` on 10k, 100k and 1M records.
bench-report:
	bash benches/report.sh
