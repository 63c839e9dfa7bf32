"""The module-signing test files, made at test time under .cache/modsign (git ignores it) instead of kept in git: a
module object with gdrdrv's .modinfo (name, the kernel's vermagic, version; gcc, no kernel headers needed) and that
module signed by the kernel's own sign-file (Debian's linux-kbuild-6.1; tests/harness/setup-host.sh installs it)
with the TEST-ONLY keys of tests/fixtures/modsign, once per checkout (remade when this file or a key changes)."""

import hashlib
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEYS = REPO / "tests" / "fixtures" / "modsign"
OUT = REPO / ".cache" / "modsign"
KERNEL = "6.1.0-57-amd64"
SIGN_FILES = ("/usr/lib/linux-kbuild-6.1/scripts/sign-file",)
CASES = (("a", "sha256"), ("a", "sha512"), ("b", "sha256"))
SOURCE = r'''
#define MODINFO(tag, info) __attribute__((section(".modinfo"), used, aligned(1))) \
    static const char tag[] = info
MODINFO(m_version, "version=2.6");
MODINFO(m_license, "license=Dual MIT/GPL");
MODINFO(m_name, "name=gdrdrv");
MODINFO(m_vermagic, "vermagic=%s SMP preempt mod_unload modversions ");
int gdrdrv_init_module(void) { return 0; }
''' % KERNEL


def sign_file():
    return next((p for p in SIGN_FILES if Path(p).exists()), "")


def build():
    """The folder with gdrdrv-unsigned.ko and signfile-<key>-<hash>.ko (those only where sign-file is there)."""
    stamp = hashlib.sha256(Path(__file__).read_bytes() + b"".join(
        (KEYS / n).read_bytes() for n in ("key-a.pem", "cert-a.der", "key-b.pem", "cert-b.der"))).hexdigest()
    if (OUT / ".stamp").exists() and (OUT / ".stamp").read_text() == stamp + sign_file():
        return OUT
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    (OUT / "gdrdrv.c").write_text(SOURCE)
    subprocess.run(["gcc", "-c", "-O2", "-fno-asynchronous-unwind-tables", "-o", str(OUT / "gdrdrv-unsigned.ko"),
                    str(OUT / "gdrdrv.c")], check=True)
    if sign_file():
        for letter, hash_name in CASES:
            subprocess.run([sign_file(), hash_name, str(KEYS / ("key-%s.pem" % letter)),
                            str(KEYS / ("cert-%s.der" % letter)), str(OUT / "gdrdrv-unsigned.ko"),
                            str(OUT / ("signfile-%s-%s.ko" % (letter, hash_name)))], check=True)
    (OUT / ".stamp").write_text(stamp + sign_file())
    return OUT
