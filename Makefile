# Two commands do everything (README): `make demo` and `make test`. Each sets itself up first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV ?= .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
TIMED := tests/harness/timed.sh
SCENARIO ?= default
# The scenarios `make test` runs, in order (each builds on the cached VM image). `make test-all` adds the lifecycle
# scenario (release changes, rollback, upstream's install, uninstall, batches, the DMA-BUF backend) and the image
# scenario (golden image + kernel hook): with lifecycle CI took 5433 s on its 2 cores (2026-12-07), past its 90 min.
# Issue [7 of 7] brings them back into make test by making the scenarios cheaper.
SCENARIOS ?= default secureboot
SCENARIOS_ALL := default secureboot lifecycle image
# The scenarios of SCENARIOS that `make test` runs beside the others (none by default), from the moment the checks
# passed and the VM image is there; while two run at once, each VM gets one vCPU (GDRCOPY_VM_CPUS,
# tests/harness/vm.py). On CI's 2 cores it did not pay: TCG keeps both cores busy either way (lifecycle beside the
# others with two vCPUs each: 4134 s, alone 1686 s; with one vCPU each, default took 2061 s against 943 s alone).
SCENARIOS_BESIDE ?=
VM_CPUS_BESIDE := $(if $(filter $(SCENARIOS_BESIDE),$(SCENARIOS)),1,)

.PHONY: help setup setup-vm test test-all lint unit coverage collection matrix molecule demo demo-down timings clean bench bench-fleet bench-host bench-report

help:
	@echo "make demo   - boot a throwaway VM, run site.yml against it, print the host's status"
	@echo "make test   - lint, unit tests, molecule scenario(s) on real kernels in QEMU, then make demo (what CI runs)"
	@echo "make test-all - make test plus the lifecycle and image scenarios"
	@echo "make lint | unit | collection | matrix | molecule [SCENARIO=name] | timings | clean"

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
# The VM image (built once, then cached) is made in the background while lint, the unit tests, the collection
# checks and the ansible-core matrix run: on a fresh machine that hides its build (3-4 min) behind them. Then the
# scenarios of SCENARIOS_BESIDE (the longest) run in the background, each with its own VM, their output printed when
# they end, while the other scenarios run in order. A VM under TCG waits on the controller much of the time
# (reboots, MokManager's countdowns, Ansible's own work), so two of them on two cores finish well before the two
# would one after the other; the checks before them are CPU-bound, which is why nothing runs beside those. They run
# under Mitogen (molecule.yml); `make demo` last runs site.yml twice with plain Ansible, as a user does. Tests that
# need root or a browser must run here (GDRCOPY_FULL_RUN).
test: setup-vm
	@rm -f .cache/timings.txt; mkdir -p .cache; \
	$(TIMED) vm-image python3 tests/harness/vm.py image >.cache/vm-image.log 2>&1 & image=$$!; \
	if ! { $(TIMED) lint $(MAKE) --no-print-directory lint \
	       && $(TIMED) unit $(MAKE) --no-print-directory unit GDRCOPY_FULL_RUN=1 \
	       && $(TIMED) collection $(MAKE) --no-print-directory collection \
	       && $(TIMED) matrix $(MAKE) --no-print-directory matrix MATRIX_ARGS=--quick; }; then \
	  wait $$image; exit 1; fi; \
	wait $$image || { echo "the VM image build failed (.cache/vm-image.log):"; tail -n 30 .cache/vm-image.log; exit 1; }; \
	( rc=0; for s in $(filter $(SCENARIOS_BESIDE),$(SCENARIOS)); do \
	    GDRCOPY_VM_CPUS=$(VM_CPUS_BESIDE) $(TIMED) molecule-$$s $(MAKE) --no-print-directory molecule SCENARIO=$$s \
	      >.cache/molecule-$$s.log 2>&1 || rc=1; \
	  done; exit $$rc ) & beside=$$!; \
	rc=0; for s in $(filter-out $(SCENARIOS_BESIDE),$(SCENARIOS)); do \
	  GDRCOPY_VM_CPUS=$(VM_CPUS_BESIDE) $(TIMED) molecule-$$s $(MAKE) --no-print-directory molecule SCENARIO=$$s || rc=1; \
	done; \
	wait $$beside || rc=1; \
	for s in $(filter $(SCENARIOS_BESIDE),$(SCENARIOS)); do \
	  echo "--- molecule $$s (ran beside the others) ---"; cat .cache/molecule-$$s.log; done; \
	$(TIMED) demo $(MAKE) --no-print-directory demo || rc=1; \
	$(MAKE) --no-print-directory timings; exit $$rc

test-all:
	@$(MAKE) --no-print-directory test SCENARIOS="$(SCENARIOS_ALL)"

# No root, QEMU, OVMF or browser needed for lint and unit.
lint: setup
	yamllint -s .
	ansible-lint
	python3 tools/argspec_docs.py --check

export GDRCOPY_FULL_RUN
unit: setup
	pytest -q -n auto tests/unit
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
	coverage run --data-file=.cache/coverage --include='$(COVERED)' -m pytest -q -p no:cacheprovider \
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
# supports (tests/harness/matrix.py, 13 rows); make test runs MATRIX_ARGS=--quick: one row per minor but the pinned
# one (make unit and make collection run it), every Python once.
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
