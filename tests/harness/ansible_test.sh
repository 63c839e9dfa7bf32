#!/usr/bin/env bash
# ansible-test on a copy of the checkout laid out as ansible_collections/gpufleet/gdrcopy (where ansible-test needs
# a collection to be): `sanity` (validate-modules, pylint, yamllint, compile, ... on the Python of this venv) and
# `units` (the plugin tests under tests/unit that need no VM).
#   tests/harness/ansible_test.sh sanity|units [ansible-test options]
# The copy holds what git tracks plus new files git does not ignore, not the link collections/ansible_collections.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/../.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/../.."
what=${1:?sanity or units}; shift
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
root=.cache/ansible-test
dest=$root/ansible_collections/gpufleet/gdrcopy
rm -rf "$dest"; mkdir -p "$dest"
git ls-files -z --cached --others --exclude-standard | grep -zv '^collections/ansible_collections/' \
  | xargs -0 cp --parents -P -t "$dest"
# ansible-test reads the collection from git when there is one: the copy is its own repository (nothing committed).
git -C "$dest" init -q && git -C "$dest" add -A
cd "$dest"
case $what in
  sanity) exec ansible-test sanity --python "$py" --color no "$@" ;;
  # The tests of the plugins (modules, module_utils, action/lookup/test plugins); the rest of tests/unit run playbooks
  # and host helpers, which `make unit` covers.
  units) exec ansible-test units --python "$py" --color no "$@" tests/unit/test_parsers.py tests/unit/test_gdrcopy_info.py \
           tests/unit/test_converged.py tests/unit/test_report.py tests/unit/test_peermem_plan.py tests/unit/test_plugins.py ;;
  *) echo "sanity or units" >&2; exit 2 ;;
esac
