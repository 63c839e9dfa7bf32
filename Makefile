# Two commands do everything (README): `make demo` and `make test`. Each sets itself up first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV ?= .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
TIMED := tests/harness/timed.sh
SCENARIO ?= default
# The scenarios `make test` runs, one after the other (each boots its own VM from the cached images; two at once did
# not pay on CI's 2 cores). default, lifecycle and secureboot boot Debian 12, trixie Debian 13 (with plain Ansible:
# the proof `make demo` gives by hand); image converges a chroot and boots it. With all five, .ci/run of 57f8fc8 took
# 5599 s (93 min, green), past CI's 90: until the lifecycle scenario's steps move onto the trixie VM (issue [7 of 7],
# next), `make test-all` runs it and `make test` does not.
SCENARIOS ?= default secureboot image trixie
SCENARIOS_ALL := default secureboot lifecycle image trixie
# What the run proved: the scenarios' playbooks and fault tasks, the unit tests' fault proofs (tests/harness/proofs.py
# prints the table at the end, and fails the run when a fault case of the README was not proven).
PROOF_LOG := $(CURDIR)/.cache/proofs.jsonl

.PHONY: help setup setup-vm test test-all proofs lint unit coverage collection matrix molecule demo demo-down timings clean bench bench-fleet bench-host bench-report

help:
	@echo "make demo   - boot a throwaway VM, run site.yml against it, print the host's status"
	@echo "make test   - lint, unit tests, the collection, the ansible-core matrix, the molecule scenarios on real"
	@echo "              Debian 12 and 13 kernels in QEMU, then the table of what was proven (what CI runs)"
	@echo "make test-all - make test with the lifecycle scenario too (past CI's 90 minutes for now)"
	@echo "make lint | unit | collection | matrix | molecule [SCENARIO=name] | proofs | timings | clean"

## Set-up: a pinned virtual environment and the test collections, without root. The VM scenarios and the demo
## also need Debian packages (QEMU, OVMF, debootstrap, Chromium): `make setup-vm` installs the missing ones as root.
PIP_QUIET := 2>&1 | { grep -v "^WARNING: Location .* is ignored" || true; }
COLLECTIONS_CACHE := .cache/collections
setup: $(VENV)/.installed $(COLLECTIONS_CACHE)/.installed

setup-vm: setup
	@tests/harness/setup-host.sh

$(VENV)/.installed: requirements.txt requirements-test.txt constraints.txt
	@$(TIMED) venv bash -c 'set -o pipefail; python3 -m venv $(VENV) && $(BIN)/pip install -q --disable-pip-version-check -r requirements-test.txt -c constraints.txt $(PIP_QUIET)'
	@touch $@

# community.general and ansible.posix from the ansible wheel on PyPI (Galaxy is not reachable from CI).
$(COLLECTIONS_CACHE)/.installed: $(VENV)/.installed collections/requirements.yml tests/requirements.yml tests/harness/unpack_collections.py
	@$(BIN)/python tests/harness/unpack_collections.py --dest $(COLLECTIONS_CACHE) $(PIP_QUIET)
	@touch $@

## The test command (README, .ci/run).
# The VM images (Debian 12 and 13, built once, then cached) are made in the background while lint, the unit tests,
# the collection checks and the ansible-core matrix run: on a fresh machine that hides their build (2-4 min) behind
# them; the report benchmark runs once as a smoke test (its ratio is printed, not judged: speed targets are read
# from `make bench`). Then every scenario, one after the other; the table of proofs last (a fault case of the README
# without a passing proof fails the run). Tests that need root or a browser must run here (GDRCOPY_FULL_RUN).
test: setup-vm
	@rm -f .cache/timings.txt $(PROOF_LOG); mkdir -p .cache; \
	{ $(TIMED) vm-images bash -c 'for s in bookworm trixie; do python3 tests/harness/vm.py image --suite $$s || exit 1; done'; } \
	  >.cache/vm-image.log 2>&1 & image=$$!; \
	if ! { $(TIMED) lint $(MAKE) --no-print-directory lint \
	       && $(TIMED) unit $(MAKE) --no-print-directory unit GDRCOPY_FULL_RUN=1 GDRCOPY_PROOF_LOG=$(PROOF_LOG) \
	       && $(TIMED) collection $(MAKE) --no-print-directory collection \
	       && $(TIMED) matrix $(MAKE) --no-print-directory matrix MATRIX_ARGS="--quick --jobs 4" \
	       && $(TIMED) bench-report-smoke python3 benchmarks/report.py --runs 1 --out .cache/bench; }; then \
	  wait $$image; $(MAKE) --no-print-directory proofs; exit 1; fi; \
	wait $$image || { echo "the VM image build failed (.cache/vm-image.log):"; tail -n 30 .cache/vm-image.log; exit 1; }; \
	rc=0; for s in $(SCENARIOS); do \
	  GDRCOPY_PROOF_LOG=$(PROOF_LOG) $(TIMED) molecule-$$s $(MAKE) --no-print-directory molecule SCENARIO=$$s || rc=1; \
	done; \
	$(MAKE) --no-print-directory proofs PROOFS_ARGS=--require || rc=1; exit $$rc

test-all:
	@$(MAKE) --no-print-directory test SCENARIOS="$(SCENARIOS_ALL)"

# The table of what the last make test proved (steps, scenario playbooks, fault cases) and its times.
proofs:
	@python3 tests/harness/proofs.py $(PROOFS_ARGS)

# No root, QEMU, OVMF or browser needed for lint and unit.
lint: setup
	yamllint -s .
	ansible-lint
	python3 tools/argspec_docs.py --check

export GDRCOPY_FULL_RUN
unit: setup
	GDRCOPY_PROOF_LOG=$(GDRCOPY_PROOF_LOG) pytest -q -n auto tests/unit
	@$(MAKE) --no-print-directory coverage

# Line coverage of the decision code that moved from YAML into modules (the build pipeline that the kernel hook
# shares, the load chain, the plan, the verification, the signing key, the files, nvidia-peermem, the status
# verdict and the fleet report) and of those
# modules, by their own tests: below 90 % fails.
COVERED = $(subst $(space),$(comma),$(addprefix */plugins/,module_utils/gdrcopy_pipeline.py modules/gdrcopy_build.py \
	module_utils/gdrcopy_load.py modules/gdrcopy_load.py module_utils/gdrcopy_plan.py modules/gdrcopy_verify.py \
	module_utils/gdrcopy_mok.py modules/gdrcopy_mok.py module_utils/gdrcopy_fileops.py modules/gdrcopy_files.py \
	module_utils/gdrcopy_peermem.py modules/gdrcopy_peermem.py module_utils/gdrcopy_fleet.py module_utils/gdrcopy_uninstall.py \
	module_utils/gdrcopy_verdict.py module_utils/gdrcopy_report.py))
space := $(subst ,, )
comma := ,
coverage: setup
	@mkdir -p .cache
	GDRCOPY_PROOF_LOG= coverage run --data-file=.cache/coverage --include='$(COVERED)' -m pytest -q -p no:cacheprovider \
	  tests/unit/test_build_module.py tests/unit/test_kernel_hook.py tests/unit/test_load_module.py \
	  tests/unit/test_plan.py tests/unit/test_verify_module.py tests/unit/test_mok_module.py \
	  tests/unit/test_files_module.py tests/unit/test_peermem_module.py tests/unit/test_fleet.py tests/unit/test_uninstall.py tests/unit/test_rollout.py \
	  tests/unit/test_controller_signing.py tests/unit/test_backend.py tests/unit/test_gdrcopy_info.py \
	  tests/unit/test_parsers.py tests/unit/test_gpu_schema.py tests/unit/test_report.py tests/unit/test_upstream.py
	coverage report --data-file=.cache/coverage --show-missing --fail-under=90

# The artifact: built, installed into an empty collections path and run from outside the checkout
# (tests/harness/collection_check.py); ansible-test sanity and units on a copy laid out as ansible_collections/.
collection: setup
	python3 tests/harness/collection_check.py --work .cache/collection-check
	tests/harness/ansible_test.sh sanity
	tests/harness/ansible_test.sh units

# The unit tests and the installed collection on every ansible-core minor of meta/runtime.yml with each Python it
# supports (tests/harness/matrix.py, 13 rows); make test runs MATRIX_ARGS="--quick --jobs 4": one row per minor but
# the pinned one (make unit and make collection run it), every Python once, the four at once (a row waits much of
# its time: the source tests' retry delays, subprocesses; two at a time took 700 s on CI's 2 cores).
matrix: setup
	python3 tests/harness/matrix.py $(MATRIX_ARGS)

molecule: setup-vm
	molecule test -s $(SCENARIO)

## Benchmarks (not CI): ratios measured in one run, printed and saved under benchmarks/results/.
bench-fleet: setup-vm
	python3 benchmarks/fleet.py $(BENCH_ARGS)

bench-host: setup-vm
	python3 benchmarks/host.py $(BENCH_ARGS)

bench-report: setup
	python3 benchmarks/report.py $(BENCH_ARGS)

bench: bench-host bench-fleet bench-report

## The main job against a throwaway VM.
demo: setup-vm
	@tests/harness/demo.sh

demo-down:
	@python3 tests/harness/vm.py down --state .cache/demo/vm

timings:
	@echo "--- where the time went ---"; cat .cache/timings.txt 2>/dev/null || true

clean: demo-down
	rm -rf $(VENV) .cache/demo .pytest_cache
