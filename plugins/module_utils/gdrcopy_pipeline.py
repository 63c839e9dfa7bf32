# -*- coding: utf-8 -*-
# SPDX-License-Identifier: MIT
# Copyright (c) 2026 gdrcopy-ansible contributors
"""The build pipeline of one host: libgdrapi and gdrdrv, from the verified tarball to the installed files.

    plan  -> build (lib, then gdrdrv per kernel; all or nothing, stamped) -> install the library (staged, swapped)
          -> sign every gdrdrv (one sign_command argv) -> install gdrdrv per kernel (temporary file, rename) -> depmod

Two callers run it: the gdrcopy_build module (the gdrcopy role) and the kernel postinst hook
(roles/gdrcopy/files/gdrcopy-kernel-hook, for a kernel installed between two runs). The hook runs outside Ansible,
so this file uses the standard library only: the role copies it next to the hook, which imports it from there.
The driver part of the module's options is recorded on the host (the driver record, /etc/gdrcopy-ansible/driver.json),
written by the module itself on every install, so the hook, and a rerun that finds only new kernels (the module's
replay), build with exactly the inputs of the last run and that run's stamp.

A build is redone exactly when its stamp (its inputs as JSON) differs from the one in its directory; gdrcopy-build
does the build in <dir>.new and renames it into place, gdrcopy-install stages the library beside the prefix. Nothing
is installed until every build of the call succeeded, and nothing unsigned is installed while signing is on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import shutil
import ssl
import struct
import subprocess
import tarfile
import tempfile
import time

# The fixed places of the project on a host: the one source. The modules import them, the roles and playbooks read
# them through the lookup gpufleet.gdrcopy.paths, the kernel hook through this file; tests/unit/test_paths.py fails
# when a role, playbook or plugin spells one of them out.
LIBEXEC = "/usr/local/libexec/gdrcopy-ansible"
STATE_DIR = "/var/lib/gdrcopy-ansible"
CONFIG_DIR = "/etc/gdrcopy-ansible"
DRIVER_RECORD = CONFIG_DIR + "/driver.json"
HOOK_STATUS = STATE_DIR + "/kernel-hook-status.json"
MODULES_ROOT = "/lib/modules"
MODULE_SUBDIR = "updates/gdrcopy"
PATHS = {
    "libexec": LIBEXEC,                                   # the helpers the roles install
    "state_dir": STATE_DIR,
    "config_dir": CONFIG_DIR,
    "converged_record": STATE_DIR + "/converged.json",    # the record of a verified host (gdrcopy_verify)
    "mok_signer": STATE_DIR + "/mok-signer.der",          # the link to the certificate that signs (mok_signing)
    "mok_replaced": STATE_DIR + "/mok-replaced.json",     # the certificate a key rotation replaced (mok_signing)
    "driver_record": DRIVER_RECORD,                       # the last install's driver options (gdrcopy_build)
    "rollback_record": STATE_DIR + "/rollback.json",      # the release before the last change, while it is kept
    "hook_status": HOOK_STATUS,                           # the outcome of the kernel hook's last call
    "packages_record": STATE_DIR + "/packages.json",      # the packages the roles installed (gdrcopy_uninstall)
    "smoke_program": LIBEXEC + "/gdrcopy-smoke",
    "mknod_program": LIBEXEC + "/gdrdrv-mknod",
    "module_subdir": MODULE_SUBDIR,                       # where gdrdrv goes under /lib/modules/<kernel>/
    "modprobe_options": "/etc/modprobe.d/gdrcopy-ansible-gdrdrv.conf",  # gdrdrv's options, softdeps and the node
    "unit": "/etc/systemd/system/gdrcopy-ansible.service",  # the boot unit that loads the chain
    "unit_link": "/etc/systemd/system/multi-user.target.wants/gdrcopy-ansible.service",  # it, enabled
    "loader_conf": "/etc/ld.so.conf.d/gdrcopy.conf",      # the loader path to the library's current release
    # The names before 0.3.0, which upstream's packaging uses too: the files step retires them and the uninstall
    # removes them only where this project wrote them (gdrcopy_fileops.MARKER; the link where it points at the unit).
    "retired_options": "/etc/modprobe.d/gdrdrv.conf",
    "retired_unit": "/etc/systemd/system/gdrcopy.service",
    "retired_unit_link": "/etc/systemd/system/multi-user.target.wants/gdrcopy.service",
}
RETIRED_FILES = (PATHS["retired_options"], PATHS["retired_unit"])
RETIRED_LINKS = {PATHS["retired_unit_link"]: PATHS["retired_unit"]}
MODULE_FILE = "gdrdrv.ko"
DRIVER_ARTIFACT = "src/gdrdrv/gdrdrv.ko"
STAMP_FILE = ".gdrcopy-stamp.json"
INSTALL_STAMP_FILE = ".gdrcopy-install.json"
MANIFEST_FILE = ".gdrcopy-manifest"
DEFAULT_TIMEOUT = 1800

KERNEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}\Z")
SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
# A group name as useradd/groupadd accept it (shadow-utils' default rule), at most 32 characters: the roles' inputs
# are checked with it (gdrcopy_inputs, on the controller) and gdrcopy_files makes groups by it (on the host).
GROUP_NAME_RE = r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\Z"
FLAVORS = ("open", "proprietary")
# A make target or VAR=value of the library build (lib, exes, CUDA=/usr/local/cuda).
MAKE_WORD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_./+-]*)?\Z")
# The keys of the driver spec, which is also the kernel hook's record.
DRIVER_KEYS = ("build_helper", "tarball", "build_log", "driver_dir", "stamp_base", "nvidia_src_dir", "flavor",
               "module_subdir", "sign_command", "sign_cert", "timeout", "backend")
# Keys a driver record written by an older release lacks, with the value that means what it did then.
DRIVER_DEFAULTS = {"timeout": DEFAULT_TIMEOUT, "sign_cert": "", "backend": "gdrdrv"}
# gdrcopy_backend as the plan resolved it: gdrdrv, or dmabuf (gdrcopy 2.6's DMA-BUF path: no gdrdrv is built for any
# kernel, so the driver options are recorded but nothing is built with them).
BACKENDS = ("gdrdrv", "dmabuf")
# A module that waits for the controller's signature (sign_cert set, signed by nothing it trusts) is not installed.
AWAITING = "awaiting signature"


class PipelineError(Exception):
    """A step failed: the message says which, for what, and what is left as it was; results holds what was done."""

    def __init__(self, msg, results=None):
        Exception.__init__(self, msg)
        self.results = results


# --- checks of the inputs ------------------------------------------------------------------------------------

def _path_ok(value):
    return (isinstance(value, str) and value.startswith("/") and ".." not in value.split("/")
            and not any(c in value for c in "\n\r\t\x00"))


def check_kernels(kernels):
    """The kernel releases as given, or PipelineError naming the first that is no kernel release."""
    if not isinstance(kernels, list):
        raise PipelineError("kernels must be a list of kernel releases")
    for k in kernels:
        if not isinstance(k, str) or not KERNEL_RE.match(k):
            raise PipelineError("kernels: %r is not a kernel release (letters, digits and . _ + ~ -)" % (k,))
    return kernels


def check_driver_spec(spec, where="the driver spec"):
    """The driver spec (the module's driver options, the hook's record), or PipelineError naming each bad key."""
    if not isinstance(spec, dict):
        raise PipelineError("%s is not a JSON object" % where)
    missing = [k for k in DRIVER_KEYS if k not in spec and k not in DRIVER_DEFAULTS]
    if missing:
        raise PipelineError("%s lacks %s" % (where, ", ".join(missing)))
    bad = [k for k in ("build_helper", "tarball", "build_log", "driver_dir") if not _path_ok(spec[k])]
    if not (spec["nvidia_src_dir"] == "" or _path_ok(spec["nvidia_src_dir"])):
        bad.append("nvidia_src_dir")
    if spec["flavor"] not in FLAVORS:
        bad.append("flavor")
    sub = spec["module_subdir"]
    if not (isinstance(sub, str) and re.match(r"^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*\Z", sub)):
        bad.append("module_subdir")
    base = spec["stamp_base"]
    if not (isinstance(base, dict) and isinstance(base.get("sha256"), str) and SHA256_RE.match(base["sha256"])):
        bad.append("stamp_base.sha256")
    cmd = spec["sign_command"]
    if not (isinstance(cmd, list) and all(isinstance(a, str) and "\n" not in a and a for a in cmd)
            and (not cmd or _path_ok(cmd[0]))):
        bad.append("sign_command")
    cert = spec.get("sign_cert", "")
    if not (cert == "" or _path_ok(cert)):
        bad.append("sign_cert")
    if spec.get("backend", "gdrdrv") not in BACKENDS:
        bad.append("backend")
    timeout = spec.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
        bad.append("timeout")
    if bad:
        raise PipelineError("%s has a bad value for %s" % (where, ", ".join(bad)))
    if cmd and cert:
        raise PipelineError("%s sets both sign_command (signing on the host) and sign_cert (signing on the "
                            "controller): one signer at a time" % where)
    return dict(DRIVER_DEFAULTS, **dict(spec, timeout=timeout))


def load_driver_record(path):
    """The driver spec a past install recorded in path (write_record), checked, or PipelineError."""
    try:
        with open(path) as f:
            spec = json.load(f)
    except (IOError, OSError, ValueError) as e:
        raise PipelineError("cannot read %s (%s)" % (path, e))
    return check_driver_spec(spec, path)


def check_lib_spec(lib):
    """The library spec of the module ({dir, stamp, targets, install_dir, install_targets, install_helper})."""
    bad = [k for k in ("dir", "install_dir", "install_helper") if not _path_ok(lib.get(k))]
    for key in ("targets", "install_targets"):
        words = lib.get(key)
        if not (isinstance(words, list) and words and all(isinstance(w, str) and MAKE_WORD_RE.match(w) for w in words)):
            bad.append(key)
    if not isinstance(lib.get("stamp"), dict):
        bad.append("stamp")
    if not re.match(r"^[0-9]+(\.[0-9]+)+\Z", os.path.basename(str(lib.get("install_dir", "")).rstrip("/"))):
        bad.append("install_dir (must end in the version)")
    keep = lib.get("keep", 0)
    if not (isinstance(keep, int) and not isinstance(keep, bool) and 0 <= keep <= 1000):
        bad.append("keep (0, all, or how many releases to keep)")
    link = lib.get("link")
    if link is not None and not (_path_ok(link) and os.path.dirname(link.rstrip("/"))
                                 == os.path.dirname(str(lib.get("install_dir", "")).rstrip("/"))):
        bad.append("link (must lie beside install_dir)")
    if bad:
        raise PipelineError("lib has a bad value for %s" % ", ".join(bad))
    return lib


# --- reading the host ----------------------------------------------------------------------------------------

def file_sha256(path):
    """The sha256 of a file's bytes (IOError/OSError when it cannot be read)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_or_empty(path):
    """The sha256 of a regular file; '' when it is missing, a link or unreadable."""
    if os.path.islink(path) or not os.path.isfile(path):
        return ""
    try:
        return file_sha256(path)
    except (IOError, OSError):
        return ""


def parse_sha256sums(text):
    """sha256sum's output ("<64 hex>  <path>" a line) as {path: hex}; ValueError on a line of another shape."""
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = re.match(r"^([0-9a-f]{64}) [ *](.+)$", line)
        if not m or m.group(2).startswith("/") or ".." in m.group(2).split("/"):
            raise ValueError("not a sha256sum line: %r" % line[:80])
        out[m.group(2)] = m.group(1)
    return out


def read_json(path):
    """The JSON in path, or None when it is missing or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return None


def damaged_files(install_dir, manifest_text):
    """The files of a library install that differ from its manifest (relative paths); [MANIFEST_FILE] without one."""
    try:
        manifest = parse_sha256sums(manifest_text or "")
    except ValueError:
        manifest = None
    if not manifest:
        return [MANIFEST_FILE]
    return sorted(rel for rel, digest in manifest.items()
                  if sha256_or_empty(os.path.join(install_dir, rel)) != digest)


def install_current(install_dir, stamp):
    """True when install_dir holds the library install of stamp, every file as gdrcopy-install left it."""
    if read_json(os.path.join(install_dir, INSTALL_STAMP_FILE)) != stamp:
        return False
    try:
        with open(os.path.join(install_dir, MANIFEST_FILE)) as f:
            manifest = f.read()
    except (IOError, OSError):
        return False
    return not damaged_files(install_dir, manifest)


def build_current(build_dir, stamp, artifact=None):
    """True when build_dir holds the build of stamp (and its artifact, when one is named)."""
    if read_json(os.path.join(build_dir, STAMP_FILE)) != stamp:
        return False
    return artifact is None or os.path.isfile(os.path.join(build_dir, artifact))


def headers_present(kernel, modules_root=MODULES_ROOT):
    """True when the kernel's build tree (its headers) is there: what gdrdrv compiles against."""
    return os.path.isfile(os.path.join(modules_root, kernel, "build", "Makefile"))


# --- the commands --------------------------------------------------------------------------------------------

def stamp_json(stamp):
    return json.dumps(stamp, sort_keys=True)


def driver_stamp(spec, kernel):
    """The stamp of gdrdrv for one kernel: the spec's stamp_base plus the kernel."""
    return dict(spec["stamp_base"], kernel=kernel)


def driver_build_dir(spec, kernel):
    return os.path.join(spec["driver_dir"], kernel)


def driver_dest(spec, kernel, modules_root=MODULES_ROOT):
    return os.path.join(modules_root, kernel, spec["module_subdir"], MODULE_FILE)


def _build_prefix(spec):
    return [spec["build_helper"], "--tarball", spec["tarball"], "--sha256", spec["stamp_base"]["sha256"],
            "--log", spec["build_log"]]


def driver_build_argv(spec, kernel):
    """gdrcopy-build for gdrdrv of one kernel: upstream's `make driver` against the NVIDIA source."""
    return _build_prefix(spec) + [
        "--dir", driver_build_dir(spec, kernel), "--artifact", DRIVER_ARTIFACT,
        "--stamp", stamp_json(driver_stamp(spec, kernel)), "--",
        "make", "driver", "KVER=" + kernel, "NVIDIA_SRC_DIR=" + spec["nvidia_src_dir"],
        "NVIDIA_IS_OPENSOURCE=" + ("y" if spec["flavor"] == "open" else "n")]


def lib_build_argv(spec, lib):
    """gdrcopy-build for libgdrapi (and the test programs when the targets name them)."""
    return _build_prefix(spec) + ["--dir", lib["dir"], "--stamp", stamp_json(lib["stamp"]), "--",
                                  "make"] + list(lib["targets"])


def take_argv(spec, build_dir, stamp, take):
    """gdrcopy-build --from: unpack the build another host made (fleet builds) as this host's, nothing compiled."""
    return [spec["build_helper"], "--from", take["from"], "--from-sha256", take["sha256"], "--tarball",
            spec["tarball"], "--sha256", spec["stamp_base"]["sha256"], "--dir", build_dir,
            "--stamp", stamp_json(stamp), "--log", spec["build_log"]]


def pack_build(build_dir, dest):
    """A tarball of one build directory (fleet builds: what another host takes), through a temporary file and a
    rename; returns its sha256."""
    directory = os.path.dirname(dest)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    tmp = dest + ".gdrcopy-new"
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(build_dir, arcname=".")
        os.chmod(tmp, 0o644)
        os.rename(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return file_sha256(dest)


def lib_install_argv(lib):
    """gdrcopy-install: upstream's `make lib_install` staged beside the prefix, checked, stamped, swapped in."""
    return [lib["install_helper"], "--build", lib["dir"], "--dest", lib["install_dir"].rstrip("/"),
            "--stamp", stamp_json(lib["stamp"]), "--", "make"] + list(lib["install_targets"])


def sign_argv(spec, pairs, check=False):
    """The signing command with --check (predict) and KERNEL=MODULE for each (kernel, module) pair."""
    return list(spec["sign_command"]) + (["--check"] if check else []) + ["%s=%s" % p for p in pairs]


def run_step(run, argv, what, limit):
    """Run one step under timeout(1) (it stops the step's whole process group); its stdout, or PipelineError."""
    try:
        r = run(["timeout", "-k", "30", str(limit)] + argv, capture_output=True, text=True, errors="replace",
                timeout=limit + 60)
    except subprocess.TimeoutExpired:
        r = subprocess.CompletedProcess(argv, 124, "", "")
    except OSError as e:
        raise PipelineError("%s could not start: %s" % (what, e))
    if r.returncode in (124, 137):
        raise PipelineError("%s ran past its time limit of %d s and was stopped" % (what, limit))
    if r.returncode != 0:
        raise PipelineError("%s failed: %s" % (what, last_words(r.stdout, r.stderr)))
    return r.stdout or ""


def last_words(stdout, stderr):
    """What a failed helper said: the msg of a JSON result on stdout, else the end of stderr (or stdout)."""
    doc = parse_json_object(stdout)
    if doc.get("msg"):
        return str(doc["msg"])
    text = (stderr or "").strip() or (stdout or "").strip()
    return text[-2000:] if text else "no output"


def parse_json_object(text):
    try:
        doc = json.loads((text or "").strip() or "{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def sign_actions(stdout, kernels):
    """{kernel: action} from the signing command's JSON (mok-sign: results[].kernel/action); a command that prints
    no such results signed every module it was given."""
    doc = parse_json_object(stdout)
    actions = dict((k, "signed") for k in kernels)
    for r in doc.get("results") or []:
        if isinstance(r, dict) and r.get("kernel") in actions and isinstance(r.get("action"), str):
            actions[r["kernel"]] = r["action"]
    return actions


# --- appended module signatures: the kernel's format, read and checked on the host --------------------------
# A signed module is its content, a PKCS#7 SignedData (DER, detached, no attributes, no certificates), the kernel's
# struct module_signature (algo, hash, id_type, signer_len, key_id_len, pad[3], big-endian sig_len; for PKCS#7 only
# id_type 2 and sig_len are set) and the magic string. gdrcopy_modsign (controller) makes them; this half reads them.
SIG_MAGIC = b"~Module signature appended~\n"
SIG_TRAILER = struct.Struct(">BBBBB3xI")
PKEY_ID_PKCS7 = 2


def split_signature(data):
    """(content, PKCS#7 DER) of a module file's bytes; DER is b"" when none is appended. ValueError when the
    appended signature is malformed."""
    if not data.endswith(SIG_MAGIC):
        return data, b""
    end = len(data) - len(SIG_MAGIC) - SIG_TRAILER.size
    if end <= 0:
        raise ValueError("the module ends with the signature magic but is too short to hold a signature")
    id_type, sig_len = SIG_TRAILER.unpack(data[end:end + SIG_TRAILER.size])[2::3]
    if id_type != PKEY_ID_PKCS7 or not 0 < sig_len < end:
        raise ValueError("the appended signature is malformed (id_type %d, length %d)" % (id_type, sig_len))
    return data[:end - sig_len], data[end - sig_len:end]


def append_signature(content, der):
    """content with the PKCS#7 signature DER appended the way the kernel reads it."""
    return content + der + SIG_TRAILER.pack(0, 0, PKEY_ID_PKCS7, 0, 0, len(der)) + SIG_MAGIC


def kernel_sig_hash(kernel, root="/"):
    """The kernel's CONFIG_MODULE_SIG_HASH, from /boot/config-<k>, else its build tree's .config; "sha256" when
    neither says (a kernel without module signing verifies nothing anyway)."""
    for path in ("boot/config-%s" % kernel, "lib/modules/%s/build/.config" % kernel):
        try:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                for line in f:
                    m = re.match(r'^CONFIG_MODULE_SIG_HASH="([a-z0-9-]+)"', line)
                    if m:
                        return m.group(1)
        except (IOError, OSError):
            continue
    return "sha256"


def pem_certificate(path):
    """The certificate at path (DER or PEM) as PEM text; ValueError when it is neither."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw.lstrip().startswith(b"-----BEGIN CERTIFICATE-----"):
        return raw.decode("ascii")
    if not raw.startswith(b"\x30"):
        raise ValueError("%s is not an X.509 certificate (DER or PEM)" % path)
    return ssl.DER_cert_to_PEM_cert(raw)


def signature_verifies(run, data, cert, openssl="openssl"):
    """(True, "") when the signature appended to the module bytes data verifies against the certificate at cert
    (openssl cms -verify over the content, the certificate given, no chain); else (False, why)."""
    try:
        content, der = split_signature(data)
        pem = pem_certificate(cert)
    except (IOError, OSError, ValueError) as e:
        return False, str(e)
    if not der:
        return False, "no signature is appended"
    work = tempfile.mkdtemp(prefix="gdrcopy-verify.")
    try:
        for name, blob in (("content", content), ("sig.der", der), ("cert.pem", pem.encode("ascii"))):
            with open(os.path.join(work, name), "wb") as f:
                f.write(blob)
        r = run([openssl, "cms", "-verify", "-binary", "-inform", "DER", "-in", os.path.join(work, "sig.der"),
                 "-content", os.path.join(work, "content"), "-certfile", os.path.join(work, "cert.pem"),
                 "-nointern", "-noverify", "-out", os.devnull], capture_output=True, text=True, errors="replace")
    except OSError as e:
        return False, "openssl could not run: %s" % e
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if r.returncode != 0:
        return False, "it does not verify against %s (%s)" % (cert, last_words("", r.stderr).splitlines()[-1])
    return True, ""


def install_file(src, dest):
    """Copy src to dest through a temporary file beside it and a rename: no reader sees half a module."""
    directory = os.path.dirname(dest)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    tmp = dest + ".gdrcopy-new"
    try:
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            while True:
                block = fin.read(1 << 20)
                if not block:
                    break
                fout.write(block)
            fout.flush()
            os.fsync(fout.fileno())
        os.chmod(tmp, 0o644)
        os.rename(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def point_link(link, target, check=False):
    """Point the symbolic link at target through a temporary link and a rename, so that a reader never finds no
    link (the missing parent made, 0755); True when it changed (in check mode, would change). Also what
    gdrcopy_files (state link) and gdrcopy_mok (the signer link) write links with."""
    try:
        if os.readlink(link) == target:
            return False
    except OSError:
        if os.path.lexists(link):
            raise PipelineError("%s is there and is no symbolic link: move it away, then run again" % link)
    if not check:
        if not os.path.isdir(os.path.dirname(link)):
            os.makedirs(os.path.dirname(link), 0o755)
        tmp = link + ".gdrcopy-new"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(target, tmp)
        os.rename(tmp, link)
    return True


# A build directory under the build root: <version>-<sha256[:12]> (the role's gdrcopy_build_root/<src_id>).
BUILD_DIR_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)+)-[0-9a-f]{12}\Z")


def _remove_tree(path):
    """Remove a directory tree (or a file, or a link) without following links out of it."""
    if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
        return
    for top, dirs, files in os.walk(path, topdown=False):
        for name in files:
            os.unlink(os.path.join(top, name))
        for name in dirs:
            full = os.path.join(top, name)
            if os.path.islink(full):
                os.unlink(full)
            else:
                os.rmdir(full)
    os.rmdir(path)


def releases_to_prune(prefix, build_root, current, keep, previous=""):
    """The library releases under prefix (each a <version> directory with an install stamp) and the build
    directories and node tarballs under build_root beyond the keep newest releases, as a sorted list of paths.
    current (the version <prefix>/current points at) is always kept, then previous (the release in use before the
    last change: what a rollback goes back to), then the others by install time, newest first."""
    installed = []
    for name in os.listdir(prefix) if os.path.isdir(prefix) else []:
        stamp = os.path.join(prefix, name, INSTALL_STAMP_FILE)
        if name != current and os.path.isfile(stamp) and not os.path.islink(os.path.join(prefix, name)):
            installed.append((name == previous, os.stat(stamp).st_mtime, name))
    kept = set([current] + [row[-1] for row in sorted(installed, reverse=True)[:max(keep - 1, 0)]])
    gone = [os.path.join(prefix, row[-1]) for row in installed if row[-1] not in kept]
    for name in os.listdir(build_root) if os.path.isdir(build_root) else []:
        m = BUILD_DIR_RE.match(name)
        if m and m.group(1) not in kept and os.path.isdir(os.path.join(build_root, name)):
            gone.append(os.path.join(build_root, name))
    src = os.path.join(build_root, "src")
    for name in os.listdir(src) if os.path.isdir(src) else []:
        m = re.match(r"^gdrcopy-(.+)\.tar\.gz\Z", name)
        if m and BUILD_DIR_RE.match(m.group(1)) and BUILD_DIR_RE.match(m.group(1)).group(1) not in kept:
            gone.append(os.path.join(src, name))
    return sorted(gone)


def prune_releases(lib, keep, check=False):
    """Remove what releases_to_prune names for lib (its prefix, the build root its build directory lies in, and
    lib's previous: the release a rollback would go back to) and keep: the paths removed (in check mode, that would
    be)."""
    prefix = os.path.dirname(lib["install_dir"].rstrip("/"))
    build_root = os.path.dirname(os.path.dirname(lib["dir"].rstrip("/")))
    current = os.path.basename(lib["install_dir"].rstrip("/"))
    gone = releases_to_prune(prefix, build_root, current, keep, lib.get("previous") or "")
    if not check:
        for path in gone:
            try:
                _remove_tree(path)
            except OSError as e:
                raise PipelineError("pruning %s failed: %s; the release in use is untouched" % (path, e))
    return gone


def loader_lists(run, path):
    """The loader cache (ldconfig -p) has path."""
    r = run(["ldconfig", "-p"], capture_output=True, text=True, errors="replace")
    return r.returncode == 0 and any(line.rstrip().endswith("=> " + path) for line in r.stdout.splitlines())


# --- the pipeline --------------------------------------------------------------------------------------------

def plan(spec, kernels, lib=None, modules_root=MODULES_ROOT):
    """What the host has and lacks, read only: {lib: {...} or None, kernels: [{kernel, headers, build, dest, ...}]}."""
    out = {"lib": None, "kernels": []}
    if lib:
        out["lib"] = {"dir": lib["dir"], "install_dir": lib["install_dir"],
                      "build": "current" if build_current(lib["dir"], lib["stamp"]) else "needed",
                      "install": "current" if install_current(lib["install_dir"], lib["stamp"]) else "needed"}
    for kernel in kernels:
        build_dir = driver_build_dir(spec, kernel)
        out["kernels"].append({
            "kernel": kernel, "headers": headers_present(kernel, modules_root), "build_dir": build_dir,
            "build": "current" if build_current(build_dir, driver_stamp(spec, kernel), MODULE_FILE) else "needed",
            "dest": driver_dest(spec, kernel, modules_root),
            "installed_sha256": sha256_or_empty(driver_dest(spec, kernel, modules_root))})
    return out


def converge(spec, kernels, lib=None, install=True, check=False, modules_root=MODULES_ROOT, run=subprocess.run,
             say=lambda msg: None, takes=None, pack=None, signed=None, hold_resigned=False):
    """Bring the host to the builds (and, with install, the installs) of spec, lib and kernels.

    takes: {build dir: {from, sha256}}, builds another host made (fleet builds), unpacked instead of compiled when
    the build is needed (a take that fails is compiled instead); pack: {dir, builds: [{dir, name}]}, builds to leave
    as <dir>/<name>.tar.gz for other hosts (result: packed [{name, path, sha256}]); signed: {kernel: path}, the
    modules the controller signed (spec sign_cert), each checked to be this host's build with a signature that
    verifies, then put in the build's place (result: awaiting [{kernel, path, hash, sha256}], the modules still
    waiting for the controller's signature, not installed); hold_resigned: a key rotation waits for the new key's
    enrollment - an installed gdrdrv that differs from the build only in its signature is kept (it still loads),
    its row's install "held".
    Returns {changed, lib, kernels: [{kernel, build, sign, install, depmod}], packed, awaiting, diff, seconds: {step: wall
    seconds, for the steps that took any}}; check predicts and
    changes nothing. Raises PipelineError (with .results: what was done) when a step fails."""
    spec = check_driver_spec(spec)
    check_kernels(kernels)
    if spec["backend"] == "dmabuf":  # the library maps GPU memory through the CUDA driver: no gdrdrv anywhere
        kernels = []
    if lib:
        check_lib_spec(lib)
    result = {"changed": False, "lib": None, "kernels": [], "packed": [], "awaiting": [], "diff": [], "seconds": {}}
    try:
        return _converge(spec, kernels, lib, install, check, modules_root, run, say, result, takes or {}, pack,
                         signed or {}, hold_resigned)
    except PipelineError as e:
        e.results = e.results or result
        raise


def _build(spec, build_dir, stamp, argv, what, take, check, run, say, kernel=None):
    """One needed build: taken from another host's build when one is offered (compiled when that fails), else
    compiled. Returns the row's state."""
    if take:
        if check:
            return "would take"
        try:
            say(run_step(run, take_argv(spec, build_dir, stamp, take), "taking the fleet build of %s%s"
                         % (what, " for " + kernel if kernel else ""), spec["timeout"]).strip())
            return "taken"
        except PipelineError as e:
            say("%s; compiling it here instead" % e)
    if check:
        return "would build"
    say(run_step(run, argv, "the %s build%s" % (what, " for " + kernel if kernel else ""), spec["timeout"]).strip())
    return "built"


PREDICTED = ("would build", "would take")


def _lap(result, step, since):
    """Add the seconds since `since` to result["seconds"][step] (where a call's time went); the time now."""
    now = time.monotonic()
    if now - since >= 0.005:
        result["seconds"][step] = round(result["seconds"].get(step, 0) + now - since, 2)
    return now


def _converge(spec, kernels, lib, install, check, modules_root, run, say, result, takes, pack, signed,
              hold_resigned=False):
    t = time.monotonic()
    p = plan(spec, kernels, lib, modules_root)
    t = _lap(result, "plan", t)
    limit = spec["timeout"]
    rows = dict((k["kernel"], {"kernel": k["kernel"], "build": k["build"], "sign": "off",
                               "install": "skipped" if not install else "pending", "depmod": False})
                for k in p["kernels"])
    result["kernels"] = [rows[k] for k in kernels]
    if lib:
        result["lib"] = {"build": p["lib"]["build"], "install": p["lib"]["install"] if install else "skipped"}

    def fail(msg):
        raise PipelineError(msg, result)

    no_headers = [k["kernel"] for k in p["kernels"] if not k["headers"]]
    if no_headers:
        fail("no headers for %s (%s/<kernel>/build): install them, then run again; nothing was built or installed"
             % (", ".join(no_headers), modules_root))

    # 1. builds: the library, then gdrdrv for each kernel. Each is all or nothing; none installed before all are.
    if lib and p["lib"]["build"] == "needed":
        result["lib"]["build"] = _build(spec, lib["dir"], lib["stamp"], lib_build_argv(spec, lib), "libgdrapi",
                                        takes.get(lib["dir"]), check, run, say)
        result["changed"] = True
    for k in p["kernels"]:
        if k["build"] != "needed":
            continue
        rows[k["kernel"]]["build"] = _build(spec, k["build_dir"], driver_stamp(spec, k["kernel"]),
                                            driver_build_argv(spec, k["kernel"]), "gdrdrv",
                                            takes.get(k["build_dir"]), check, run, say, k["kernel"])
        result["changed"] = True
    t = _lap(result, "build", t)
    if pack and not check:
        for entry in pack["builds"]:
            dest = os.path.join(pack["dir"], entry["name"] + ".tar.gz")
            try:
                digest = pack_build(entry["dir"], dest)
            except (IOError, OSError, tarfile.TarError) as e:
                fail("packing the build %s for the fleet failed: %s" % (entry["dir"], e))
            result["packed"].append({"name": entry["name"], "path": dest, "sha256": digest})
    t = _lap(result, "pack", t)
    if not install:
        return result

    # 2. the library: staged beside the prefix, compared with the build, swapped in.
    if lib and p["lib"]["install"] == "needed":
        before = read_json(os.path.join(lib["install_dir"], INSTALL_STAMP_FILE))
        result["diff"].append({"before_header": lib["install_dir"], "after_header": lib["install_dir"],
                               "before": stamp_json(before) + "\n" if before else "",
                               "after": stamp_json(lib["stamp"]) + "\n"})
        if check:
            result["lib"]["install"] = "would install"
        else:
            say(run_step(run, lib_install_argv(lib), "installing libgdrapi", limit).strip())
            result["lib"]["install"] = "installed"
        result["changed"] = True
    t = _lap(result, "lib_install", t)
    if lib and lib.get("link"):
        _link_and_cache(lib, check, run, result)
    t = _lap(result, "link_and_ldconfig", t)
    if lib and lib.get("keep"):
        result["lib"]["pruned"] = prune_releases(lib, lib["keep"], check)
        for path in result["lib"]["pruned"]:
            result["changed"] = True
            result["diff"].append({"before_header": path, "after_header": path, "before": "(kept)\n",
                                   "after": "(%s)\n" % ("would be pruned" if check else "pruned")})
    t = _lap(result, "prune", t)

    # 3. signing: every built gdrdrv, in one call; the signer leaves a module it already signed untouched.
    predicted = [k["kernel"] for k in p["kernels"] if rows[k["kernel"]]["build"] in PREDICTED]
    if spec["sign_command"]:
        ask = [(k["kernel"], os.path.join(k["build_dir"], MODULE_FILE)) for k in p["kernels"]
               if k["kernel"] not in predicted]
        actions = dict((k, "would sign") for k in predicted)
        if ask and check and not os.path.exists(spec["sign_command"][0]):
            actions.update((k, "would sign") for k, dummy in ask)  # check mode before the signer is installed
        elif ask:
            out = run_step(run, sign_argv(spec, ask, check), "signing gdrdrv (%s)" % ", ".join(k for k, dummy in ask),
                           limit)
            got = sign_actions(out, [k for k, dummy in ask])
            actions.update((k, ("would " + a.replace("signed", "sign") if check and a != "unchanged" else a))
                           for k, a in got.items())
        for kernel, action in actions.items():
            rows[kernel]["sign"] = action
            if action != "unchanged":
                result["changed"] = True
    elif spec["sign_cert"]:
        _controller_signatures(spec, p["kernels"], rows, predicted, signed, check, run, result)
    t = _lap(result, "sign", t)

    # 4. install each gdrdrv through a rename, then depmod for each kernel whose module changed.
    for k in p["kernels"]:
        row = rows[k["kernel"]]
        if row["sign"] == AWAITING:
            row["install"] = AWAITING
            continue
        built = os.path.join(k["build_dir"], MODULE_FILE)
        new = "" if row["build"] in PREDICTED or row["sign"].startswith("would") else sha256_or_empty(built)
        if new and new == k["installed_sha256"]:
            row["install"] = "current"
            continue
        if new and k["installed_sha256"] and hold_resigned and only_resigned(built, k["dest"]):
            row["install"] = "held"
            continue
        result["diff"].append({"before_header": k["dest"], "after_header": k["dest"],
                               "before": ("sha256 %s\n" % k["installed_sha256"]) if k["installed_sha256"] else "",
                               "after": "sha256 %s\n" % (new or "(built in this run)")})
        result["changed"] = True
        if check:
            row["install"] = "would install"
            continue
        try:
            install_file(built, k["dest"])
        except (IOError, OSError) as e:
            fail("installing gdrdrv for %s failed: %s. The gdrdrv.ko already there is untouched (the copy goes "
                 "through a temporary file that is renamed); when a disk is full, free space under %s and run again"
                 % (k["kernel"], e, modules_root))
        row["install"] = "installed"
        say("installed gdrdrv for %s" % k["kernel"])
    t = _lap(result, "install", t)
    for row in result["kernels"]:
        if row["install"] == "installed":
            r = run(["depmod", row["kernel"]], capture_output=True, text=True, errors="replace")
            if r.returncode != 0:
                fail("depmod %s failed: %s" % (row["kernel"], last_words(r.stdout, r.stderr)))
            row["depmod"] = True
    _lap(result, "depmod", t)
    return result


def only_resigned(built, installed):
    """Whether the two module files differ in their appended signatures alone."""
    try:
        with open(built, "rb") as a, open(installed, "rb") as b:
            return unsigned_content(a.read()) == unsigned_content(b.read())
    except (IOError, OSError, ValueError):
        return False


def unsigned_content(data):
    """A module's bytes without any appended signature (a module signed twice carries two)."""
    while True:
        data, der = split_signature(data)
        if not der:
            return data


def _controller_signatures(spec, kernels, rows, predicted, signed, check, run, result):
    """Signing on the controller (spec sign_cert): a built gdrdrv whose signature verifies against sign_cert stays
    as it is; one the controller sent signed replaces the build's after two checks (it is this build plus a
    signature, and the signature verifies); every other one is listed in result["awaiting"] and not installed."""
    cert = spec["sign_cert"]
    for k in kernels:
        kernel, row = k["kernel"], rows[k["kernel"]]
        if kernel in predicted:
            row["sign"] = "would sign"
            continue
        built = os.path.join(k["build_dir"], MODULE_FILE)
        try:
            with open(built, "rb") as f:
                data = f.read()
            content = unsigned_content(data)
            sent = None
            if kernel in signed:
                with open(signed[kernel], "rb") as f:
                    sent = f.read()
                if unsigned_content(sent) != content:
                    raise PipelineError("the module the controller sent signed for %s is not the one built here: "
                                        "nothing was installed" % kernel)
        except (IOError, OSError, ValueError) as e:
            raise PipelineError("reading gdrdrv for %s to check its signature failed: %s" % (kernel, e), result)
        if sent is not None:
            ok, why = signature_verifies(run, sent, cert)
            if not ok:
                raise PipelineError("the module the controller signed for %s is refused: %s. Nothing was installed"
                                    % (kernel, why), result)
            if check:
                row["sign"] = "would sign"
            else:
                install_file(signed[kernel], built)
                row["sign"] = "signed"
            result["changed"] = True
        elif signature_verifies(run, data, cert)[0]:
            row["sign"] = "unchanged"
        else:
            row["sign"] = "would sign" if check else AWAITING
            result["changed"] = True
            result["awaiting"].append({"kernel": kernel, "path": built, "hash": kernel_sig_hash(kernel),
                                       "sha256": hashlib.sha256(data).hexdigest()})


def _link_and_cache(lib, check, run, result):
    """The stable link (<prefix>/current) to the installed version, then the loader cache: ldconfig when the
    library or the link changed, or when the cache does not list libgdrapi under the link (a run killed before its
    ldconfig left it stale; this heals it)."""
    link = lib["link"].rstrip("/")
    target = os.path.basename(lib["install_dir"].rstrip("/"))
    try:
        before = os.readlink(link)
    except OSError:
        before = ""
    relinked = point_link(link, target, check)
    result["lib"]["link"] = ("would point" if check else "pointed") if relinked else "current"
    if relinked:
        result["changed"] = True
        result["diff"].append({"before_header": link, "after_header": link,
                               "before": before and "-> %s\n" % before, "after": "-> %s\n" % target})
    result["lib"]["ldconfig"] = False
    if check:
        return
    if relinked or result["lib"]["install"] == "installed" or not loader_lists(
            run, os.path.join(link, "lib", "libgdrapi.so")):
        r = run(["ldconfig"], capture_output=True, text=True, errors="replace")
        if r.returncode != 0:
            raise PipelineError("ldconfig failed: %s" % last_words(r.stdout, r.stderr), result)
        result["lib"]["ldconfig"] = result["changed"] = True


def write_record(path, spec, check=False):
    """Write the driver spec as the driver record (a temporary file and a rename): (True when it changed, text)."""
    text = json.dumps(spec, indent=4, sort_keys=True) + "\n"
    try:
        with open(path) as f:
            if f.read() == text:
                return False, text
    except (IOError, OSError):
        pass
    if not check:
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    return True, text
