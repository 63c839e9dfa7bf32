"""roles/gdrcopy/files/gdrcopy-kernel-hook: a kernel installed between runs gets gdrdrv, built by the real
gdrcopy-build helper from a small tarball whose Makefile writes a module, with the stamp the role would write,
signed by a command and installed; only depmod is answered by the test (the kernel is not real)."""

import hashlib
import json
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import jinja2
import pytest
import yaml

from conftest import load_script

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "gdrcopy"
FILES = ROLE / "files"
KERNEL = "6.1.0-99-amd64"


hook = load_script(FILES / "gdrcopy-kernel-hook", "gdrcopy_kernel_hook")


@pytest.fixture
def host(tmp_path):
    """A build root with a source tarball, a modules root with KERNEL's headers, a signing command, the config."""
    tree = tmp_path / "tree" / "gdrcopy-2.6"
    tree.mkdir(parents=True)
    (tree / "Makefile").write_text("driver:\n\tmkdir -p src/gdrdrv && echo 'module for $(KVER)' > src/gdrdrv/gdrdrv.ko\n")
    tarball = tmp_path / "gdrcopy-2.6-abc.tar.gz"
    with tarfile.open(tarball, "w:gz") as t:
        t.add(tree, arcname="gdrcopy-2.6")
    modules = tmp_path / "lib-modules"
    (modules / KERNEL / "build").mkdir(parents=True)
    (modules / KERNEL / "build" / "Makefile").write_text("")
    signer = tmp_path / "sign"
    signer.write_text("#!/bin/sh\nfor a in \"$@\"; do case $a in *=*) echo ' signed' >> \"${a#*=}\";; esac; done\n"
                      "echo '{\"changed\": true}'\n")
    signer.chmod(0o755)
    sha = hashlib.sha256(tarball.read_bytes()).hexdigest()
    cfg = {"build_helper": str(FILES / "gdrcopy-build"), "tarball": str(tarball),
           "build_log": str(tmp_path / "build" / "builds.log"), "driver_dir": str(tmp_path / "build" / "driver"),
           "stamp_base": {"component": "driver", "source": "2.6-" + sha[:12], "sha256": sha,
                          "nvidia_src_dir": "/usr/src/nv", "flavor": "proprietary"},
           "nvidia_src_dir": "/usr/src/nv", "flavor": "proprietary", "module_subdir": "updates/gdrcopy",
           "sign_command": [str(signer), "--key", "/k", "--cert", "/c"]}
    config = tmp_path / "driver.json"
    config.write_text(json.dumps(cfg))
    return {"tmp": tmp_path, "modules": modules, "config": config, "cfg": cfg}


def depmod_only(calls):
    """subprocess.run for the hook: depmod is recorded and succeeds, everything else runs for real."""
    def run(argv, **kw):
        calls.append(argv)
        if argv[0] == "depmod":
            return subprocess.CompletedProcess(argv, 0, "", "")
        return subprocess.run(argv, **kw)
    return run


def hook_env(host, **extra):
    return dict({"GDRCOPY_KERNEL_HOOK_CONFIG": str(host["config"]), "GDRCOPY_KERNEL_HOOK_MODULES": str(host["modules"]),
                 "GDRCOPY_KERNEL_HOOK_STATUS": str(host["tmp"] / "status.json"), "PATH": "/usr/bin:/bin"}, **extra)


def run_hook(host, calls, **kw):
    """(the kernel's row of the pipeline's result, or None when it waits for headers; what the hook said)"""
    out = []
    rc = hook.run_hook(KERNEL, config=str(host["config"]), modules_root=str(host["modules"]), run=depmod_only(calls),
                       say=out.append, **kw)
    return rc, out


def test_a_new_kernel_gets_a_built_signed_installed_gdrdrv_with_the_roles_stamp(host):
    calls = []
    rc, out = run_hook(host, calls)
    assert rc["install"] == "installed", out
    installed = host["modules"] / KERNEL / "updates" / "gdrcopy" / "gdrdrv.ko"
    assert installed.read_text() == f"module for {KERNEL}\n signed\n"
    build_dir = Path(host["cfg"]["driver_dir"]) / KERNEL
    assert json.loads((build_dir / ".gdrcopy-stamp.json").read_text()) == dict(host["cfg"]["stamp_base"], kernel=KERNEL)
    assert (build_dir / "gdrdrv.ko").read_bytes() == installed.read_bytes()  # what the role's install would copy
    assert ["depmod", KERNEL] in calls
    log = Path(host["cfg"]["build_log"]).read_text().splitlines()
    assert len(log) == 1 and f"KVER={KERNEL} " in log[0]


def test_the_hook_runs_the_modules_pipeline_with_the_roles_argv(host):
    """One pipeline, two callers: the hook imports the gdrcopy_build module's module_utils file, not a copy."""
    assert Path(hook.pipeline.__file__).resolve() == REPO / "plugins" / "module_utils" / "gdrcopy_pipeline.py"
    argv = hook.pipeline.driver_build_argv(hook.load_config(str(host["config"])), KERNEL)
    assert argv[argv.index("--") + 1:] == ["make", "driver", f"KVER={KERNEL}", "NVIDIA_SRC_DIR=/usr/src/nv",
                                           "NVIDIA_IS_OPENSOURCE=n"]
    assert json.loads(argv[argv.index("--stamp") + 1]) == dict(host["cfg"]["stamp_base"], kernel=KERNEL)


def test_the_role_installs_the_modules_pipeline_file_beside_the_hook():
    """The kernel hook's files (vars/main.yml) put __gdrcopy_pipeline_file, which names the tracked module_utils
    file from role_path, beside the helper, under the name the helper imports."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    path = Path(role_vars["__gdrcopy_pipeline_file"].replace("{{ role_path }}", str(ROLE))).resolve()
    assert path == REPO / "plugins" / "module_utils" / "gdrcopy_pipeline.py"
    assert path.is_file()  # test_repository.py checks that git tracks it
    files = dict((f["dest"], f["content"]) for f in role_vars["__gdrcopy_kernel_hook_files"])
    assert files["{{ __gdrcopy_libexec }}/gdrcopy_pipeline.py"] == \
        "{{ lookup('ansible.builtin.file', __gdrcopy_pipeline_file, rstrip=false) }}"
    assert "import gdrcopy_pipeline as pipeline" in (ROLE / "files" / "gdrcopy-kernel-hook").read_text()
    assert "{{ lookup('ansible.builtin.file', 'gdrcopy-kernel-hook', rstrip=false) }}" in files.values()


def test_a_second_call_compiles_nothing_and_changes_no_file(host):
    run_hook(host, [])
    installed = host["modules"] / KERNEL / "updates" / "gdrcopy" / "gdrdrv.ko"
    before = installed.stat().st_mtime_ns
    # the real signer skips a module it signed; this one would append again, so stand in for that
    host["cfg"]["sign_command"] = []
    host["config"].write_text(json.dumps(host["cfg"]))
    calls = []
    rc, out = run_hook(host, calls)
    assert rc["install"] == "current" and calls == [], calls
    assert installed.stat().st_mtime_ns == before
    assert out == [f"gdrcopy-kernel-hook: gdrdrv for {KERNEL} is installed and current"]
    assert len(Path(host["cfg"]["build_log"]).read_text().splitlines()) == 1


def test_without_headers_it_waits_for_them(host):
    (host["modules"] / KERNEL / "build" / "Makefile").unlink()
    calls = []
    rc, out = run_hook(host, calls)
    assert rc is None and calls == []
    assert "no headers for 6.1.0-99-amd64 yet" in out[0]
    assert not (host["modules"] / KERNEL / "updates").exists()
    r = subprocess.run([sys.executable, str(FILES / "gdrcopy-kernel-hook"), KERNEL], capture_output=True, text=True,
                       env=hook_env(host))
    status = json.loads((host["tmp"] / "status.json").read_text())  # not "installed": nothing is, yet
    assert r.returncode == 0 and (status["ok"], status["state"]) == (True, "waiting for headers")


def test_check_says_what_it_would_do_and_does_nothing(host):
    calls = []
    rc, out = run_hook(host, calls, check=True)
    assert rc["build"] == "would build" and calls == []
    assert out == [f"gdrcopy-kernel-hook: would build, sign, install gdrdrv for {KERNEL}"]
    assert not Path(host["cfg"]["driver_dir"]).exists()


@pytest.mark.fault(8)
def test_a_failed_build_installs_nothing_and_never_fails_the_package_manager(host):
    (host["tmp"] / "tree" / "gdrcopy-2.6" / "Makefile").write_text("driver:\n\techo broken >&2; exit 2\n")
    with tarfile.open(host["cfg"]["tarball"], "w:gz") as t:
        t.add(host["tmp"] / "tree" / "gdrcopy-2.6", arcname="gdrcopy-2.6")
    host["cfg"]["stamp_base"]["sha256"] = hashlib.sha256(Path(host["cfg"]["tarball"]).read_bytes()).hexdigest()
    host["config"].write_text(json.dumps(host["cfg"]))
    with pytest.raises(hook.HookError, match="build for 6.1.0-99-amd64 failed"):
        run_hook(host, [])
    assert not (host["modules"] / KERNEL / "updates").exists()
    r = subprocess.run([sys.executable, str(FILES / "gdrcopy-kernel-hook"), KERNEL], capture_output=True, text=True,
                       env=hook_env(host))
    assert r.returncode == 0
    assert "failed" in r.stderr and "the kernel stays installed" in r.stderr
    status = json.loads((host["tmp"] / "status.json").read_text())
    assert status["kernel"] == KERNEL and status["ok"] is False and "build for" in status["msg"]


def test_a_dmabuf_record_builds_nothing_and_records_why(host):
    host["config"].write_text(json.dumps(dict(host["cfg"], backend="dmabuf")))
    calls = []
    row, out = run_hook(host, calls)
    assert row == {"kernel": KERNEL, "install": hook.NOT_NEEDED} and calls == []
    assert out == ["gdrcopy-kernel-hook: the DMA-BUF backend needs no gdrdrv: nothing to build for %s" % KERNEL]
    r = subprocess.run([sys.executable, str(FILES / "gdrcopy-kernel-hook"), KERNEL], capture_output=True, text=True,
                       env=hook_env(host))
    assert r.returncode == 0 and not (host["modules"] / KERNEL / "updates").exists()
    status = json.loads((host["tmp"] / "status.json").read_text())
    assert status["ok"] is True and status["msg"] == "no gdrdrv for %s: the DMA-BUF backend needs none" % KERNEL
    assert status["state"] == "not needed"


def test_a_missing_or_partial_config_says_to_run_the_playbook(tmp_path):
    with pytest.raises(hook.HookError, match="run the gdrcopy-ansible playbook again"):
        hook.load_config(str(tmp_path / "none.json"))
    (tmp_path / "partial.json").write_text("{}")
    with pytest.raises(hook.HookError, match="lacks build_helper"):
        hook.load_config(str(tmp_path / "partial.json"))


def wrapper(tmp_path, helper):
    """The /etc/kernel/postinst.d script as the role writes it (templates/kernel-hook-call.j2, the content of its
    entry in vars/main.yml), with the helper at helper."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    calls = [f["content"] for f in role_vars["__gdrcopy_kernel_hook_files"] if "/etc/kernel/" in f["dest"]]
    assert calls == ["{{ lookup('ansible.builtin.template', 'kernel-hook-call.j2') }}"] * 2
    content = (ROLE / "templates" / "kernel-hook-call.j2").read_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["quote"] = shlex.quote
    script = tmp_path / "zz-gdrcopy-ansible"
    script.write_text(env.from_string(content).render(__gdrcopy_libexec=str(helper.parent), __gdrcopy_kernel_hook_timeout=2))
    script.chmod(0o755)
    return script


@pytest.mark.fault(8)
@pytest.mark.parametrize("case", ["missing", "not-python", "killed"])
def test_the_kernel_hook_never_fails_the_package_manager(tmp_path, case):
    """Before: the wrapper exec'd the helper, so a missing helper made the kernel's postinst fail (exit 127) and
    run-parts --exit-on-error stopped apt. Now it exits 0 whatever the helper does."""
    libexec = tmp_path / "libexec"
    libexec.mkdir()
    helper = libexec / "gdrcopy-kernel-hook"
    if case == "not-python":
        helper.write_text("#!/nonexistent/python3\n")
        helper.chmod(0o755)
    elif case == "killed":
        helper.write_text("#!/bin/sh\nkill -9 $$\n")
        helper.chmod(0o755)
    parts = tmp_path / "postinst.d"
    parts.mkdir()
    wrapper(parts, helper)
    r = subprocess.run(["run-parts", "--exit-on-error", "--arg", KERNEL, str(parts)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "the next Ansible run builds it" in r.stderr and KERNEL in r.stderr


@pytest.mark.fault(8)
@pytest.mark.parametrize("config", ["null", "[]", '{"build_helper": null}'])
def test_a_record_that_is_not_what_the_role_wrote_is_reported_not_raised(host, config):
    """Before: a null in the record (or a record that is no object) raised TypeError out of the hook."""
    host["config"].write_text(config if config != '{"build_helper": null}'
                              else json.dumps(dict(host["cfg"], build_helper=None)))
    r = subprocess.run([sys.executable, str(FILES / "gdrcopy-kernel-hook"), KERNEL], capture_output=True, text=True,
                       env=hook_env(host))
    assert r.returncode == 0 and "run the gdrcopy-ansible playbook again" in r.stderr, r.stderr
    assert json.loads((host["tmp"] / "status.json").read_text())["ok"] is False


@pytest.mark.fault(8)
def test_a_build_that_prints_bytes_or_hangs_is_reported_and_stopped(host):
    tree = host["tmp"] / "tree" / "gdrcopy-2.6"
    (tree / "Makefile").write_text("driver:\n\tprintf '\\377\\376 not utf-8\\n' >&2; sleep 30\n")
    with tarfile.open(host["cfg"]["tarball"], "w:gz") as t:
        t.add(tree, arcname="gdrcopy-2.6")
    host["cfg"]["stamp_base"]["sha256"] = hashlib.sha256(Path(host["cfg"]["tarball"]).read_bytes()).hexdigest()
    host["config"].write_text(json.dumps(dict(host["cfg"], timeout=2)))
    r = subprocess.run([sys.executable, str(FILES / "gdrcopy-kernel-hook"), KERNEL], capture_output=True, text=True,
                       env=hook_env(host), timeout=60)
    assert r.returncode == 0 and "ran past its time limit of 2 s" in r.stderr, r.stderr
    status = json.loads((host["tmp"] / "status.json").read_text())
    assert status["ok"] is False and not (host["modules"] / KERNEL / "updates").exists()


def test_with_the_controller_signing_a_new_kernel_is_built_and_waits_for_the_next_run(host):
    """No key on the host: the module is built, left unsigned and not installed (Secure Boot would refuse it), the
    status says so, and gdrcopy_info reports the kernel as awaiting signature (the report's warning)."""
    host["cfg"].update(sign_command=[], sign_cert=str(REPO / "tests/fixtures/modsign/cert-a.der"))
    host["config"].write_text(json.dumps(host["cfg"]))
    calls = []
    row, out = run_hook(host, calls)
    assert (row["build"], row["sign"], row["install"]) == ("built", "awaiting signature", "awaiting signature")
    assert not (host["modules"] / KERNEL / "updates").exists() and ["depmod", KERNEL] not in calls
    assert out[-1] == ("gdrcopy-kernel-hook: gdrdrv for %s is built, awaiting signature: the controller signs it, "
                       "so the next Ansible run signs and installs it" % KERNEL)
    status = host["tmp"] / "status.json"
    r = subprocess.run([sys.executable, str(FILES / "gdrcopy-kernel-hook"), KERNEL], capture_output=True, text=True,
                       env=hook_env(host))
    assert r.returncode == 0, r.stderr
    got = json.loads(status.read_text())
    assert got["ok"] is True and got["state"] == "awaiting signature" and "awaiting signature" in got["msg"]
    assert not (host["modules"] / KERNEL / "updates").exists()
