"""The role inputs (plugins/module_utils/gdrcopy_inputs.py, run by the gdrcopy_inputs action plugin): every input
of every role has a strict kind; hostile values are refused in one sentence that names the input, or accepted and
then harmless where they end up (the real templates render them verbatim, a shell needs no quoting for them).

The property tests draw at least 200 values per input (hypothesis; derandomised, so CI sees the same ones): strings
with newlines, NUL, shell, systemd and modprobe metacharacters, "..", unicode, very long values, and wrong types
("false", numbers, lists, mappings). test_bad_input.py runs the same plugin through ansible-playbook."""

import json
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_modsign as MS
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_inputs as I
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_mok
from conftest import REPO

hypothesis = pytest.importorskip("hypothesis")  # requirements-test.txt; a bare ansible-core matrix venv lacks it
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

jinja2 = pytest.importorskip("jinja2")

ROLES = ("gdrcopy", "mok_signing", "nvidia_peermem")
EXAMPLES = 200


def options(role):
    return yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"]["main"]["options"]


OPTIONS = dict((role, options(role)) for role in ROLES)
SHIPPED = yaml.safe_load((REPO / "roles" / "gdrcopy" / "files" / "releases.yml").read_text())


def check(role, **values):
    return I.check_role(role, OPTIONS[role], values, SHIPPED)


def errors_of(role, **values):
    return check(role, **values)[1]


def role_of(name):
    return next(role for role in ROLES if name in OPTIONS[role])


# --- the table itself -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("role", ROLES)
def test_every_input_has_a_kind_and_the_kinds_agree_with_the_spec(role):
    assert sorted(I.KINDS[role]) == sorted(OPTIONS[role])
    for name, spec in OPTIONS[role].items():
        kind = I.KINDS[role][name]
        assert (kind is I.boolean) == (spec["type"] == "bool"), name
        assert (kind is I.choice) == ("choices" in spec), name
        if kind in I.KIND_TYPES:
            assert I.KIND_TYPES[kind] == spec["type"], name


@pytest.mark.parametrize("role", ROLES)
def test_the_defaults_pass_and_come_back_as_defaults_main_has_them(role):
    normalised, errors, concerns, context = check(role)
    assert errors == [] and concerns == []
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
    assert normalised == defaults


# --- the defects of issue 14, each as it was reproduced -------------------------------------------------------

@pytest.mark.fault(10)
@pytest.mark.parametrize("mode,named", [
    ("0666\n", "gdrcopy_device_mode"),                   # a YAML block scalar: $ matched before the newline
    ("0664", "gdrcopy_device_world_access"),             # world-readable: every user gets gdrdrv's ioctls
    ("0644", "gdrcopy_device_world_access"),
    ("0661", "gdrcopy_device_world_access"),
    ("4660", "set-user-ID"), ("2660", "set-group-ID"), ("1660", "sticky"),
    (432, "number 432"), ("rw-rw----", "gdrcopy_device_mode"), ("08", "gdrcopy_device_mode"),
])
def test_a_device_mode_that_opens_gdrdrv_to_others_is_refused(mode, named):
    errors = errors_of("gdrcopy", gdrcopy_device_mode=mode)
    assert len(errors) == 1 and named in errors[0] and "gdrcopy_device_mode" in errors[0]


def test_world_access_must_be_asked_for_and_is_then_a_concern():
    normalised, errors, concerns, _ = check("gdrcopy", gdrcopy_device_mode="666", gdrcopy_device_world_access="yes")
    assert errors == [] and normalised["gdrcopy_device_mode"] == "0666"
    assert len(concerns) == 1 and "every local user" in concerns[0]
    assert errors_of("gdrcopy", gdrcopy_device_mode="4666", gdrcopy_device_world_access=True)  # set-id never


@pytest.mark.fault(16)
@pytest.mark.parametrize("name,value", [
    ("gdrcopy_version", ""),
    ("gdrcopy_version", "../../../usr"),
    ("gdrcopy_version", "2.6\ninstall nvidia /bin/sh -c 'id > /tmp/x'"),
    ("gdrcopy_version", "$(touch /tmp/pwned)"),
    ("gdrcopy_version", 2.6),
    ("gdrcopy_chain_modules", ["nvidia-peermem\nExecStartPre=/bin/sh -c id"]),
    ("gdrcopy_chain_modules", "nvidia-peermem"),
    ("gdrcopy_prefix", "/opt/gdrcopy; rm -rf /"),
    ("gdrcopy_prefix", "/opt/gdr copy"),
    ("gdrcopy_prefix", "/usr"),
    ("gdrcopy_prefix", "/opt/../usr"),
    ("gdrcopy_build_root", "/"),
    ("gdrcopy_kernels", "6.1.0-28-amd64"),
    ("gdrcopy_kernels", ["../../etc"]),
    ("gdrcopy_kernels", ["6.1.0-28-amd64\n"]),
    ("gdrcopy_source_git_ref", "v2.6 --upload-pack=touch"),
    ("gdrcopy_source_git_url", "ext::sh -c touch% /tmp/pwned"),
    ("gdrcopy_source_git_url", "--upload-pack=id"),
    ("gdrcopy_device_group", "gdrcopy\nchmod 777 /dev/gdrdrv"),
    ("gdrcopy_sign_command", ["sign-it"]),
    ("gdrcopy_load", "sometimes"),
    ("mok_signing_key_dir", "/var/lib/gdrcopy ansible/mok"),
    ("mok_signing_key_dir", "/var/lib/$(id)/mok"),
    ("mok_signing_key_cn", "x" * 65),
    ("mok_signing_key_cn", "line\nbreak"),
    ("mok_signing_key_days", True),
    ("mok_signing_host_key_paths", [{"key": "/k", "cert": "relative"}]),
    ("nvidia_peermem_persist", "maybe"),
])
def test_a_value_that_could_reach_a_shell_a_unit_or_a_config_line_is_refused_by_name(name, value):
    errors = errors_of(role_of(name), **{name: value})
    assert len(errors) == 1 and name in errors[0], errors


@pytest.mark.fault(17)
@pytest.mark.parametrize("given_,expected", [
    ("false", False), ("False", False), ("no", False), ("0", False), ("off", False), (0, False), (False, False),
    ("true", True), ("yes", True), ("1", True), ("on", True), (1, True), (True, True),
])
def test_a_boolean_from_the_command_line_is_a_boolean_once_checked(given_, expected):
    for role in ROLES:
        for name, spec in OPTIONS[role].items():
            if spec["type"] == "bool":
                normalised, errors, _, _ = check(role, **{name: given_})
                if not errors:  # mok_signing_sign_on_controller: true needs the controller's key
                    assert normalised[name] is expected, name


def test_install_tests_takes_a_yaml_boolean_and_module_params_take_strings():
    normalised = check("gdrcopy", gdrcopy_install_tests=True, gdrcopy_module_params={"dbg_enabled": "1"})[0]
    assert normalised["gdrcopy_install_tests"] == "true" and normalised["gdrcopy_module_params"] == {"dbg_enabled": 1}


def test_an_option_the_pinned_gdrdrv_does_not_take_is_refused_with_the_releases_that_have_it():
    errors = errors_of("gdrcopy", gdrcopy_version="2.4", gdrcopy_module_params={"use_persistent_mapping": 1})
    assert errors == ["gdrcopy_module_params.use_persistent_mapping: gdrdrv 2.4 has no such parameter (it takes "
                      "dbg_enabled, info_enabled): leave it out, or pin a release that has it (2.4.1, 2.4.2, 2.4.3, "
                      "2.4.4, 2.5, 2.5.1, 2.5.2, 2.6)"]
    assert errors_of("gdrcopy", gdrcopy_version="2.4", gdrcopy_module_params={"dbg_enabled": 1}) == []


def test_the_options_a_loaded_gdrdrv_should_show_are_the_releases_defaults_under_the_users():
    assert check("gdrcopy")[3]["gdrdrv_params"] == {"dbg_enabled": 0, "info_enabled": 0, "use_persistent_mapping": 1}
    assert check("gdrcopy", gdrcopy_version="2.4.4", gdrcopy_module_params={"info_enabled": 1})[3][
        "gdrdrv_params"] == {"dbg_enabled": 0, "info_enabled": 1, "use_persistent_mapping": 0}
    # a release outside the table (its own tarball): its parameters are unknown, so only what was set is compared
    own = check("gdrcopy", gdrcopy_version="2.7", gdrcopy_source_url="https://example.org/g.tar.gz",
                gdrcopy_source_sha256="a" * 64, gdrcopy_module_params={"use_persistent_mapping": 0})
    assert own[1] == [] and own[3]["gdrdrv_params"] == {"use_persistent_mapping": 0}


def test_a_release_row_names_its_gdrdrv_parameters_with_integer_defaults():
    row = dict(SHIPPED["releases"]["2.6"], tag="v2.7")
    assert errors_of("gdrcopy", gdrcopy_releases={"2.7": dict(row, gdrdrv_params={"Bad-Name": 0})}) == [
        'gdrcopy_releases["2.7"].gdrdrv_params: "Bad-Name" is not a module parameter name (lowercase letters, '
        "digits, _)"]
    assert "must be the parameter's default, an int" in errors_of(
        "gdrcopy", gdrcopy_releases={"2.7": dict(row, gdrdrv_params={"dbg_enabled": "0"})})[0]
    missing = dict(row)
    del missing["gdrdrv_params"]
    assert "it lacks gdrdrv_params" in errors_of("gdrcopy", gdrcopy_releases={"2.7": missing})[0]


def test_40_cyrillic_characters_and_a_plus_are_a_common_name():
    assert errors_of("mok_signing", mok_signing_key_cn="Ж" * 40) == []
    assert errors_of("mok_signing", mok_signing_key_cn="a+b") == []


def test_gdrcopy_releases_rows_are_checked_and_merged():
    normalised, errors, _, context = check("gdrcopy", gdrcopy_releases={"2.6": {"url": "file:///srv/g.tar.gz"}})
    assert errors == [] and context["releases"]["2.6"]["url"] == "file:///srv/g.tar.gz"
    assert context["releases"]["2.6"]["sha256"] == SHIPPED["releases"]["2.6"]["sha256"]
    assert "lacks" in errors_of("gdrcopy", gdrcopy_releases={"2.9": {"url": "https://x/y.tar.gz"}})[0]
    assert "unknown field" in errors_of("gdrcopy", gdrcopy_releases={"2.6": {"sha": "x"}})[0]


def test_the_digest_leaves_out_secrets_and_the_fast_rerun_switch_and_takes_a_certificate():
    opts = OPTIONS["mok_signing"]
    base = check("mok_signing")[0]
    secret = check("mok_signing", mok_signing_enrollment_password="hunter2")[0]
    assert I.digest(base, opts) == I.digest(secret, opts)
    assert I.digest(base, opts) != I.digest(base, opts, files={"mok_signing_controller_cert": "ab"})
    g = check("gdrcopy")[0]
    assert I.digest(g, OPTIONS["gdrcopy"], leave_out=("gdrcopy_fast_rerun",)) == I.digest(
        dict(g, gdrcopy_fast_rerun=False), OPTIONS["gdrcopy"], leave_out=("gdrcopy_fast_rerun",))


# --- hostile values, generated ---------------------------------------------------------------------------------

METACHARS = ["\n", "\r", "\x00", "\t", " ", ";", "&", "|", "$(", "`", "'", '"', "\\", ">", "<", "*", "?", "#",
             "%", "=", ":", "..", "../", "/", "//", "~", "!", "{", "}", "[", "]", "\u2028", "\x85", "\x1b[31m",
             "Ж", "é", "\ufeff", "-", "--", "+", ",", "@"]
# Plausible starts, so that the metacharacter lands in something that otherwise looks valid.
SEEDS = ["", "2.6", "6.1.0-28-amd64", "/opt/gdrcopy", "/var/lib/x", "nvidia-peermem", "gdrcopy", "0660", "v2.6",
         "https://example.org/g.tar.gz", "auto", "true", "a"]

hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="ascii"), max_size=40),
    st.builds(lambda seed, meta, tail: seed + meta + tail, st.sampled_from(SEEDS), st.sampled_from(METACHARS),
              st.text(max_size=12)),
    st.builds(lambda seed, n: seed * n, st.sampled_from(["a", "/a", "0", "Ж"]), st.integers(100, 3000)),
    st.sampled_from(METACHARS + SEEDS + ["false", "yes", "null", "None", "0o660", "0x1b6", "-1", "1e3"]),
)
wrong_type = st.one_of(st.booleans(), st.integers(-10 ** 6, 10 ** 6), st.floats(allow_nan=True), st.none(),
                       st.lists(hostile_text, max_size=3), st.dictionaries(hostile_text, hostile_text, max_size=2))
hostile = st.one_of(hostile_text, wrong_type, st.lists(hostile_text, min_size=1, max_size=4),
                    st.lists(st.dictionaries(st.sampled_from(["key", "cert", "x"]), hostile_text, max_size=3),
                             max_size=2))

TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "roles" / "gdrcopy" / "templates")),
                               undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
TEMPLATES.filters["quote"] = shlex.quote  # ansible's quote filter is shlex.quote


def dkms_reads(key, cert, tmp_dir):
    """What DKMS's bash reads from the framework.conf.d drop-in gdrcopy_mok writes (it sources the file)."""
    conf = Path(tmp_dir) / "gdrcopy-ansible.conf"
    conf.write_text(gdrcopy_mok.dkms_dropin(key, cert))
    out = subprocess.run(["bash", "-c", 'source "$1" && printf "%s\\0%s" "$mok_signing_key" "$mok_certificate"', "-",
                          str(conf)], capture_output=True, text=True, check=True).stdout
    return out.split("\0")


def render(name, normalised):
    return TEMPLATES.get_template(name).render(
        ansible_managed="Ansible managed", __gdrcopy_in=normalised, __gdrcopy_version=normalised["gdrcopy_version"],
        __gdrcopy_libexec="/usr/local/libexec/gdrcopy-ansible", __gdrcopy_current_link="/opt/gdrcopy/current")


def shell_word(value):
    """A value a shell reads as one plain word: quoting would not change it."""
    return isinstance(value, str) and value != "" and shlex.quote(value) == value


def strings(value):
    """Every string in value (keys and items of mappings and lists included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def assert_harmless(name, value, normalised):
    """Where an accepted value ends up, it is verbatim and cannot add a line, a word or a directive."""
    assert not any(I._CONTROL.search(text) for text in strings(value)), (name, value)  # no newline, NUL, ...
    kind = I.KINDS[role_of(name)][name]
    if name == "gdrcopy_version":
        # it names directories (the prefix, the build tree), never a line of modprobe.d: that file changes only
        # with an option
        conf = render("modprobe-gdrdrv.conf.j2", normalised)
        assert conf == render("modprobe-gdrdrv.conf.j2", dict(normalised, gdrcopy_version="2.6"))
        assert shell_word(value) and re.fullmatch(r"[0-9.]+", value)
    elif name == "gdrcopy_chain_modules":
        unit = render("gdrcopy.service.j2", normalised)
        starts = [line for line in unit.splitlines() if line.startswith("Exec")]
        assert starts == (["ExecStart=/sbin/modprobe nvidia"] + ["ExecStart=-/sbin/modprobe " + m for m in value]
                          + ["ExecStart=/sbin/modprobe gdrdrv", "ExecStart=/usr/local/libexec/gdrcopy-ansible/gdrdrv-mknod"])
        assert all(shell_word(m) and "%" not in m for m in value)
    elif name in ("gdrcopy_device_mode", "gdrcopy_device_group"):
        script = render("gdrdrv-mknod.j2", normalised)
        lines = dict(line.split("=", 1) for line in script.splitlines() if re.match(r"^(mode|group)=", line))
        assert lines == {"mode": normalised["gdrcopy_device_mode"], "group": normalised["gdrcopy_device_group"]}
        assert shell_word(lines["mode"]) and shell_word(lines["group"])
    elif name == "gdrcopy_module_params":
        conf = render("modprobe-gdrdrv.conf.j2", normalised)
        options_line = [line for line in conf.splitlines() if line.startswith("options")]
        assert options_line == (["options gdrdrv " + " ".join("%s=%d" % kv for kv in sorted(value.items()))]
                                if value else [])
    elif kind is I.KINDS["gdrcopy"]["gdrcopy_kernels"]:
        assert all(shell_word(k) and "/" not in k and ".." not in k for k in value)
    elif name == "mok_signing_key_dir":
        with tempfile.TemporaryDirectory() as tmp_dir:
            assert dkms_reads(value + "/mok.key", value + "/mok.der", tmp_dir) == [value + "/mok.key", value + "/mok.der"]
        assert shell_word(value) and "%" not in value
    elif getattr(kind, "what", "").startswith("an absolute path on the node") or name == "mok_signing_host_key_paths":
        paths = [p for pair in value for p in pair.values()] if isinstance(value, list) else [value]
        assert all(p == "" or (shell_word(p) and "%" not in p and "/../" not in p + "/") for p in paths)
    elif getattr(kind, "what", "").startswith("an absolute path on the controller"):
        assert value == "" or (value.startswith("/") and shlex.split(shlex.quote(value)) == [value])
    elif name == "gdrcopy_sign_command":
        assert json.loads(json.dumps(value)) == value and (not value or shell_word(value[0]))
    elif name == "gdrcopy_controller_signer":  # read on the controller; node_cert is a checked node path
        assert value == {} or (shell_word(value["node_cert"]) and value["cert"].startswith("/"))
    elif name == "mok_signing_pkcs11_uri":  # read by python-pkcs11 on the controller only
        assert value == "" or MS.parse_pkcs11_uri(value)


INPUTS = [(role, name) for role in ROLES for name in sorted(OPTIONS[role])]
# The other inputs that let a value through the rules that involve several (so that only its own kind stands
# between a hostile value and the host): a version outside the release table with its own tarball, any mode with
# world access, any git ref with unpinned sources allowed.
PERMISSIVE = {
    "gdrcopy_version": {"gdrcopy_source_url": "https://example.org/g.tar.gz", "gdrcopy_source_sha256": "a" * 64},
    "gdrcopy_device_mode": {"gdrcopy_device_world_access": True},
    "gdrcopy_source_git_ref": {"gdrcopy_source_type": "git", "gdrcopy_allow_unpinned": True},
    "gdrcopy_source_git_url": {"gdrcopy_source_type": "git"},
    "mok_signing_pkcs11_uri": {"mok_signing_sign_on_controller": True, "mok_signing_controller_cert": "/srv/c.der"},
}


@pytest.mark.fault(16)
@pytest.mark.parametrize("role,name", INPUTS, ids=["%s" % name for role, name in INPUTS])
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(value=hostile)
def test_a_hostile_value_is_refused_by_name_or_harmless(role, name, value):
    normalised, errors, concerns, _ = check(role, **dict(PERMISSIVE.get(name, {}), **{name: value}))
    if errors:
        assert any(name in e for e in errors), errors
        secret = OPTIONS[role][name].get("no_log")
        for e in errors:
            assert "\n" not in e and not I._CONTROL.search(e), e     # one line, whatever the value held
            assert len(e) < 900, e                                  # a long value is cut, not echoed whole
            if secret and isinstance(value, str) and len(value) > 3:
                assert value not in e.replace(name, "")                               # a password is never shown
    else:
        assert_harmless(name, normalised[name], normalised)


@pytest.mark.parametrize("key_dir", ["/var/lib/gdrcopy-ansible/mok", "/srv/keys/a+b@c", "/x/-y"])
def test_dkms_reads_the_key_pair_verbatim_from_its_drop_in(tmp_path, key_dir):
    """Before: mok_signing_key_dir went unquoted into framework.conf, which DKMS sources with bash (a space emptied
    the key setting, so DKMS signed with its own key). Now a space is refused and every value is quoted."""
    assert errors_of("mok_signing", mok_signing_key_dir=key_dir) == []
    assert dkms_reads(key_dir + "/mok.key", key_dir + "/mok.der", tmp_path) == [key_dir + "/mok.key", key_dir + "/mok.der"]
    # quoting alone would have saved a path with a space: the drop-in holds it whole
    assert dkms_reads("/a b/mok.key", "/a b/mok.der", tmp_path) == ["/a b/mok.key", "/a b/mok.der"]


# Another valid value for each input whose kind has no generic one (booleans, choices and integers do).
OTHER_VALUE = {
    "gdrcopy_version": "2.5", "gdrcopy_source_url": "https://mirror.example/g.tar.gz", "gdrcopy_source_sha256": "b" * 64,
    "gdrcopy_source_git_url": "https://mirror.example/gdrcopy.git", "gdrcopy_source_git_ref": "v2.6",
    "gdrcopy_cache_dir": "/srv/cache", "gdrcopy_releases": {"2.6": {"url": "https://mirror.example/g.tar.gz"}},
    "gdrcopy_artifact_dir": "/srv/builds", "gdrcopy_fleet_builders": "gpu_builders", "gdrcopy_kernels": ["6.1.0-28-amd64"], "gdrcopy_nvidia_src_dir": "/usr/src/nv",
    "gdrcopy_build_root": "/srv/build", "gdrcopy_prefix": "/opt/gdr", "gdrcopy_cuda_home": "/opt/cuda",
    "gdrcopy_module_params": {"dbg_enabled": 1}, "gdrcopy_device_mode": "0640", "gdrcopy_device_group": "video",
    "gdrcopy_chain_modules": ["nvidia-peermem"],
    "gdrcopy_sign_command": ["/usr/local/bin/sign"],
    "mok_signing_host_key_paths": [], "mok_signing_controller_key": "/srv/k.pem", "mok_signing_controller_cert": "/srv/c.der",
    "mok_signing_key_dir": "/srv/mok", "mok_signing_key_cn": "another name", "mok_signing_enrollment_password": "x",
    "gdrcopy_uninstall_key_dir": "/srv/mok", "gdrcopy_uninstall_mok_password": "x",
    "gdrcopy_controller_signer": {"cert": "/srv/c.der", "key": "/srv/k.pem", "node_cert": "/var/lib/mok/c.der"},
    "mok_signing_pkcs11_uri": "pkcs11:token=mok;object=gdrdrv", "mok_signing_pkcs11_module": "/usr/lib/p11.so",
    "mok_signing_pkcs11_pin": "1234",
}


def other_value(name, spec):
    if name in OTHER_VALUE:
        return OTHER_VALUE[name]
    if spec["type"] == "bool":
        return not spec["default"]
    if "choices" in spec:
        return next(c for c in spec["choices"] if c != spec["default"])
    if spec["type"] == "int":
        return spec["default"] + 1
    raise AssertionError("no other value for %s" % name)


@pytest.mark.parametrize("role,name", INPUTS, ids=["%s" % name for role, name in INPUTS])
def test_every_input_but_secrets_and_the_fast_rerun_switch_changes_the_digest(role, name):
    """Every input the roles act on is in the converged check's inputs: a change of any of them makes the next
    run do everything (before, the verify inputs were outside it, and the raw values were digested, so
    -e x=false and x: false differed). Those that change nothing site.yml does (the fast-rerun switch, what
    playbooks/uninstall.yml removes: I.NOT_STATE) are left out."""
    options = OPTIONS[role]
    value = other_value(name, options[name])
    # what else the other value needs to pass the rules between inputs: a ref needs a git source; the controller
    # key and certificate go together, so the pair (set against unset) is what changes for either
    extra = {"gdrcopy_source_git_ref": {"gdrcopy_source_type": "git"},
             "mok_signing_sign_on_controller": {"mok_signing_controller_cert": "/srv/c.der",
                                                "mok_signing_controller_key": "/srv/k.pem"},
             "mok_signing_pkcs11_uri": dict(PERMISSIVE["mok_signing_pkcs11_uri"],
                                            mok_signing_pkcs11_uri="pkcs11:token=a;object=b")}.get(
        name, PERMISSIVE.get(name, {}))
    pair = {"mok_signing_controller_key": "/srv/k.pem", "mok_signing_controller_cert": "/srv/c.der"}
    base, errors, _, _ = check(role, **extra)
    changed, errors2, _, _ = check(role, **dict(extra, **(pair if name in pair else {name: value})))
    assert errors == [] and errors2 == [], (errors, errors2)
    leave_out = I.NOT_STATE
    assert set(leave_out) == {"gdrcopy_fast_rerun"} | set(n for n in OPTIONS["gdrcopy"] if n.startswith("gdrcopy_uninstall_"))
    if options[name].get("no_log") or name in leave_out:
        assert I.digest(base, options, leave_out) == I.digest(changed, options, leave_out)
    else:
        assert I.digest(base, options, leave_out) != I.digest(changed, options, leave_out), name
    # the same value given as a string (as -e name=value gives it) digests the same once normalised
    if options[name]["type"] in ("bool", "int"):
        as_text = check(role, **dict(extra, **{name: str(value).lower()}))[0]
        assert I.digest(as_text, options, leave_out) == I.digest(changed, options, leave_out), name


@pytest.mark.fault(16)
def test_gdrdrv_mknod_leaves_no_half_made_node_when_the_group_is_missing(tmp_path):
    """Before: with a group that does not exist, chgrp failed after mknod and /dev/gdrdrv.gdrcopy-tmp.<pid> stayed.
    The rendered script runs with its /dev and /proc/devices pointed into tmp_path and mknod/chgrp stubbed."""
    normalised = check("gdrcopy", gdrcopy_device_group="nosuchgroup")[0]
    script = render("gdrdrv-mknod.j2", normalised)
    (tmp_path / "devices").write_text("Character devices:\n509 gdrdrv\n")
    script = script.replace("dev=/dev/gdrdrv", "dev=%s/gdrdrv" % tmp_path).replace("/proc/devices",
                                                                                    str(tmp_path / "devices"))
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "mknod").write_text('#!/bin/sh\n: > "$3"\n')                     # mknod -m MODE PATH c MAJOR MINOR
    (stubs / "chgrp").write_text('#!/bin/sh\necho "chgrp: invalid group: $1" >&2\nexit 1\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    (tmp_path / "mknod.sh").write_text(script)
    r = subprocess.run(["sh", str(tmp_path / "mknod.sh")], capture_output=True, text=True,
                       env={"PATH": "%s:/usr/bin:/bin" % stubs})
    assert r.returncode != 0 and "invalid group" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "devices", "mknod.sh"], "no temporary node is left"
