"""Consistency of the roles' inputs, the release table and the playbook layout.

Each role's meta/argument_specs.yml and defaults/main.yml must declare the same inputs with equal defaults,
every input must be documented, named with the role prefix and listed in inventory.example/, and
the release table (roles/gdrcopy/files/releases.yml) must pin the releases documented in docs/UPSTREAM-GDRCOPY.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("gdrcopy", "mok_signing", "nvidia_peermem")

# Facts each role exports (documented in its README); every other variable a role sets is internal (__<role>_).
EXPORTS = {
    "gdrcopy": {"gdrcopy_reboot_required", "gdrcopy_reload_pending", "gdrcopy_smoke", "gdrcopy_load_refused",
                "gdrcopy_uninstalled", "gdrcopy_package_lists_refresh"},
    "mok_signing": {"mok_signing_enrollment_pending", "mok_signing_reboot_required", "mok_signing_signer",
                    "mok_signing_cert_path", "mok_signing_secure_boot", "mok_signing_reimported",
                    "mok_signing_sign_command", "mok_signing_controller_signer", "mok_signing_rotation",
                    "mok_signing_replaced"},
    "nvidia_peermem": {"nvidia_peermem_loaded", "nvidia_peermem_report", "nvidia_peermem_boot_modules"},
}
# Facts the task playbooks export; their other variables are internal (__<playbook>_).
PLAYBOOK_EXPORTS = {
    "preflight": {"gdrcopy_resolved_mode", "gdrcopy_preflight_passed", "gdrcopy_run_inputs", "gdrcopy_preflight_info",
                  "gdrcopy_converged", "gdrcopy_new_kernels",
                  # on a converged host, what the roles it skips would have exported (nothing pending, the smoke result)
                  "gdrcopy_smoke", "gdrcopy_reload_pending", "gdrcopy_reboot_required", "mok_signing_enrollment_pending"},
    # The mok_signing play hands the role's signing command (or the controller's signer) to the gdrcopy role.
    "mok_signing": {"gdrcopy_sign_command", "gdrcopy_controller_signer", "gdrcopy_hold_resigned"},
    # and the nvidia_peermem play hands the gdrcopy role's boot unit the modules it loads between nvidia and gdrdrv.
    "nvidia_peermem": {"gdrcopy_chain_modules"},
    "verify": {"gdrcopy_verify"},
    "status": {"gdrcopy_status"},
    # The uninstall play hands the gdrcopy role the mok_signing role's key directory.
    "uninstall": {"gdrcopy_uninstall_key_dir"},
}
# site.yml order: (playbook, tag); the role plays apply the role of the same name.
SITE_ORDER = (
    ("preflight", "preflight"),
    ("nvidia_peermem", "nvidia_peermem"),
    ("mok_signing", "mok_signing"),
    ("gdrcopy", "gdrcopy"),
    ("verify", "verify"),
    ("status", "status"),
)
HOSTS_EXPRESSION = "{{ gdrcopy_hosts | default('gpu_nodes') }}"
# The plays that change things leave out the hosts preflight found converged (plugins/filter/skip_converged.py).
SKIP_CONVERGED = {"nvidia_peermem": " | gpufleet.gdrcopy.skip_converged(groups)",
                  "mok_signing": " | gpufleet.gdrcopy.skip_converged(groups, dmabuf=true)",
                  "gdrcopy": " | gpufleet.gdrcopy.skip_converged(groups, new_kernels=true)"}

# Release rows as docs/UPSTREAM-GDRCOPY.md gives them: tag -> (commit, tarball sha256).
DOCUMENTED_TAGS = (
    "v2.3", "v2.3.1", "v2.4", "v2.4.1", "v2.4.2", "v2.4.3", "v2.4.4", "v2.5", "v2.5.1", "v2.5.2", "v2.6",
)
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils.gdrcopy_inputs import version_key  # noqa: E402

EXPECTED_ROWS = {
    "2.6": {
        "tag": "v2.6",
        "commit": "93c606bbcaa10457cbbab93163aa446d902b983d",
        "sha256": "c9eaf0593567ac5765d04c48cf7923dacb2644240b35bb5f025edb3bde1d5b4f",
        "url": "https://github.com/NVIDIA/gdrcopy/archive/refs/tags/v2.6.tar.gz",
        "top_dir": "gdrcopy-2.6",
        "tests": ["gdrcopy_sanity", "gdrcopy_copybw", "gdrcopy_copylat", "gdrcopy_apiperf", "gdrcopy_pplat"],
        "gdrdrv_params": {"dbg_enabled": 0, "info_enabled": 0, "use_persistent_mapping": 1},
    },
    "2.3.1": {
        "tag": "v2.3.1",
        "commit": "429f971dd0ba5ab7109e703d403af2b6ed3db40a",
        "sha256": "59b3cc97a4fc6008a5407506d9e67ecc4144cfad61c261217fabcb671cd30ca8",
        "url": "https://github.com/NVIDIA/gdrcopy/archive/refs/tags/v2.3.1.tar.gz",
        "top_dir": "gdrcopy-2.3.1",
        "tests": ["sanity", "copybw", "copylat", "apiperf"],
        "gdrdrv_params": {"dbg_enabled": 0, "info_enabled": 0},
    },
}

SPEC_TYPES = {
    "str": (str,),
    "path": (str,),
    "bool": (bool,),
    "int": (int,),
    "float": (float, int),
    "list": (list,),
    "dict": (dict,),
    "raw": (object,),
}


def load(path: Path):
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def spec_options(role: str) -> dict:
    return load(ROOT / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]


def role_defaults(role: str) -> dict:
    return load(ROOT / "roles" / role / "defaults" / "main.yml") or {}


def walk_options(options: dict, prefix: str = ""):
    """Yield (dotted name, spec) for every option and suboption."""
    for name, spec in options.items():
        yield prefix + name, spec
        if spec.get("options"):
            yield from walk_options(spec["options"], prefix + name + ".")


def type_ok(value, spec_type: str) -> bool:
    if spec_type == "int" and isinstance(value, bool):
        return False
    return isinstance(value, SPEC_TYPES[spec_type])


def value_errors(name: str, value, spec: dict) -> list[str]:
    """Check a value against an option spec: type, elements, choices and suboptions, recursively."""
    errors = []
    spec_type = spec.get("type", "str")
    if not type_ok(value, spec_type):
        return [f"{name}: {value!r} is not of type {spec_type}"]
    if "choices" in spec and spec_type != "list" and value not in spec["choices"]:
        errors.append(f"{name}: {value!r} is not one of {spec['choices']}")
    suboptions = spec.get("options") or {}
    if spec_type == "dict" and suboptions:
        errors += dict_errors(name, value, suboptions)
    if spec_type == "list":
        for index, element in enumerate(value):
            element_name = f"{name}[{index}]"
            element_type = spec.get("elements", "raw")
            if not type_ok(element, element_type):
                errors.append(f"{element_name}: {element!r} is not of type {element_type}")
            elif "choices" in spec and element not in spec["choices"]:
                errors.append(f"{element_name}: {element!r} is not one of {spec['choices']}")
            elif element_type == "dict" and suboptions:
                errors += dict_errors(element_name, element, suboptions)
    return errors


def dict_errors(name: str, value: dict, suboptions: dict) -> list[str]:
    errors = [f"{name}.{key}: not a declared suboption" for key in value if key not in suboptions]
    errors += [
        f"{name}.{key}: required suboption missing"
        for key, subspec in suboptions.items()
        if subspec.get("required") and key not in value
    ]
    for key, subvalue in value.items():
        if key in suboptions:
            errors += value_errors(f"{name}.{key}", subvalue, suboptions[key])
    return errors


def tasks_in(node):
    """Yield every task dict in a task list, descending into block/rescue/always."""
    for task in node or []:
        yield task
        for section in ("block", "rescue", "always"):
            if section in task:
                yield from tasks_in(task[section])


def variables_set_by(tasks) -> set[str]:
    """Names a task list defines: register, set_fact keys, include_vars name, task-level vars."""
    names = set()
    for task in tasks_in(tasks):
        if "register" in task:
            names.add(task["register"])
        for module in ("ansible.builtin.set_fact", "set_fact"):
            if isinstance(task.get(module), dict):
                names |= {key for key in task[module] if key != "cacheable"}
        for module in ("ansible.builtin.include_vars", "include_vars"):
            if isinstance(task.get(module), dict) and "name" in task[module]:
                names.add(task[module]["name"])
        names |= set(task.get("vars") or {})
    return names


# --- argument specs and defaults ---------------------------------------------------------------------------


def test_the_three_roles_exist():
    found = {path.name for path in (ROOT / "roles").iterdir() if path.is_dir()}
    assert set(ROLES) <= found


@pytest.mark.parametrize("role", ROLES)
def test_spec_and_defaults_declare_the_same_inputs(role):
    spec, defaults = set(spec_options(role)), set(role_defaults(role))
    assert spec - defaults == set(), "in meta/argument_specs.yml but not in defaults/main.yml"
    assert defaults - spec == set(), "in defaults/main.yml but not in meta/argument_specs.yml"


@pytest.mark.parametrize("role", ROLES)
def test_spec_defaults_equal_role_defaults(role):
    defaults = role_defaults(role)
    for name, spec in spec_options(role).items():
        assert "default" in spec, f"{name} has no default in meta/argument_specs.yml"
        assert spec["default"] == defaults[name], f"{name}: spec default {spec['default']!r} != {defaults[name]!r}"
        assert type(spec["default"]) is type(defaults[name]), f"{name}: defaults differ in type"


@pytest.mark.parametrize("role", ROLES)
def test_every_option_has_a_type_and_a_description(role):
    for name, spec in walk_options(spec_options(role)):
        assert spec.get("type", "str") in SPEC_TYPES, f"{name}: unknown type {spec.get('type')!r}"
        description = spec.get("description")
        if isinstance(description, str):
            description = [description]
        assert description and all(isinstance(line, str) and line.strip() for line in description), (
            f"{name} has no description"
        )


@pytest.mark.parametrize("role", ROLES)
def test_defaults_fit_their_spec(role):
    errors = []
    for name, spec in spec_options(role).items():
        errors += value_errors(name, spec["default"], spec)
    assert errors == []


@pytest.mark.parametrize("role", ROLES)
def test_choices_contain_the_default(role):
    for name, spec in spec_options(role).items():
        if "choices" in spec:
            assert spec["default"] in spec["choices"], f"{name}: default {spec['default']!r} not in {spec['choices']}"


@pytest.mark.parametrize("role", ROLES)
def test_public_inputs_carry_the_role_prefix(role):
    for name in set(spec_options(role)) | set(role_defaults(role)):
        assert name.startswith(f"{role}_"), f"{name} lacks the prefix {role}_"


@pytest.mark.parametrize("role", ROLES)
def test_role_internal_variables_carry_the_internal_prefix(role):
    role_dir = ROOT / "roles" / role
    names = set()
    vars_file = role_dir / "vars" / "main.yml"
    if vars_file.exists():
        names |= set(load(vars_file) or {})
    for task_file in sorted((role_dir / "tasks").glob("*.yml")):
        names |= variables_set_by(load(task_file))
    bad = {name for name in names if not name.startswith(f"__{role}_") and name not in EXPORTS[role]}
    assert bad == set(), f"internal variables must start with __{role}_ (or be documented exports)"


@pytest.mark.parametrize("role", ROLES)
def test_readme_documents_every_export(role):
    """Exports are documented by hand under "Variables exported"; test_argspec_docs.py keeps the variable tables
    current."""
    readme = (ROOT / "roles" / role / "README.md").read_text(encoding="utf-8")
    missing = {name for name in EXPORTS[role] if name not in readme}
    assert missing == set()
    for line in ("Idempotent: yes. Check mode: yes.", "MIT"):
        assert line in readme


# --- release table -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def releases():
    return load(ROOT / "roles" / "gdrcopy" / "files" / "releases.yml")


def test_release_table_pins_the_documented_tags(releases):
    tags = {row["tag"] for row in releases["releases"].values()}
    assert set(DOCUMENTED_TAGS) <= tags


def test_release_rows_are_well_formed(releases):
    for version, row in releases["releases"].items():
        assert isinstance(version, str), f"{version!r}: quote the version key"
        assert row["tag"] == f"v{version}"
        assert re.fullmatch(r"[0-9a-f]{40}", row["commit"]), f"{version}: commit"
        assert re.fullmatch(r"[0-9a-f]{64}", row["sha256"]), f"{version}: sha256"
        assert row["url"] == f"https://github.com/NVIDIA/gdrcopy/archive/refs/tags/v{version}.tar.gz"
        assert row["top_dir"] == f"gdrcopy-{version}"
        legacy = version == "2.3" or version.startswith("2.3.")
        expected = EXPECTED_ROWS["2.3.1" if legacy else "2.6"]["tests"]
        assert row["tests"] == expected, f"{version}: test programs"
        # module_param() in each tag's src/gdrdrv/gdrdrv.c: use_persistent_mapping from 2.4.1, default 1 from 2.5
        params = {"dbg_enabled": 0, "info_enabled": 0}
        if version_key(version) >= (2, 4, 1):
            params["use_persistent_mapping"] = int(version_key(version) >= (2, 5))
        assert row["gdrdrv_params"] == params, f"{version}: gdrdrv parameters"


def test_the_fixture_gdrdrv_takes_the_parameters_of_the_release_it_claims(releases):
    """The CI source tree is 2.6 by its gdrdrv.h: its module_param() lines and their defaults are 2.6's row."""
    gdrdrv = ROOT / "tests" / "fixtures" / "gdrcopy-src" / "src" / "gdrdrv"
    header = (gdrdrv / "gdrdrv.h").read_text(encoding="utf-8")
    claimed = "%s.%s" % tuple(re.search(r"^#define GDRDRV_%s_VERSION ([0-9]+)$" % part, header, re.M).group(1)
                              for part in ("MAJOR", "MINOR"))
    source = (gdrdrv / "gdrdrv.c").read_text(encoding="utf-8")
    defaults = {}
    for name in re.findall(r"^module_param\((\w+),", source, re.M):
        initial = re.search(r"^static int %s(?: = (-?[0-9]+))?;" % name, source, re.M)
        defaults[name] = int(initial.group(1) or 0)  # a static int without an initialiser is 0
    assert claimed == "2.6" and defaults == releases["releases"][claimed]["gdrdrv_params"]


def test_release_commits_and_checksums_are_unique(releases):
    rows = list(releases["releases"].values())
    assert len({row["commit"] for row in rows}) == len(rows)
    assert len({row["sha256"] for row in rows}) == len(rows)


@pytest.mark.parametrize("version", sorted(EXPECTED_ROWS))
def test_release_row_equals_the_documented_one(releases, version):
    assert releases["releases"][version] == EXPECTED_ROWS[version]


def test_role_default_version_is_the_table_default(releases):
    assert releases["default"] in releases["releases"]
    assert role_defaults("gdrcopy")["gdrcopy_version"] == releases["default"]


# --- entry points ------------------------------------------------------------------------------------------


def test_site_imports_the_playbooks_in_order():
    """The checkout's site.yml is the collection's playbooks/site.yml (gpufleet.gdrcopy.site), which imports one
    playbook per concern, in order."""
    assert [e.get("ansible.builtin.import_playbook") for e in load(ROOT / "site.yml")] == ["playbooks/site.yml"]
    site = load(ROOT / "playbooks" / "site.yml")
    imports = [entry.get("ansible.builtin.import_playbook") for entry in site]
    assert imports == [f"{name}.yml" for name, _ in SITE_ORDER]
    assert all(set(entry) <= {"name", "ansible.builtin.import_playbook"} for entry in site)


@pytest.mark.parametrize(("playbook", "tag"), SITE_ORDER)
def test_each_playbook_is_one_play_on_the_chosen_hosts(playbook, tag):
    plays = load(ROOT / "playbooks" / f"{playbook}.yml")
    assert len(plays) == 1
    play = plays[0]
    assert play["hosts"] == HOSTS_EXPRESSION.replace(" }}", SKIP_CONVERGED.get(playbook, "") + " }}")
    assert play["become"] is True
    assert tag in play["tags"]
    if "roles" not in play:  # a task playbook
        names = variables_set_by(play["tasks"]) | set(play.get("vars") or {})
    else:  # a role playbook: the role of the same name, and at most post_tasks that wire its exports
        assert [entry["role"] for entry in play["roles"]] == [f"gpufleet.gdrcopy.{playbook}"]
        assert "tasks" not in play
        names = variables_set_by(play.get("post_tasks") or [])
    bad = {n for n in names if not n.startswith(f"__{playbook}_") and n not in PLAYBOOK_EXPORTS.get(playbook, set())}
    assert bad == set()


def test_preflight_runs_on_every_run():
    play = load(ROOT / "playbooks" / "preflight.yml")[0]
    assert set(play["tags"]) == {"preflight", "always"}


def test_roles_have_no_dependencies():
    for role in ROLES:
        meta = load(ROOT / "roles" / role / "meta" / "main.yml")
        assert meta["dependencies"] == []
        assert meta["galaxy_info"]["license"] == "MIT"
        assert meta["galaxy_info"]["min_ansible_version"] == "2.17"


def test_a_role_whose_inputs_a_play_hands_over_validates_in_its_own_play():
    """A play that sets another role's input (gdrcopy_chain_modules, gdrcopy_sign_command) does so after preflight
    checked that role's variables: the receiving role must check them again in its own play, unconditionally. A
    role that skipped its check after preflight (as the roles whose inputs nobody hands over do) built gdrdrv
    unsigned and left nvidia-peermem out of the boot chain (found by the default scenario's reboot check)."""
    handed = {var for names in PLAYBOOK_EXPORTS.values() for var in names}
    for role in ROLES:
        spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
        inputs = set(spec["argument_specs"]["main"]["options"])
        tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
        check = next(t for t in tasks if "validate.yml" in str(t))
        if inputs & handed:
            assert "when" not in check and "ansible.builtin.import_tasks" in check, (role, inputs & handed, check)
    assert {"gdrcopy_chain_modules", "gdrcopy_sign_command"} <= handed


ROLLING = {"serial": "{{ gdrcopy_serial | default(0) | gpufleet.gdrcopy.batches }}",
           "max_fail_percentage": "{{ gdrcopy_max_fail_percentage | default(100) | gpufleet.gdrcopy.fail_percentage }}"}


@pytest.mark.parametrize("playbook", [name for name, _ in SITE_ORDER] + ["uninstall"])
def test_every_play_that_changes_hosts_runs_in_the_rolling_batches(playbook):
    """Preflight and status change nothing on a host and see the whole fleet at once; every other play takes its
    batches from gdrcopy_serial and stops the rollout past gdrcopy_max_fail_percentage (plugins/filter/)."""
    play = load(ROOT / "playbooks" / f"{playbook}.yml")[0]
    wanted = {} if playbook in ("preflight", "status") else ROLLING
    assert {k: play[k] for k in ROLLING if k in play} == wanted
