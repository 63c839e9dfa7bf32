"""plugins/modules/gdrcopy_build and module_utils/gdrcopy_pipeline: the per-host pipeline, run for real.

The builds are the role's own gdrcopy-build and gdrcopy-install helpers on the fixture source tree (upstream's build
interface; its library is compiled by the host's compiler). Only two things stand in: gdrdrv's kbuild step (there
are no kernel headers here: src/gdrdrv/Makefile writes a file that names its inputs), and the signer (a script with
mok-sign's interface: --check, KERNEL=MODULE, a JSON result). depmod is recorded, not run: the kernels are not real.
The module is also run once through ansible-playbook, for its argument spec, check mode and diff.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as P
from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_build as M

REPO = Path(__file__).resolve().parents[2]
FILES = REPO / "roles" / "gdrcopy" / "files"
K1, K2 = "6.1.0-41-amd64", "6.12.48+deb13-amd64"

STUB_KBUILD = "all:\n\tprintf 'gdrdrv for %s from %s (%s)\\n' '$(KVER)' '$(NVIDIA_SRC_DIR)' '$(NVIDIA_IS_OPENSOURCE)' > gdrdrv.ko\n"
SIGNER = r"""#!/bin/sh
# mok-sign's interface: --check predicts; a module that ends in "signed" is ours already.
check=; out='{"changed": false, "results": ['; sep=
for a in "$@"; do
  case $a in
    --check) check=1 ;;
    *=*) k=${a%%=*}; m=${a#*=}
         if [ -f "$m" ] && [ "$(tail -c 7 "$m")" = "signed" ]; then act=unchanged
         else act=signed; [ -n "$check" ] || echo signed >> "$m"; fi
         out="$out$sep{\"kernel\": \"$k\", \"action\": \"$act\"}"; sep=", " ;;
  esac
done
echo "$out]}"
"""


def make_tarball(tmp_path, kbuild=STUB_KBUILD, name="src"):
    tree = tmp_path / name / "gdrcopy-2.6"
    shutil.copytree(REPO / "tests" / "fixtures" / "gdrcopy-src", tree)
    (tree / "src" / "gdrdrv" / "Makefile").write_text(kbuild)
    tarball = tmp_path / name / "gdrcopy-2.6.tar.gz"
    with tarfile.open(tarball, "w:gz") as t:
        t.add(tree, arcname="gdrcopy-2.6")
    return tarball, hashlib.sha256(tarball.read_bytes()).hexdigest()


@pytest.fixture
def host(tmp_path):
    """A node: the tarball, two kernels with headers, a signer, a prefix; the module's params for it."""
    tarball, sha = make_tarball(tmp_path)
    modules = tmp_path / "lib-modules"
    for k in (K1, K2):
        (modules / k / "build").mkdir(parents=True)
        (modules / k / "build" / "Makefile").write_text("")
    signer = tmp_path / "sign"
    signer.write_text(SIGNER)
    signer.chmod(0o755)
    build = tmp_path / "build" / ("2.6-" + sha[:12])
    params = {
        "kernels": [K1, K2], "install": True, "record": None,
        "lib": {"dir": str(build / "lib"), "stamp": {"component": "lib", "sha256": sha, "tests": False},
                "targets": ["lib"], "install_dir": str(tmp_path / "opt" / "gdrcopy" / "2.6"),
                "install_targets": ["lib_install"], "install_helper": str(FILES / "gdrcopy-install")},
        "driver": {"build_helper": str(FILES / "gdrcopy-build"), "tarball": str(tarball),
                   "build_log": str(tmp_path / "build" / "builds.log"), "driver_dir": str(build / "driver"),
                   "stamp_base": {"component": "driver", "sha256": sha, "nvidia_src_dir": "/usr/src/nv",
                                  "flavor": "open"},
                   "nvidia_src_dir": "/usr/src/nv", "flavor": "open", "module_subdir": "updates/gdrcopy",
                   "sign_command": [str(signer), "--key", "/k", "--cert", "/c"], "sign_cert": "",
                   "timeout": 600, "backend": "gdrdrv"},
    }
    return {"tmp": tmp_path, "modules": modules, "params": params, "depmod": [], "ldconfig": [], "cache": ""}


def call(host, check=False, **changes):
    params = dict(host["params"], **changes)

    def run(argv, **kw):
        if argv[0] == "depmod":
            host["depmod"].append(argv[1])
            return subprocess.CompletedProcess(argv, 0, "", "")
        if argv[0] == "ldconfig":  # the loader cache of this node: what the last ldconfig found under the link
            host["ldconfig"].append(argv[1:])
            if argv[1:] == ["-p"]:
                return subprocess.CompletedProcess(argv, 0, host["cache"], "")
            link = Path((params.get("lib") or {}).get("link") or "/nonexistent")
            host["cache"] = "".join("\tlibgdrapi.so (libc6,x86-64) => %s\n" % (link / "lib" / f.name)
                                    for f in sorted((link / "lib").glob("libgdrapi.so*")))
            return subprocess.CompletedProcess(argv, 0, "", "")
        return subprocess.run(argv, **kw)
    return M.build(params, check=check, modules_root=str(host["modules"]), run=run,
                   rollback_record=str(host["tmp"] / "state" / "rollback.json"))


def installed(host, kernel):
    return host["modules"] / kernel / "updates" / "gdrcopy" / "gdrdrv.ko"


def compiles(host):
    log = Path(host["params"]["driver"]["build_log"])
    return log.read_text().splitlines() if log.exists() else []


def tree(top):
    return dict((str(p.relative_to(top)), p.read_bytes() if p.is_file() else None)
                for p in sorted(Path(top).rglob("*"))) if Path(top).exists() else {}


def rows(result):
    return dict((r["kernel"], (r["build"], r["sign"], r["install"])) for r in result["kernels"])


# --- the whole pipeline ----------------------------------------------------------------------------------------

def test_a_fresh_host_gets_everything_built_signed_installed_in_one_call(host):
    result, error = call(host)
    assert error is None, error
    assert result["changed"] and result["built"] == [K1, K2] and result["installed"] == [K1, K2]
    assert result["lib"] == {"build": "built", "install": "installed"}
    assert rows(result) == {K1: ("built", "signed", "installed"), K2: ("built", "signed", "installed")}
    assert installed(host, K1).read_text() == f"gdrdrv for {K1} from /usr/src/nv (y)\nsigned\n"
    assert host["depmod"] == [K1, K2]
    assert len(compiles(host)) == 3  # the library and two kernels
    prefix = Path(host["params"]["lib"]["install_dir"])
    assert json.loads((prefix / ".gdrcopy-install.json").read_text()) == host["params"]["lib"]["stamp"]
    stamp = json.loads((Path(host["params"]["driver"]["driver_dir"]) / K2 / ".gdrcopy-stamp.json").read_text())
    assert stamp == dict(host["params"]["driver"]["stamp_base"], kernel=K2)


def test_the_dmabuf_backend_builds_and_installs_the_library_and_no_gdrdrv(host):
    record = host["tmp"] / "etc" / "driver.json"
    driver = dict(host["params"]["driver"], backend="dmabuf")
    result, error = call(host, driver=driver, record=str(record))
    assert error is None, error
    assert result["lib"] == {"build": "built", "install": "installed"} and result["kernels"] == []
    assert (result["built"], result["installed"], host["depmod"]) == ([], [], [])
    assert len(compiles(host)) == 1  # the library; a gdrdrv host compiles one per kernel too
    assert not list(host["modules"].rglob("gdrdrv.ko"))
    # the record says so: the kernel hook and a kernels-only rerun build nothing with it
    assert json.loads(record.read_text())["backend"] == "dmabuf"
    assert call(host, driver=driver, record=str(record))[0]["changed"] is False


def test_a_rerun_compiles_signs_and_copies_nothing(host):
    call(host)
    before = (tree(host["modules"]), tree(host["params"]["lib"]["install_dir"]))
    host["depmod"].clear()
    result, error = call(host)
    assert error is None and result["changed"] is False, result
    assert rows(result) == {K1: ("current", "unchanged", "current"), K2: ("current", "unchanged", "current")}
    assert result["lib"] == {"build": "current", "install": "current"}
    assert (tree(host["modules"]), tree(host["params"]["lib"]["install_dir"])) == before
    assert host["depmod"] == [] and len(compiles(host)) == 3


def test_a_new_kernel_costs_one_compile(host):
    call(host, kernels=[K1])
    result, error = call(host)
    assert error is None and result["built"] == [K2] and result["installed"] == [K2]
    assert result["lib"] == {"build": "current", "install": "current"}
    assert len(compiles(host)) == 3


def test_the_stable_link_points_at_the_install_and_the_loader_cache_lists_it(host):
    link = host["tmp"] / "opt" / "gdrcopy" / "current"
    lib = dict(host["params"]["lib"], link=str(link))
    result, error = call(host, check=True, lib=lib)
    assert error is None and result["lib"]["link"] == "would point" and not os.path.lexists(link)
    assert host["ldconfig"] == []  # check mode runs nothing
    result, error = call(host, lib=lib)
    assert error is None and os.readlink(link) == "2.6", result
    assert result["lib"]["link"] == "pointed" and result["lib"]["ldconfig"] and host["ldconfig"] == [[]]
    assert "=> %s/lib/libgdrapi.so\n" % link in host["cache"]
    result, error = call(host, lib=lib)
    assert error is None and result["changed"] is False and host["ldconfig"] == [[], ["-p"]], result
    assert result["lib"] == {"build": "current", "install": "current", "link": "current", "ldconfig": False}
    # A run killed before its ldconfig left the cache without libgdrapi: the next run heals it (a change).
    host["cache"] = ""
    result, error = call(host, lib=lib)
    assert error is None and result["changed"] and result["lib"]["ldconfig"] and host["cache"], result


def test_a_link_path_that_is_no_link_stops_the_install(host):
    link = host["tmp"] / "opt" / "gdrcopy" / "current"
    link.mkdir(parents=True)
    result, error = call(host, lib=dict(host["params"]["lib"], link=str(link)))
    assert error == "%s is there and is no symbolic link: move it away, then run again" % link and link.is_dir()


def test_check_mode_predicts_per_kernel_and_writes_nothing(host):
    result, error = call(host, check=True)
    assert error is None and result["changed"]
    assert rows(result) == {K1: ("would build", "would sign", "would install"),
                            K2: ("would build", "would sign", "would install")}
    assert result["lib"] == {"build": "would build", "install": "would install"}
    assert not (host["tmp"] / "build").exists() and not (host["tmp"] / "opt").exists()
    assert tree(host["modules"]) == tree(host["modules"]) and not installed(host, K1).exists()
    call(host, kernels=[K1])
    result, error = call(host, check=True)
    assert rows(result) == {K1: ("current", "unchanged", "current"), K2: ("would build", "would sign", "would install")}


def test_check_mode_asks_the_signer_about_built_modules(host):
    """A module signed by another key (or not at all) is predicted to be signed, through the signer's --check."""
    call(host, kernels=[K1])
    built = Path(host["params"]["driver"]["driver_dir"]) / K1 / "gdrdrv.ko"
    built.write_text("gdrdrv rebuilt by hand\n")
    result, error = call(host, check=True, kernels=[K1])
    assert rows(result)[K1] == ("current", "would sign", "would install")
    assert built.read_text() == "gdrdrv rebuilt by hand\n"


def test_check_mode_before_the_signer_is_installed(host):
    host["params"]["driver"]["sign_command"][0] = str(host["tmp"] / "not-installed-yet")
    call(host, kernels=[K1], driver=dict(host["params"]["driver"], sign_command=[]))
    result, error = call(host, check=True)
    assert error is None and rows(result)[K1] == ("current", "would sign", "would install")


def test_diff_gives_the_module_checksums_and_the_install_stamp(host):
    result, dummy = call(host, kernels=[K1])
    digest = hashlib.sha256(installed(host, K1).read_bytes()).hexdigest()
    headers = [d["before_header"] for d in result["diff"]]
    assert headers == [host["params"]["lib"]["install_dir"], str(installed(host, K1))]
    assert result["diff"][1] == {"before_header": str(installed(host, K1)), "after_header": str(installed(host, K1)),
                                 "before": "", "after": "sha256 %s\n" % digest}


def test_without_a_signer_modules_are_installed_unsigned(host):
    result, error = call(host, driver=dict(host["params"]["driver"], sign_command=[]))
    assert error is None and rows(result)[K1] == ("built", "off", "installed")
    assert installed(host, K1).read_text().endswith("(y)\n")


def test_build_only_installs_nothing(host):
    result, error = call(host, install=False, record=str(host["tmp"] / "record.json"))
    assert error is None and result["built"] == [K1, K2] and result["installed"] == []
    assert result["lib"] == {"build": "built", "install": "skipped"}
    assert not installed(host, K1).exists() and not (host["tmp"] / "opt").exists()
    assert not (host["tmp"] / "record.json").exists()


# --- all or nothing --------------------------------------------------------------------------------------------

@pytest.mark.fault(8)
def test_a_failed_build_installs_nothing(host):
    call(host, kernels=[K1])
    before = (tree(host["modules"]), tree(host["params"]["lib"]["install_dir"]))
    tarball, sha = make_tarball(host["tmp"], kbuild="all:\n\t@echo 'gdrdrv.c:1: error: broken' >&2; exit 2\n",
                                name="broken")
    driver = dict(host["params"]["driver"], tarball=str(tarball),
                  stamp_base=dict(host["params"]["driver"]["stamp_base"], sha256=sha))
    lib = dict(host["params"]["lib"], stamp=dict(host["params"]["lib"]["stamp"], sha256=sha))
    result, error = call(host, driver=driver, lib=lib)
    assert error.startswith(f"the gdrdrv build for {K1} failed: ") and "error: broken" in error, error
    assert result["lib"]["build"] == "built" and result["lib"]["install"] == "needed"
    assert (tree(host["modules"]), tree(host["params"]["lib"]["install_dir"])) == before


def test_a_signer_that_fails_leaves_every_module_as_it_was(host):
    signer = host["tmp"] / "bad-sign"
    signer.write_text('#!/bin/sh\necho \'{"failed": true, "msg": "no sign-file for kernel %s"}\'\nexit 1\n' % K2)
    signer.chmod(0o755)
    result, error = call(host, driver=dict(host["params"]["driver"], sign_command=[str(signer)]))
    assert error == f"signing gdrdrv ({K1}, {K2}) failed: no sign-file for kernel {K2}"
    assert not installed(host, K1).exists() and not installed(host, K2).exists() and host["depmod"] == []


def test_without_headers_nothing_is_built(host):
    (host["modules"] / K2 / "build" / "Makefile").unlink()
    result, error = call(host)
    assert error.startswith(f"no headers for {K2} (") and not (host["tmp"] / "build").exists()


def test_a_library_install_changed_by_hand_is_installed_again(host):
    call(host)
    lib = next((Path(host["params"]["lib"]["install_dir"]) / "lib").glob("libgdrapi.so.*.*"))
    lib.write_bytes(b"changed by hand")
    result, error = call(host)
    assert error is None and result["lib"] == {"build": "current", "install": "installed"}
    assert lib.read_bytes() != b"changed by hand" and result["built"] == []


def test_a_hanging_build_is_stopped_at_its_time_limit(host):
    tarball, sha = make_tarball(host["tmp"], kbuild="all:\n\tsleep 60\n", name="hangs")
    driver = dict(host["params"]["driver"], tarball=str(tarball), timeout=2,
                  stamp_base=dict(host["params"]["driver"]["stamp_base"], sha256=sha))
    result, error = call(host, driver=driver, lib=None, kernels=[K1])
    assert error == f"the gdrdrv build for {K1} ran past its time limit of 2 s and was stopped"
    assert not (Path(host["params"]["driver"]["driver_dir"]) / K1).exists()


# --- the driver record and replay -----------------------------------------------------------------------------------

def test_the_driver_record_is_the_driver_spec_and_is_written_once(host):
    record = host["tmp"] / "etc" / "driver.json"
    result, error = call(host, record=str(record))
    assert error is None and result["record"] is True
    assert json.loads(record.read_text()) == host["params"]["driver"]
    assert result["diff"][-1]["after"] == record.read_text()
    result, error = call(host, record=str(record))
    assert result["record"] is False and result["changed"] is False
    assert P.check_driver_spec(json.loads(record.read_text())) == host["params"]["driver"]


def release(host, version):
    """The params of another release of the fixture for this host (its own tarball, build dir and prefix dir), with
    the stable link, the driver record and gdrcopy_keep_releases' default."""
    tmp = host["tmp"]
    tarball, sha = make_tarball(tmp, kbuild=STUB_KBUILD.replace("gdrdrv for", "gdrdrv %s for" % version),
                                name="src-" + version)
    build = tmp / "build" / ("%s-%s" % (version, sha[:12]))
    base = host["params"]
    lib = dict(base["lib"], dir=str(build / "lib"), stamp=dict(base["lib"]["stamp"], sha256=sha),
               install_dir=str(tmp / "opt" / "gdrcopy" / version), link=str(tmp / "opt" / "gdrcopy" / "current"),
               keep=2)
    driver = dict(base["driver"], tarball=str(tarball), driver_dir=str(build / "driver"),
                  stamp_base=dict(base["driver"]["stamp_base"], sha256=sha))
    return {"lib": lib, "driver": driver, "record": str(tmp / "etc" / "driver.json")}


def test_a_release_change_keeps_the_one_before_for_a_rollback_and_prunes_older_ones(host):
    tmp, state = host["tmp"], host["tmp"] / "state" / "rollback.json"
    r26, r25, r24 = release(host, "2.6"), release(host, "2.5"), release(host, "2.4")
    result, error = call(host, **r26)
    assert error is None and not state.exists() and not result["rollback_record"]  # nothing was there before
    ko26 = installed(host, K1).read_bytes()
    result, error = call(host, **r25)  # down to 2.5: built beside 2.6, swapped in
    assert error is None and result["rollback_record"] is True, result
    assert os.readlink(tmp / "opt" / "gdrcopy" / "current") == "2.5" and b"gdrdrv 2.5 for" in installed(host, K1).read_bytes()
    assert json.loads(state.read_text()) == {"driver": r26["driver"], "link": r26["lib"]["link"], "target": "2.6"}
    assert result["lib"]["pruned"] == []  # two releases, two kept
    # its smoke check failed (the role's rescue): back to 2.6 from its kept builds, without a compile
    before = len(compiles(host))
    result, error = call(host, check=True, rollback=True, record=r25["record"], lib=None, driver=None)
    assert error is None and result["rolled_back"]["release"] == "2.6" and result["lib"]["link"] == "would point"
    assert os.readlink(tmp / "opt" / "gdrcopy" / "current") == "2.5" and state.exists()  # check mode: nothing
    result, error = call(host, rollback=True, record=r25["record"], lib=None, driver=None)
    assert error is None and result["rolled_back"] == {"release": "2.6", "link": r26["lib"]["link"]}, (error, result)
    assert os.readlink(tmp / "opt" / "gdrcopy" / "current") == "2.6" and installed(host, K1).read_bytes() == ko26
    assert result["installed"] == [K1, K2] and result["lib"]["ldconfig"] and len(compiles(host)) == before
    assert json.loads(Path(r25["record"]).read_text()) == r26["driver"] and not state.exists()
    # once used, there is nothing to go back to
    with pytest.raises(P.PipelineError, match="there is no release to roll back to"):
        call(host, rollback=True, record=r25["record"], lib=None, driver=None)


def test_releases_beyond_gdrcopy_keep_releases_are_pruned_with_their_builds(host):
    tmp = host["tmp"]
    r26, r25, r24 = release(host, "2.6"), release(host, "2.5"), release(host, "2.4")
    for r in (r26, r25):
        assert call(host, **r)[1] is None
    os.utime(tmp / "opt" / "gdrcopy" / "2.6" / P.INSTALL_STAMP_FILE, (1, 1))  # installed long ago
    old_build = Path(r26["lib"]["dir"]).parent
    result, error = call(host, check=True, **r24)
    assert error is None and result["lib"]["pruned"] == sorted([str(tmp / "opt" / "gdrcopy" / "2.6"), str(old_build)])
    assert old_build.is_dir() and (tmp / "opt" / "gdrcopy" / "2.6").is_dir()  # check mode: predicted only
    result, error = call(host, **r24)
    assert error is None and result["lib"]["pruned"] == sorted([str(tmp / "opt" / "gdrcopy" / "2.6"), str(old_build)])
    assert sorted(os.listdir(tmp / "opt" / "gdrcopy")) == ["2.4", "2.5", "current"] and not old_build.exists()
    assert sorted(d.name.split("-")[0] for d in (tmp / "build").iterdir() if d.is_dir()) == ["2.4", "2.5"]
    # the rollback goes to 2.5, the release before; 0 keeps every release
    result, error = call(host, **dict(r26, lib=dict(r26["lib"], keep=0)))
    assert error is None and "pruned" not in result["lib"] and sorted(os.listdir(tmp / "opt" / "gdrcopy")) == [
        "2.4", "2.5", "2.6", "current"]


def test_the_release_in_use_before_a_change_is_kept_however_long_ago_it_was_installed(host):
    """2.6, 2.5, back to 2.6 (its kept install: relinked, not installed again), then 2.4: 2.6 was installed first,
    but it is the release a rollback of 2.4 goes back to, so 2.5 goes."""
    tmp = host["tmp"]
    r26, r25, r24 = release(host, "2.6"), release(host, "2.5"), release(host, "2.4")
    for r in (r26, r25, r26):
        result, error = call(host, **r)
        assert error is None, error
    assert result["lib"]["install"] == "current" and result["built"] == []
    os.utime(tmp / "opt" / "gdrcopy" / "2.6" / P.INSTALL_STAMP_FILE, (1, 1))
    result, error = call(host, **r24)
    assert error is None and result["lib"]["pruned"] == sorted([str(tmp / "opt" / "gdrcopy" / "2.5"),
                                                                 str(Path(r25["lib"]["dir"]).parent)])
    assert json.loads((tmp / "state" / "rollback.json").read_text())["target"] == "2.6"


def test_a_rollback_to_a_pruned_release_changes_nothing_and_says_why(host):
    tmp = host["tmp"]
    r26, r25 = release(host, "2.6"), release(host, "2.5")
    assert call(host, **r26)[1] is None
    assert call(host, **dict(r25, lib=dict(r25["lib"], keep=1)))[1] is None  # keeps 2.5 alone
    assert not (tmp / "opt" / "gdrcopy" / "2.6").exists()
    ko = installed(host, K1).read_bytes()
    with pytest.raises(P.PipelineError, match=r"2\.6, is no longer installed \(pruned: gdrcopy_keep_releases below 2\)"):
        call(host, rollback=True, record=r25["record"], lib=None, driver=None)
    assert installed(host, K1).read_bytes() == ko and os.readlink(tmp / "opt" / "gdrcopy" / "current") == "2.5"


def test_replay_builds_a_new_kernel_with_the_recorded_options_alone(host):
    """What playbooks/gdrcopy.yml does when preflight found only a new kernel: the kernel hook's work."""
    record = host["tmp"] / "etc" / "driver.json"
    call(host, kernels=[K1], record=str(record))
    (host["modules"] / K2 / "build" / "Makefile").write_text("")
    recorded = record.read_text()
    result, error = call(host, kernels=[K2], record=str(record), replay=True, driver=None, lib=None)
    assert error is None, error
    assert rows(result) == {K2: ("built", "signed", "installed")} and result["lib"] is None
    assert result["record"] is False and record.read_text() == recorded
    assert installed(host, K2).read_text() == f"gdrdrv for {K2} from /usr/src/nv (y)\nsigned\n"
    stamp = json.loads((Path(host["params"]["driver"]["driver_dir"]) / K2 / ".gdrcopy-stamp.json").read_text())
    assert stamp == dict(host["params"]["driver"]["stamp_base"], kernel=K2)  # what a full run wants: no rebuild
    result, error = call(host, kernels=[K1, K2], record=str(record))
    assert error is None and result["changed"] is False and len(compiles(host)) == 3


@pytest.mark.parametrize("changes, named", [
    ({}, "leave out driver, lib"),
    ({"driver": None, "lib": None, "record": None}, "record is required"),
    ({"driver": None, "lib": None}, "cannot read"),
    ({"driver": None, "lib": None, "bad": True}, "lacks"),
])
def test_replay_takes_the_record_alone_and_says_what_to_do(host, changes, named):
    record = host["tmp"] / "etc" / "driver.json"
    if changes.pop("bad", False):
        record.parent.mkdir(parents=True)
        record.write_text("{}")
    with pytest.raises(P.PipelineError, match=named) as e:
        call(host, **dict({"record": str(record), "replay": True}, **changes))
    assert "replay" in str(e.value)
    assert not installed(host, K1).exists() and compiles(host) == []


def test_a_tarball_sent_that_is_not_the_verified_one_is_refused_before_any_build(host):
    sent = host["tmp"] / "sent.tar.gz"
    sent.write_bytes(b"not the release")
    node = host["tmp"] / "node.tar.gz"
    driver = dict(host["params"]["driver"], tarball=str(node))
    result, error = call(host, driver=driver, source={"src": "/ctl/gdrcopy.tar.gz", "from": str(sent)})
    assert "the tarball sent from /ctl/gdrcopy.tar.gz has sha256 %s on the host, not the verified" % (
        hashlib.sha256(b"not the release").hexdigest()) in error
    assert not node.exists() and compiles(host) == []


# --- the checks of the inputs ----------------------------------------------------------------------------------

@pytest.mark.fault(16)
@pytest.mark.parametrize("key,value", [
    ("tarball", "relative.tar.gz"), ("driver_dir", "/var/lib/../../etc"), ("build_log", "/var/log/x\n"),
    ("nvidia_src_dir", "src"), ("flavor", "closed"), ("module_subdir", "../kernel"), ("module_subdir", "a b"),
    ("stamp_base", {"sha256": "ABC"}), ("sign_command", ["sign"]), ("sign_command", ["/bin/sign", "a\nb"]),
    ("timeout", 0), ("timeout", True), ("build_helper", None)])
def test_a_bad_driver_value_is_named_before_anything_runs(host, key, value):
    with pytest.raises(P.PipelineError, match=r"driver has a bad value for .*%s" % re.escape(key.split("_")[0])):
        call(host, driver=dict(host["params"]["driver"], **{key: value}))
    assert not (host["tmp"] / "build").exists()


@pytest.mark.fault(16)
@pytest.mark.parametrize("kernel", ["../../etc", "6.1.0 -x", "", "6.1.0-41\n"])
def test_a_kernel_that_is_no_release_is_refused(host, kernel):
    with pytest.raises(P.PipelineError, match="is not a kernel release"):
        call(host, kernels=[K1, kernel])


@pytest.mark.parametrize("key,value", [("targets", ["lib; rm -rf /"]), ("install_targets", []),
                                       ("install_dir", "/opt/gdrcopy/current"), ("dir", "lib"),
                                       ("link", "/etc/current"), ("link", "current")])
def test_a_bad_library_value_is_named(host, key, value):
    with pytest.raises(P.PipelineError, match="lib has a bad value for %s" % key):
        call(host, lib=dict(host["params"]["lib"], **{key: value}))


def test_a_record_without_keys_names_them():
    with pytest.raises(P.PipelineError, match="the record lacks build_helper, tarball"):
        P.check_driver_spec({}, "the record")
    with pytest.raises(P.PipelineError, match="is not a JSON object"):
        P.check_driver_spec([], "the record")


@pytest.mark.parametrize("stdout,actions", [
    ('{"results": [{"kernel": "a", "action": "unchanged"}, {"kernel": "b", "action": "resigned"}]}',
     {"a": "unchanged", "b": "resigned"}),
    ("signed them\n", {"a": "signed", "b": "signed"}),
    ('{"results": [{"kernel": "c", "action": "unchanged"}, "x"]}', {"a": "signed", "b": "signed"}),
    ("[1]", {"a": "signed", "b": "signed"})])
def test_what_a_signer_says_is_read_per_kernel(stdout, actions):
    assert P.sign_actions(stdout, ["a", "b"]) == actions


# --- the module through Ansible ------------------------------------------------------------------------------

HELPER = "#!/bin/sh\necho a helper\n"  # (a playbook's literal is templated: no Jinja-like text)


def test_the_module_through_ansible_playbook_check_diff_and_idempotence(tmp_path, host):
    """The library alone (no kernel: /lib/modules is the real one here): argument spec, check, diff, changed; the
    tarball sent by the action plugin from the "controller" (the test's file) to its place on the "host"."""
    node_tarball = tmp_path / "node" / "src" / "gdrcopy.tar.gz"
    helper = tmp_path / "node" / "libexec" / "gdrcopy-smoke"
    params = {"kernels": [], "lib": host["params"]["lib"],
              "driver": dict(host["params"]["driver"], tarball=str(node_tarball)),
              "source": {"src": host["params"]["driver"]["tarball"]},
              "helpers": [{"dest": str(helper), "content": HELPER}]}
    conf = tmp_path / "node" / "etc" / "gdrcopy.conf"  # a file of the role's other steps, put in place last
    params["files"] = [{"dest": str(conf), "content": "/opt/gdrcopy/current/lib\n"}]
    playbook = tmp_path / "build.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"gpufleet.gdrcopy.gdrcopy_build": params, "register": "out"},
        {"ansible.builtin.debug": {"var": "out"}}]}]))
    env = dict(os.environ, ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))

    def play(*args):
        r = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                            "-e", "ansible_python_interpreter=" + sys.executable, str(playbook), *args],
                           env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(re.search(r'"out": (\{.*?\n    \})', r.stdout, re.S).group(1)), r.stdout

    out, text = play("--check", "--diff")
    assert out["changed"] and out["lib"] == {"build": "would build", "install": "would install"}
    assert '"component": "lib"' in text and not Path(params["lib"]["dir"]).exists()
    assert out["source"] == "would copy" and not node_tarball.exists()
    assert out["helpers"] == [str(helper)] and not helper.exists()
    assert out["changed_files"] == [str(conf)] and not conf.exists() and "+/opt/gdrcopy/current/lib" in text
    out, dummy = play()
    assert out["changed"] and out["lib"] == {"build": "built", "install": "installed"} and "diff" not in out
    assert out["source"] == "copied" and node_tarball.read_bytes() == Path(params["source"]["src"]).read_bytes()
    assert out["helpers"] == [str(helper)] and helper.read_text() == HELPER
    assert helper.stat().st_mode & 0o777 == 0o755
    assert out["files"] == [{"dest": str(conf), "action": "created"}] and conf.read_text() == "/opt/gdrcopy/current/lib\n"
    out, dummy = play()
    assert out["changed"] is False and out["lib"] == {"build": "current", "install": "current"}
    assert out["source"] == "current" and out["helpers"] == [] and out["files"][0]["action"] == "ok"
    params["helpers"][0]["mode"] = "0644; rm -rf /"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"gpufleet.gdrcopy.gdrcopy_build": params, "register": "out", "ignore_errors": True},
        {"ansible.builtin.debug": {"var": "out"}}]}]))
    out, dummy = play()
    assert out["failed"] and "helpers: %s wants an absolute path and an octal mode" % helper in out["msg"]
    params["helpers"][0].update(mode="0755", dest=str(tmp_path / "node" / "libexec" / "new-helper"))
    params["kernels"] = ["../6.1.0"]  # a bad option stops the call before any helper is written
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"gpufleet.gdrcopy.gdrcopy_build": params, "register": "out", "ignore_errors": True},
        {"ansible.builtin.debug": {"var": "out"}}]}]))
    out, dummy = play()
    assert out["failed"] and not (tmp_path / "node" / "libexec" / "new-helper").exists(), out
    params.update(kernels=[], install=False)  # files go with an install: refused before anything is written
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"gpufleet.gdrcopy.gdrcopy_build": params, "register": "out", "ignore_errors": True},
        {"ansible.builtin.debug": {"var": "out"}}]}]))
    out, dummy = play()
    assert out["failed"] and "leave them out with install: false" in out["msg"], out
    assert not (tmp_path / "node" / "libexec" / "new-helper").exists()
    assert not list((tmp_path / "tmp").rglob("source.tar.gz"))  # the copy sent is removed with the task's tmp


def test_ansible_doc_renders_the_module():
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    r = subprocess.run([str(Path(sys.executable).parent / "ansible-doc"), "-t", "module", "gpufleet.gdrcopy.gdrcopy_build"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "RETURN VALUES" in r.stdout and "ERROR" not in r.stderr, r.stderr


# --- fleet builds: one host compiles and packs, another takes ---------------------------------------------------

def other_host(host, name="other"):
    """A second node with the same inputs (the same tarball and stamps), its own build root, prefix and modules."""
    params = json.loads(json.dumps(host["params"]))
    top = host["tmp"] / name
    sha = params["driver"]["stamp_base"]["sha256"]
    build = top / "build" / ("2.6-" + sha[:12])
    params["lib"].update(dir=str(build / "lib"), install_dir=str(top / "opt" / "gdrcopy" / "2.6"))
    params["driver"].update(driver_dir=str(build / "driver"), build_log=str(top / "build" / "builds.log"))
    modules = top / "lib-modules"
    for k in params["kernels"]:
        (modules / k / "build").mkdir(parents=True)
        (modules / k / "build" / "Makefile").write_text("")
    return {"tmp": top, "modules": modules, "params": params, "depmod": [], "ldconfig": [], "cache": ""}


def shares(host):
    p = host["params"]
    return ([{"dir": p["lib"]["dir"], "name": "lib-" + "1" * 16}]
            + [{"dir": os.path.join(p["driver"]["driver_dir"], k), "name": "driver-%s-%s" % (k, "2" * 16)}
               for k in p["kernels"]])


def test_a_fleet_build_is_packed_by_its_builder_and_taken_by_another_host_without_compiling(host):
    node_dir = str(host["tmp"] / "build" / "artifacts")
    fleet = {"cache": "/controller/cache", "node_dir": node_dir, "share": shares(host), "take": []}
    result, error = call(host, install=False, fleet=fleet)
    assert error is None and result["built"] == [K1, K2] and result["installed"] == []
    assert [p["name"] for p in result["packed"]] == [s["name"] for s in shares(host)]
    for p in result["packed"]:
        assert hashlib.sha256(Path(p["path"]).read_bytes()).hexdigest() == p["sha256"]
        assert not Path(p["path"] + ".gdrcopy-new").exists()

    other = other_host(host)
    mine = shares(other)
    take = [dict(t, sha256=p["sha256"], **{"from": p["path"]}) for t, p in zip(mine, result["packed"])]
    got, error = call(other, fleet=dict(fleet, share=[], take=take))
    assert error is None, error
    assert got["lib"]["build"] == "taken" and got["taken"] == [K1, K2] and got["built"] == []
    assert rows(got) == {K1: ("taken", "signed", "installed"), K2: ("taken", "signed", "installed")}
    assert installed(other, K1).read_text() == f"gdrdrv for {K1} from /usr/src/nv (y)\nsigned\n"
    assert [line.split()[1] for line in compiles(other)] == ["unpacked"] * 3
    again, error = call(other, fleet=dict(fleet, share=[], take=take))
    assert error is None and again["changed"] is False and again["taken"] == []


def test_a_fleet_build_whose_checksum_is_not_the_recorded_one_is_compiled_instead(host):
    fleet = {"cache": "/c", "node_dir": str(host["tmp"] / "artifacts"), "share": shares(host), "take": []}
    result, dummy = call(host, install=False, fleet=fleet)
    other = other_host(host)
    take = [dict(t, sha256="0" * 64, **{"from": p["path"]}) for t, p in zip(shares(other), result["packed"])]
    got, error = call(other, fleet=dict(fleet, share=[], take=take))
    assert error is None and got["built"] == [K1, K2] and got["taken"] == [] and got["lib"]["build"] == "built"
    assert [line.split()[1] for line in compiles(other)] == ["built"] * 3


def test_check_mode_predicts_taking_and_packs_nothing(host):
    other = other_host(host)
    take = [dict(t, sha256="a" * 64, **{"from": "/controller/x.tar.gz"}) for t in shares(other)]
    fleet = {"cache": "/c", "node_dir": str(other["tmp"] / "artifacts"), "share": [], "take": take}
    got, error = call(other, check=True, fleet=fleet)
    assert error is None and rows(got)[K1] == ("would take", "would sign", "would install")
    assert got["lib"]["build"] == "would take" and not (other["tmp"] / "build").exists()
    result, error = call(host, check=True, install=False, fleet=dict(fleet, take=[], share=shares(host)))
    assert error is None and result["packed"] == [] and not (other["tmp"] / "artifacts").exists()


@pytest.mark.parametrize("fleet, named", [
    ({"share": [{"dir": "/elsewhere/k", "name": "lib-" + "1" * 16}]}, "/elsewhere/k is not a build directory"),
    ({"share": [{"dir": "/x", "name": "lib;rm"}]}, "fleet.share[0]: a build name"),
    ({"take": [{"dir": "LIB", "name": "lib-" + "1" * 16, "from": "/t.tgz", "sha256": "xyz"}]}, "fleet.take[0]: an"),
    ({"node_dir": "relative"}, "fleet.node_dir must be an absolute path"),
])
def test_bad_fleet_values_are_named_before_anything_runs(host, fleet, named):
    lib_dir = host["params"]["lib"]["dir"]
    fleet = json.loads(json.dumps(fleet).replace('"LIB"', json.dumps(lib_dir)))
    args = dict({"cache": "/c", "node_dir": "/n", "share": [], "take": []}, **fleet)
    with pytest.raises(P.PipelineError, match=re.escape(named)):
        call(host, fleet=args)
    assert compiles(host) == []
