"""The execution environment for AWX / Automation Controller: `ansible-builder create` renders its build context
from execution-environment.yml (no container engine is needed for that step), with the pinned ansible-core, the
collection's own artifact and its one dependency."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import REPO, need

BIN = Path(sys.executable).parent


def test_ansible_builder_renders_the_build_context(tmp_path):
    need((BIN / "ansible-builder").exists(), "ansible-builder is not installed (requirements-test.txt)")
    shutil.copy(REPO / "execution-environment.yml", tmp_path)
    shutil.copytree(REPO / "ee", tmp_path / "ee", ignore=shutil.ignore_patterns("*.tar.gz"))
    build = subprocess.run([BIN / "ansible-galaxy", "collection", "build", "--force", "--output-path",
                            tmp_path / "ee" / "collection", REPO], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    r = subprocess.run([BIN / "ansible-builder", "create", "-f", "execution-environment.yml", "-c", "context"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Complete!" in r.stdout, r.stdout + r.stderr
    context = tmp_path / "context"
    containerfile = next(p for p in (context / "Containerfile", context / "Dockerfile") if p.exists()).read_text()
    core = re.search(r"^ansible-core==(\S+)$", (REPO / "requirements.txt").read_text(), re.M).group(1)
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core==%s ' % core in containerfile, "the pinned ansible-core"
    artifact = list((context / "_build" / "collection").glob("gpufleet-gdrcopy-*.tar.gz"))
    assert len(artifact) == 1, "the collection's artifact is in the context"
    galaxy = containerfile.split("FROM base AS galaxy", 1)[1].split("FROM base AS builder", 1)[0]
    assert "ansible-galaxy collection install --no-deps -p /usr/share/ansible/collections /build/collection/" in galaxy
    ours = {c["name"]: c["version"] for c in yaml.safe_load((REPO / "collections" / "requirements.yml").read_text())
            ["collections"]}
    theirs = {c["name"]: c["version"] for c in yaml.safe_load((context / "_build" / "requirements.yml").read_text())
              ["collections"]}
    assert theirs == ours, "the EE pins what collections/requirements.yml pins"
    assert "git [platform:rpm]" in (context / "_build" / "bindep.txt").read_text()
