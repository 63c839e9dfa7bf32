"""tools/argspec_docs.py: the README variables tables and inventory.example/group_vars/all/<role>.yml are generated
from each role's meta/argument_specs.yml, the one place the inputs are documented; --check says when they are stale.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "argspec_docs.py"
ROLES = ("gdrcopy", "mok_signing", "nvidia_peermem")

_SPEC = importlib.util.spec_from_file_location("argspec_docs", SCRIPT)
docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(docs)


def run(*args: str, root: Path | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT if root is None else root / "tools" / "argspec_docs.py"), *args]
    if root is not None:
        command += ["--root", str(root)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def copy_of_the_docs(tmp_path: Path) -> Path:
    """The script, every role's spec and README, and the inventory examples, in a scratch checkout."""
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "tools", root / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    for spec in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        role = spec.parents[1].name
        for rel in (f"roles/{role}/meta/argument_specs.yml", f"roles/{role}/README.md",
                    f"inventory.example/group_vars/all/{role}.yml"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, root / rel)
    return root


def test_generated_docs_are_current():
    result = run("--check")
    assert result.returncode == 0, (
        "generated docs are stale: run tools/argspec_docs.py (edit meta/argument_specs.yml, not the generated "
        f"text)\n{result.stdout}{result.stderr}"
    )
    assert result.stdout == ""


def test_check_fails_after_a_spec_description_edit(tmp_path):
    root = copy_of_the_docs(tmp_path)
    assert run("--check", root=root).returncode == 0
    spec = root / "roles" / "gdrcopy" / "meta" / "argument_specs.yml"
    text = spec.read_text(encoding="utf-8")
    assert text.count("- CUDA toolkit used to build the test programs") == 1
    spec.write_text(text.replace("- CUDA toolkit used to build the test programs",
                                 "- CUDA toolkit (edited) used to build the test programs"), encoding="utf-8")

    stale = run("--check", root=root)
    assert stale.returncode == 1
    named = {line.removeprefix("stale: ") for line in stale.stdout.splitlines() if line.startswith("stale: ")}
    assert named == {"roles/gdrcopy/README.md", "inventory.example/group_vars/all/gdrcopy.yml"}
    assert "+## CUDA toolkit (edited) used to build the test programs (absolute path)." in stale.stdout
    assert "-## CUDA toolkit used to build the test programs (absolute path)." in stale.stdout
    readme = root / "roles" / "gdrcopy" / "README.md"
    assert "(edited)" not in readme.read_text(encoding="utf-8"), "--check must write nothing"

    written = run(root=root)
    assert written.returncode == 0, written.stderr
    assert "(edited)" in readme.read_text(encoding="utf-8")
    assert run("--check", root=root).returncode == 0


def test_a_hand_edit_of_a_generated_file_is_stale(tmp_path):
    root = copy_of_the_docs(tmp_path)
    inventory = root / "inventory.example" / "group_vars" / "all" / "nvidia_peermem.yml"
    inventory.write_text(inventory.read_text(encoding="utf-8") + "# nvidia_peermem_extra: 1\n", encoding="utf-8")
    result = run("--check", root=root)
    assert result.returncode == 1
    assert "stale: inventory.example/group_vars/all/nvidia_peermem.yml" in result.stdout


def test_readme_prose_outside_the_markers_is_kept(tmp_path):
    root = copy_of_the_docs(tmp_path)
    readme = root / "roles" / "mok_signing" / "README.md"
    text = readme.read_text(encoding="utf-8")
    head, block = text.split(docs.BEGIN)
    block, tail = block.split(docs.END)
    readme.write_text(head + "Hand-written line.\n\n" + docs.BEGIN + "\nstale\n" + docs.END + tail, encoding="utf-8")
    assert run(root=root).returncode == 0
    assert readme.read_text(encoding="utf-8") == head + "Hand-written line.\n\n" + docs.BEGIN + block + docs.END + tail


def test_a_readme_without_markers_is_an_error(tmp_path):
    root = copy_of_the_docs(tmp_path)
    readme = root / "roles" / "nvidia_peermem" / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace(docs.END, ""), encoding="utf-8")
    result = run("--check", root=root)
    assert result.returncode == 2
    assert "roles/nvidia_peermem/README.md" in result.stderr


def test_a_group_comment_must_sit_above_a_top_level_option(tmp_path):
    root = copy_of_the_docs(tmp_path)
    spec = root / "roles" / "gdrcopy" / "meta" / "argument_specs.yml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace("          use_persistent_mapping:",
                                 "          # --- Misplaced ---\n          use_persistent_mapping:"), encoding="utf-8")
    result = run("--check", root=root)
    assert result.returncode == 2
    assert "Misplaced" in result.stderr


def test_generation_is_deterministic():
    assert docs.generated_files(ROOT) == docs.generated_files(ROOT)


@pytest.mark.parametrize("role", ROLES)
def test_inventory_settings_load_as_the_spec_defaults(role):
    """Uncommenting every "# " line gives exactly the spec's defaults (types kept: "2.6", "0660" stay strings),
    and the generated file sets nothing."""
    options, groups = docs.load_spec(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    text = docs.render_inventory(role, options, groups)
    assert yaml.safe_load(text) is None
    settings = yaml.safe_load("\n".join(line[2:] for line in text.splitlines() if line.startswith("# ")))
    assert settings == {name: spec["default"] for name, spec in options.items()}
    for name, spec in options.items():
        assert type(settings[name]) is type(spec["default"]), name
    assert max(len(line) for line in text.splitlines() if line.startswith("## ")) <= docs.WIDTH


@pytest.mark.parametrize("role", ROLES)
def test_readme_table_has_a_row_per_option(role):
    options, groups = docs.load_spec(ROOT / "roles" / role / "meta" / "argument_specs.yml")
    block = docs.readme_block(options, groups)
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    names = [name for name, _ in _walk(options)]
    assert [row.split("`")[1] for row in rows] == names
    assert all(row.count(" | ") == 4 for row in rows), "every row has five cells (escaped | inside)"


def _walk(options, prefix=""):
    for name, spec in options.items():
        yield prefix + name, spec
        sub = prefix + name + ("[]" if spec.get("type") == "list" else "")
        yield from _walk(spec.get("options") or {}, sub + ".")


def test_markup_rendering():
    text = 'C(a|b) I(it) B(bold) U(https://x.example) L(the docs, https://d.example) O(gdrcopy_mode=host) V(1) <p>'
    assert docs.markup_markdown(text) == (
        r"`a\|b` *it* **bold** <https://x.example> [the docs](https://d.example) `gdrcopy_mode=host` `1` &lt;p&gt;"
    )
    assert docs.markup_plain(text) == "a|b it bold https://x.example the docs (https://d.example) gdrcopy_mode=host 1 <p>"


def test_yaml_rendering_keeps_types():
    assert [docs.yaml_flow(value) for value in ("2.6", "0660", "", "true", "auto", [], {"a": 1}, False, 36500)] == [
        '"2.6"', '"0660"', '""', '"true"', "auto", "[]", "{a: 1}", "false", "36500"]
    assert docs.yaml_block("x", [{"key": "/k", "cert": "/c"}]) == ["x:", "  - key: /k", "    cert: /c"]
