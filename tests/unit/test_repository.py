"""The repository ships every file its roles and playbooks name.

A `.gitignore` pattern once hid the template of /etc/ld.so.conf.d/gdrcopy.conf, then named ld.so.conf.j2 (`*.so.*`):
the working tree had it, every clone lacked it, and only a full CI run found out. These tests catch that class of mistake in seconds: on a clone,
a role's template/copy/script source that the repository lacks; in a working tree, a file under the project's own
folders that git would silently leave out.
"""

import re
import subprocess

import pytest
import yaml

from conftest import REPO

OWN_DIRS = ["roles", "playbooks", "plugins", "meta", "collections", "molecule", "tests", "src", "inventory.example",
            "benchmarks", ".ci", ".config", "docs", "tools", "ee"]
# What git rightly leaves out of those folders: run state and caches, never code.
EXPECTED_IGNORED = ("__pycache__/", ".pyc", "/ephemeral/", ".pytest_cache/", "src/cache/", "ee/collection/gpufleet-gdrcopy-")
FILE_MODULES = {"ansible.builtin.template": "templates", "ansible.builtin.copy": "files",
                "ansible.builtin.script": "files"}


def _tasks(node):
    """Every task dict in a task file, descending into block/rescue/always."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            yield from _tasks(node.get(key))


def _static_sources():
    for task_file in sorted(REPO.glob("roles/*/tasks/*.yml")):
        role_dir = task_file.parents[1]
        for task in _tasks(yaml.safe_load(task_file.read_text())):
            for module, folder in FILE_MODULES.items():
                args = task.get(module)
                if args is None:
                    continue
                if isinstance(args, str):          # script: name args...
                    src = args.split()[0]
                elif args.get("remote_src"):
                    continue
                else:
                    src = args.get("src") or args.get("cmd", "").split(" ")[0]
                if src == "{{ item }}" and isinstance(task.get("loop"), list):  # a literal list of role files
                    for item in task["loop"]:  # a templated item is resolved by its own test
                        if "{{" not in item:
                            yield task_file.relative_to(REPO), role_dir / folder / item
                elif src and "{{" not in src:
                    yield task_file.relative_to(REPO), role_dir / folder / src


def _lookup_sources():
    """Role files read by a file or template lookup (the content of gdrcopy_files entries) with a literal name."""
    for path in sorted(REPO.glob("roles/*/vars/*.yml")) + sorted(REPO.glob("roles/*/tasks/*.yml")):
        for kind, name in re.findall(r"lookup\('ansible\.builtin\.(file|template)', '([^']+)'", path.read_text()):
            yield path.relative_to(REPO), path.parents[1] / ("files" if kind == "file" else "templates") / name


SOURCES = list(_static_sources()) + list(_lookup_sources())


def test_roles_name_static_sources():
    """The scan itself finds the role files it guards (a scan that finds nothing would guard nothing)."""
    names = {path.name for _, path in SOURCES}
    assert {"gdrcopy-ld.conf.j2", "gdrcopy.service.j2", "gdrcopy-build", "gdrcopy-install", "mok-sign"} <= names


@pytest.mark.parametrize("task_file,path", SOURCES, ids=[str(p.relative_to(REPO)) for _, p in SOURCES])
def test_role_source_is_tracked(task_file, path):
    assert path.is_file(), f"{task_file} uses {path.relative_to(REPO)}, which is not in the repository"
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", str(path.relative_to(REPO))], cwd=REPO,
                             capture_output=True, text=True)
    assert tracked.returncode == 0, f"{path.relative_to(REPO)} exists here but git does not track it"


def test_no_project_file_is_ignored():
    """A file in the project's folders that .gitignore hides would be missing from every clone."""
    out = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "--",
                          *OWN_DIRS], cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\n")
    hidden = [p for p in out if p and not any(mark in p or p.endswith(mark.rstrip("/")) for mark in EXPECTED_IGNORED)]
    assert not hidden, f"git ignores these project files, so clones lack them: {hidden} (check .gitignore)"


def test_ansible_managed_only_in_templates():
    """ansible_managed is defined only while a template renders: in a task's content: it is undefined and the task
    fails at run time (found by the image scenario)."""
    users = [str(p.relative_to(REPO)) for d in ("roles", "playbooks", "molecule") for p in (REPO / d).rglob("*.yml")
             if "ansible_managed" in p.read_text()]
    # The gdrcopy role's templates are rendered by the template lookup (gdrcopy_files' content), where it is
    # undefined too.
    users += [str(p.relative_to(REPO)) for p in (REPO / "roles" / "gdrcopy" / "templates").glob("*.j2")
              if "ansible_managed" in p.read_text()]
    assert users == [], f"ansible_managed used outside a template task: {users}"
