"""One source for the fixed places on a host: module_utils/gdrcopy_pipeline.py's PATHS. The roles and playbooks read
them through the lookup gpufleet.gdrcopy.paths, the modules import them; none spells one out (comments and module
documentation may name them)."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_pipeline import PATHS

REPO = Path(__file__).resolve().parents[2]
# state_dir and config_dir prefix user defaults (gdrcopy_build_root, mok_signing_key_dir): their files are checked.
FIXED = sorted(v for k, v in PATHS.items() if k not in ("state_dir", "config_dir", "module_subdir"))


def yaml_code(path):
    """A YAML file without its comments."""
    return "\n".join(re.sub(r"(^|\s)#.*$", "", line) for line in path.read_text().splitlines())


def python_code_strings(path):
    """The string constants of a plugin, without its docstrings and DOCUMENTATION/EXAMPLES/RETURN."""
    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in ("DOCUMENTATION", "EXAMPLES", "RETURN")
                                                for t in node.targets):
            docs.add(id(node.value))
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node) is not None:
            docs.add(id(node.body[0].value))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


# meta/argument_specs.yml is documentation (descriptions may name a path).
YAML_FILES = sorted([p for p in REPO.glob("roles/*/*/*.yml") if p.parent.name != "meta"]
                    + list(REPO.glob("roles/*/templates/*.j2"))
                    + list(REPO.glob("playbooks/*.yml")) + [REPO / "site.yml"])
PLUGINS = sorted(p for p in REPO.glob("plugins/**/*.py") if p.name != "gdrcopy_pipeline.py")


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_role_or_playbook_spells_out_a_fixed_path(path):
    code = yaml_code(path)
    assert [v for v in FIXED if v in code] == []


@pytest.mark.parametrize("path", PLUGINS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_plugin_spells_out_a_fixed_path(path):
    found = [s for s in python_code_strings(path) if any(v in s for v in FIXED)]
    assert found == []


def test_the_kernel_hook_takes_its_paths_from_the_pipeline():
    hook = (REPO / "roles" / "gdrcopy" / "files" / "gdrcopy-kernel-hook").read_text()
    assert "pipeline.DRIVER_RECORD" in hook and "pipeline.HOOK_STATUS" in hook
    assert [v for v in FIXED if v in re.sub(r'""".*?"""', "", hook, flags=re.S)] == []


def test_the_lookup_returns_the_table_and_names_an_unknown_path(tmp_path):
    book = tmp_path / "paths.yml"
    book.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.debug": {"msg": "{{ lookup('gpufleet.gdrcopy.paths', 'libexec', 'mok_signer') }}"}},
        {"ansible.builtin.debug": {"msg": "{{ lookup('gpufleet.gdrcopy.paths', 'nowhere') }}"}}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                        str(book)], env=env, capture_output=True, text=True, timeout=120)
    out = r.stdout + r.stderr
    assert "%s,%s" % (PATHS["libexec"], PATHS["mok_signer"]) in out.replace('"', "").replace(" ", ""), out
    # (the output quotes the name as its callback does: 'nowhere' or ''nowhere'' on 2.17)
    assert "no path is named " in out and "nowhere" in out and "(known: config_dir, converged_record," in out, out
