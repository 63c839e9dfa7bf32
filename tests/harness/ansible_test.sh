#!/usr/bin/env bash
# ansible-test on a copy of the checkout laid out as ansible_collections/gpufleet/gdrcopy (where ansible-test needs
# a collection to be): `sanity` (validate-modules, pylint, pep8, yamllint, compile, ... on the Python of this venv)
# of the built artifact's content, and `units` (the plugin tests under tests/unit) of the checkout.
#   tests/harness/ansible_test.sh sanity|units [ansible-test options]
# ansible-test runs --local from a virtual environment of its own (.cache/sanity-venv: the pinned ansible-core and
# ansible-test's requirement files); the pip bootstrap script it would download for its per-test environments comes
# from tests/harness/get_pip.py instead.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.cache/sanity-venv
what=${1:?sanity or units}; shift
case $what in sanity|units) ;; *) echo "sanity or units" >&2; exit 2 ;; esac
core=$(sed -n 's/^ansible-core==//p' requirements.txt)
ansible_test_dir() { "$venv/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))'; }
if [ ! -f "$venv/.installed-$core" ]; then
  rm -rf "$venv"; python3 -m venv "$venv"
  # ansible-core first: its ansible-test names the requirement files of the second install
  "$venv/bin/pip" install -q --disable-pip-version-check "ansible-core==$core" 2>&1 | { grep -v '^WARNING: Location' || true; }
  reqs=$(ansible_test_dir)/_data/requirements
  args=(-r "$reqs/units.txt")
  for f in "$reqs"/sanity.*.txt; do args+=(-r "$f"); done
  "$venv/bin/pip" install -q --disable-pip-version-check "ansible-core==$core" "${args[@]}" 2>&1 \
    | { grep -v '^WARNING: Location' || true; }
  touch "$venv/.installed-$core"
fi
export PATH="$PWD/$venv/bin:$PATH"
# The pip bootstrap ansible-test runs in each of its environments, from the cache it looks in first.
pip_version=$(sed -n "s/^ *pip='\([0-9.]*\)',$/\1/p" "$(ansible_test_dir)/_internal/python_requirements.py")
mkdir -p ~/.ansible/test/cache
cp tests/harness/get_pip.py ~/.ansible/test/cache/"get_pip_${pip_version//./_}.py"
py=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
root=.cache/ansible-test
dest=$root/ansible_collections/gpufleet/gdrcopy
rm -rf "$dest"; mkdir -p "$dest"
if [ "$what" = sanity ]; then
  # sanity checks what users install: the artifact's content (galaxy.yml's build_ignore applied) and tests/sanity.
  ansible-galaxy collection build --force --output-path "$root/dist" . >/dev/null
  tar -xzf "$root"/dist/gpufleet-gdrcopy-*.tar.gz -C "$dest"
  rm -f "$dest/MANIFEST.json" "$dest/FILES.json"
  cp --parents -r tests/sanity "$dest"
else
  # units: the checkout as git sees it (tests and their fixtures), not the link collections/ansible_collections.
  git ls-files -z --cached --others --exclude-standard | grep -zv '^collections/ansible_collections/' \
    | xargs -0 cp --parents -P -t "$dest"
  # the test-only collections make setup unpacked (git ignores .cache, so the copy's index does not hold it)
  mkdir -p "$dest/.cache" && ln -s "$PWD/.cache/collections" "$dest/.cache/collections"
fi
# ansible-test reads the collection from git when there is one: the copy is its own repository (nothing committed).
git -C "$dest" init -q && git -C "$dest" add -A
cd "$dest"
case $what in
  sanity) exec ansible-test sanity --local --python "$py" --color no "$@" ;;
  # The tests of the plugins (modules, module_utils, action/lookup/test plugins); the rest of tests/unit run playbooks
  # and host helpers, which `make unit` covers.
  units) exec ansible-test units --local --python "$py" --color no "$@" tests/unit/test_parsers.py tests/unit/test_gdrcopy_info.py \
           tests/unit/test_converged.py tests/unit/test_report.py tests/unit/test_peermem_plan.py tests/unit/test_plugins.py ;;
esac
