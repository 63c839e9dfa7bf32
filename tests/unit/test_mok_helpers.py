"""The mok_signing role's host helpers: mok-keygen (run for real with openssl) and mok-sign's pure parts and
error paths. Signing real modules with sign-file under enforcement is proven on the VMs (molecule default and
secureboot)."""

from __future__ import annotations

import datetime
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import load_script

FILES = Path(__file__).resolve().parents[2] / "roles" / "mok_signing" / "files"
MAGIC = b"~Module signature appended~\n"


mok_sign = load_script(FILES / "mok-sign", "mok_sign")


def signed(body: bytes, sig: bytes) -> bytes:
    """body + a PKCS#7 blob + struct module_signature (id_type 2, big-endian length) + magic, as sign-file writes."""
    return body + sig + struct.pack(">BBBBB3xI", 0, 0, 2, 0, 0, len(sig)) + MAGIC


@pytest.fixture(scope="module")
def keypair(tmp_path_factory):
    d = tmp_path_factory.mktemp("mok")
    out = subprocess.run([str(FILES / "mok-keygen"), str(d / "k"), "gdrcopy test/key", "3650"],
                         capture_output=True, text=True, check=True)
    return d / "k", out.stdout


def cert_text(path: Path) -> str:
    return subprocess.run(["openssl", "x509", "-inform", "DER", "-in", str(path), "-noout", "-text"],
                          capture_output=True, text=True, check=True).stdout


def test_keygen_writes_a_root_only_key_and_a_der_certificate(keypair):
    d, _ = keypair
    assert (d / "mok.key").stat().st_mode & 0o777 == 0o600
    assert d.stat().st_mode & 0o777 == 0o700
    assert (d / "mok.der").read_bytes()[:1] == b"\x30"  # DER SEQUENCE
    assert b"BEGIN CERTIFICATE" in (d / "mok.pem").read_bytes()
    assert not list(d.glob(".keygen.*")), "the work dir is removed"


def test_keygen_uses_the_module_signing_profile(keypair):
    text = cert_text(keypair[0] / "mok.der")
    assert "CN = gdrcopy test/key" in text  # a slash in the name survives -subj
    assert "sha256WithRSAEncryption" in text and "Public-Key: (2048 bit)" in text
    assert "critical" in text.split("Basic Constraints")[1].splitlines()[0]
    assert "CA:FALSE" in text
    assert "Digital Signature" in text.split("Key Usage:")[1].splitlines()[1]
    assert "Code Signing, 1.3.6.1.4.1.2312.16.1.2" in text
    assert "Subject Key Identifier" in text


def test_keygen_sets_not_before_in_the_past_and_the_asked_validity(keypair):
    d, out = keypair
    fields = dict(line.split("=", 1) for line in out.splitlines())
    fmt = "%b %d %H:%M:%S %Y %Z"
    start = datetime.datetime.strptime(" ".join(fields["notBefore"].split()), fmt)
    end = datetime.datetime.strptime(" ".join(fields["notAfter"].split()), fmt)
    now = datetime.datetime.utcnow()
    assert now - start > datetime.timedelta(hours=23)
    assert datetime.timedelta(days=3649) < end - now < datetime.timedelta(days=3651)


def test_keygen_never_replaces_a_key(keypair):
    d, _ = keypair
    before = (d / "mok.key").read_bytes()
    r = subprocess.run([str(FILES / "mok-keygen"), str(d), "x", "1"], capture_output=True, text=True)
    assert r.returncode == 1 and "not replacing" in r.stderr
    assert (d / "mok.key").read_bytes() == before


@pytest.mark.parametrize("text, serial", [
    ("serial=0A1B2C", "A1B2C"), ("0a:1b:2c", "A1B2C"), ("0x0A1B2C\n", "A1B2C"), ("00", "0"),
    ("48:9F:7B:D3", "489F7BD3"),
])
def test_serials_compare_without_separators_or_leading_zeros(text, serial):
    assert mok_sign.normalize_serial(text) == serial


def test_strip_signatures_removes_one_or_two_and_keeps_the_body():
    body = b"\x7fELF" + b"x" * 1000
    assert mok_sign.strip_signatures(body) == (body, 0)
    assert mok_sign.strip_signatures(signed(body, b"S" * 300)) == (body, 1)
    assert mok_sign.strip_signatures(signed(signed(body, b"A" * 10), b"B" * 20)) == (body, 2)


def test_a_malformed_signature_length_is_an_error():
    bad = b"tiny" + struct.pack(">BBBBB3xI", 0, 0, 2, 0, 0, 10_000) + MAGIC
    with pytest.raises(mok_sign.SignError, match="malformed"):
        mok_sign.strip_signatures(bad)


def test_cert_serial_reads_der_and_pem(keypair):
    d, out = keypair
    expected = mok_sign.normalize_serial([ln for ln in out.splitlines() if ln.startswith("serial=")][0])
    assert mok_sign.cert_serial(str(d / "mok.der")) == mok_sign.cert_serial(str(d / "mok.pem")) == expected


def run_cli(*args):
    r = subprocess.run([str(FILES / "mok-sign"), *args], capture_output=True, text=True)
    return r.returncode, json.loads(r.stdout)


def test_cli_refuses_bad_arguments_and_a_missing_key(tmp_path, keypair):
    d, _ = keypair
    rc, out = run_cli("--key", str(d / "mok.key"), "--cert", str(d / "mok.der"), "no-kernel-here")
    assert rc == 1 and "KERNEL=MODULE" in out["msg"]
    rc, out = run_cli("--key", str(tmp_path / "absent.key"), "--cert", str(d / "mok.der"), "6.1.0-1-amd64=/x.ko")
    assert rc == 1 and "absent.key does not exist" in out["msg"]


def test_cli_reports_a_missing_module_and_a_kernel_without_sign_file(tmp_path, keypair):
    d, _ = keypair
    rc, out = run_cli("--key", str(d / "mok.key"), "--cert", str(d / "mok.der"), f"6.1.0-1-amd64={tmp_path}/gdrdrv.ko")
    assert rc == 1 and "does not exist" in out["msg"]
    ko = tmp_path / "gdrdrv.ko"
    ko.write_bytes(b"\x7fELF" + b"\0" * 64)
    rc, out = run_cli("--key", str(d / "mok.key"), "--cert", str(d / "mok.der"), f"0.0.0-none={ko}")
    assert rc == 1 and "no sign-file for kernel 0.0.0-none: install its headers" in out["msg"]


def test_check_mode_predicts_before_the_build_and_before_the_key(tmp_path):
    rc, out = run_cli("--check", "--key", str(tmp_path / "mok.key"), "--cert", str(tmp_path / "mok.der"),
                      f"6.1.0-1-amd64={tmp_path}/not-built/gdrdrv.ko")
    assert rc == 0 and out["changed"] is True
    assert out["results"][0]["action"] == "signed" and out["results"][0]["note"] == "not built yet"
    assert not os.path.exists(tmp_path / "mok.key")


# --- compressed module trees (.ko.xz, .ko.zst, .ko.gz): signing reads the module uncompressed ------------------

@pytest.mark.parametrize("suffix,compress", [(".xz", ["xz", "-c"]), (".zst", ["zstd", "-cq"]), (".gz", ["gzip", "-c"])])
@pytest.mark.fault(12)
def test_a_compressed_module_is_read_uncompressed_with_its_signature(tmp_path, suffix, compress):
    """What sign_one strips and re-signs is the module itself, never the compressed bytes (signing those corrupts
    the file); the real compressors of the host make the fixture."""
    body = signed(b"\x7fELF module body", b"PKCS7")
    path = tmp_path / f"gdrdrv.ko{suffix}"
    path.write_bytes(subprocess.run(compress, input=body, capture_output=True, check=True).stdout)
    data, found = mok_sign.read_module(str(path))
    assert (data, found) == (body, suffix)
    assert mok_sign.strip_signatures(data) == (b"\x7fELF module body", 1)


@pytest.mark.fault(12)
def test_a_module_is_compressed_again_with_xz_crc32_which_the_kernel_can_check(tmp_path):
    """In-kernel xz decompression knows CRC32 only: CRC64 (xz's default) fails to load
    (docs/SECURE-BOOT.md: Compressed modules)."""
    packed = mok_sign.run(mok_sign.COMPRESSORS[".xz"][1], b"\x7fELF module body")
    (tmp_path / "m.ko.xz").write_bytes(packed)
    listing = subprocess.run(["xz", "--robot", "--list", str(tmp_path / "m.ko.xz")], capture_output=True, text=True,
                             check=True).stdout
    checks = [line.split("\t")[6] for line in listing.splitlines() if line.startswith("file\t")]
    assert checks == ["CRC32"], listing
    assert mok_sign.run(mok_sign.COMPRESSORS[".xz"][0], packed) == b"\x7fELF module body"


# cryptography warns about 40 Cyrillic characters (it counts the 80 UTF-8 bytes; X.509's limit counts characters)
@pytest.mark.filterwarnings("ignore:Attribute's length")
@pytest.mark.parametrize("cn", ["a+b", "Ж" * 40, "gdrcopy, cluster=7 \\ key/2", "é+/=\\"])
def test_keygen_writes_every_common_name_validation_accepts_verbatim(tmp_path, cn):
    """Before: "a+b" broke key generation (+ starts another attribute in -subj) and 40 Cyrillic characters were
    read as 80 Latin-1 ones (garbled, and over the 64-character limit). The name is now read back exactly."""
    from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_inputs as I
    assert I.common_name("mok_signing_key_cn", cn, {}) == cn
    r = subprocess.run([str(FILES / "mok-keygen"), str(tmp_path / "k"), cn, "30"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    x509 = pytest.importorskip("cryptography.x509")
    cert = x509.load_der_x509_certificate((tmp_path / "k" / "mok.der").read_bytes())
    names = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    assert [n.value for n in names] == [cn] and len(cert.subject.rdns) == 1
    assert cn in r.stdout
