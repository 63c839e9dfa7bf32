"""Bad role variables are refused by each role's tasks/validate.yml (argument specs, then the cross-variable rules)
with one message that names the variable, run for real with ansible-playbook on the controller. validate.yml only
reads and asserts, and preflight runs it on every host before any role changes anything."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "tests" / "unit" / "playbooks" / "validate.yml"
BIN = Path(sys.executable).parent


def validate(tmp_path, role, *key_values, **variables):
    """Run the role's validate.yml; key_values are passed as `-e name=value` (strings, as a user types them)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    extra = dict(variables, validate_role=role, ansible_python_interpreter=sys.executable)
    argv = [str(BIN / "ansible-playbook"), "-i", "localhost,", str(PLAYBOOK), "-e", json.dumps(extra)]
    for kv in key_values:
        argv += ["-e", kv]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    return r.returncode, " ".join((r.stdout + r.stderr).split())  # one line: messages wrap in the output


def normalised(out):
    return json.loads(re.search(r"NORMALISED (\{.*\}) END", out).group(1))


@pytest.mark.parametrize("role", ["gdrcopy", "mok_signing", "nvidia_peermem"])
def test_the_defaults_pass(tmp_path, role):
    rc, out = validate(tmp_path, role)
    assert rc == 0 and "VALIDATION PASSED" in out, out


@pytest.mark.parametrize("role,variables,named", [
    # wrong types
    ("gdrcopy", {"gdrcopy_load": "sometimes"}, "gdrcopy_load"),
    ("gdrcopy", {"gdrcopy_kernels": {"a": 1}}, "gdrcopy_kernels"),
    ("gdrcopy", {"gdrcopy_module_params": {"use_persistent_mapping": "yes please"}}, "use_persistent_mapping"),
    ("mok_signing", {"mok_signing_key_days": "forever"}, "mok_signing_key_days"),
    ("nvidia_peermem", {"nvidia_peermem_persist": "maybe"}, "nvidia_peermem_persist"),
    # unknown choices
    ("gdrcopy", {"gdrcopy_mode": "container"}, "gdrcopy_mode"),
    ("gdrcopy", {"gdrcopy_nvidia_flavor": "closed"}, "gdrcopy_nvidia_flavor"),
    ("gdrcopy", {"gdrcopy_module_params": {"dbg_enabled": 2}}, "dbg_enabled"),
    ("mok_signing", {"mok_signing_key_source": "hsm"}, "mok_signing_key_source"),
    ("nvidia_peermem", {"nvidia_peermem_state": "maybe"}, "nvidia_peermem_state"),
    ("nvidia_peermem", {"nvidia_peermem_legacy_nv_peer_mem": "keep"}, "nvidia_peermem_legacy_nv_peer_mem"),
    # mode strings
    ("gdrcopy", {"gdrcopy_device_mode": 432}, "gdrcopy_device_mode"),
    ("gdrcopy", {"gdrcopy_device_mode": "rw-rw----"}, "gdrcopy_device_mode"),
    ("gdrcopy", {"gdrcopy_device_mode": "0666"}, "gdrcopy_device_world_access"),
    # values of the right type that cannot work
    ("gdrcopy", {"gdrcopy_source_sha256": "abc"}, "gdrcopy_source_sha256"),
    ("gdrcopy", {"gdrcopy_source_url": "ssh://mirror/gdrcopy.tar.gz"}, "gdrcopy_source_url"),
    ("gdrcopy", {"gdrcopy_version": "2.9"}, 'gdrcopy_version "2.9"'),
    ("mok_signing", {"mok_signing_key_dir": "relative/dir"}, "mok_signing_key_dir"),
    # issue 14: each passed validation before (tests/unit/test_inputs.py has them all, through the plugin alone)
    ("gdrcopy", {"gdrcopy_device_mode": "0666\n"}, "gdrcopy_device_mode"),
    ("gdrcopy", {"gdrcopy_device_mode": "0664"}, "gdrcopy_device_world_access"),
    ("gdrcopy", {"gdrcopy_device_mode": "4660"}, "set-user-ID"),
    ("gdrcopy", {"gdrcopy_version": "2.6\ninstall nvidia /bin/sh -c id", "gdrcopy_source_url": "https://x/g.tar.gz",
                 "gdrcopy_source_sha256": "a" * 64}, "gdrcopy_version"),
    ("gdrcopy", {"gdrcopy_version": "../../../usr", "gdrcopy_source_url": "https://x/g.tar.gz",
                 "gdrcopy_source_sha256": "a" * 64}, "gdrcopy_version"),
    ("gdrcopy", {"gdrcopy_chain_modules": ["nvidia-peermem\nExecStartPre=/bin/sh -c id"]}, "gdrcopy_chain_modules[0]"),
    ("gdrcopy", {"gdrcopy_prefix": "/opt/gdrcopy; touch /tmp/x"}, "gdrcopy_prefix"),
    ("gdrcopy", {"gdrcopy_kernels": "6.1.0-28-amd64"}, "gdrcopy_kernels"),
    ("mok_signing", {"mok_signing_key_dir": "/var/lib/gdrcopy ansible/mok"}, "mok_signing_key_dir"),
    ("mok_signing", {"mok_signing_key_cn": "x" * 40 + "\n"}, "mok_signing_key_cn"),
])
@pytest.mark.fault(10)
def test_a_bad_variable_is_refused_with_its_name(tmp_path, role, variables, named):
    rc, out = validate(tmp_path, role, **variables)
    assert rc != 0 and "VALIDATION PASSED" not in out, out
    assert named in out, out


@pytest.mark.fault(17)
def test_booleans_given_as_key_value_extra_vars_are_booleans_to_the_role(tmp_path):
    """-e gdrcopy_load=false is the string "false": before, it passed the spec and stayed a string (true in a
    template, an error in a 2.19 `when:`); the role now reads False."""
    rc, out = validate(tmp_path, "gdrcopy", "gdrcopy_load=false", "gdrcopy_kernel_hook=no", "gdrcopy_fast_rerun=0",
                       "gdrcopy_device_group_create=False", "gdrcopy_version=2.6")
    assert rc == 0, out
    got = normalised(out)
    assert [got[k] for k in ("gdrcopy_load", "gdrcopy_kernel_hook", "gdrcopy_fast_rerun",
                             "gdrcopy_device_group_create")] == [False] * 4
    rc, out = validate(tmp_path, "mok_signing", "mok_signing_enabled=false", "mok_signing_secure_logging=yes")
    assert rc == 0 and normalised(out)["mok_signing_enabled"] is False, out


@pytest.mark.fault(10)
def test_world_access_is_warned_about_on_every_run(tmp_path):
    rc, out = validate(tmp_path, "gdrcopy", gdrcopy_device_mode="0666", gdrcopy_device_world_access=True)
    assert rc == 0 and "[WARNING]" in out and "every local user" in out, out


@pytest.mark.fault(16)
def test_several_bad_variables_are_named_in_one_message(tmp_path):
    rc, out = validate(tmp_path, "gdrcopy", gdrcopy_version="../../../usr", gdrcopy_chain_modules=["a\nExecStartPre=x"])
    assert rc != 0 and "gdrcopy_version" in out and "gdrcopy_chain_modules[0]" in out, out
    assert out.count("gdrcopy_version must be") == out.count("nothing was changed"), out  # one message, not one each


def test_secret_inputs_never_show_at_any_verbosity(tmp_path):
    """The validation result holds every normalised input: with a secret among them (the enrollment password, the
    PKCS#11 PIN, the controller's signer with its PIN) it is not shown, even at -vvvv."""
    secrets = {"mok_signing_enrollment_password": "Pw-4711-secret", "mok_signing_pkcs11_pin": "PIN-0815-secret"}
    extra = dict(secrets, validate_role="mok_signing", validate_show=False, ansible_python_interpreter=sys.executable,
                 mok_signing_sign_on_controller=True, mok_signing_controller_cert=str(tmp_path / "c.der"),
                 mok_signing_pkcs11_uri="pkcs11:token=fleet;object=mok")
    (tmp_path / "c.der").write_bytes(b"not read for the check")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    (tmp_path / "vars.json").write_text(json.dumps(extra))  # from a file: -vvvv prints the command line
    r = subprocess.run([str(BIN / "ansible-playbook"), "-vvvv", "-i", "localhost,", str(PLAYBOOK), "-e",
                        "@%s" % (tmp_path / "vars.json")], env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "VALIDATION PASSED" in out, out[-3000:]
    assert "mok_signing_key_source" not in out  # the result is not dumped
    for secret in ("Pw-4711-secret", "PIN-0815-secret"):
        assert secret not in out
