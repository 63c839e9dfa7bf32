"""Module signatures made on the controller (plugins/module_utils/gdrcopy_modsign.py) against the kernel's own
sign-file, on a module file made at test time (tests/unit/modsign_build.py: .cache/modsign, signed there by
Debian 12's sign-file), read back by modinfo (kmod) and checked on the host's side by openssl (gdrcopy_pipeline.signature_verifies); the PKCS#11
path signs through a SoftHSM2 token holding the same key."""

import importlib.util
import os
import json
import shutil
import subprocess
import sys

import pytest
import modsign_build
from conftest import FIXTURES, need

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_modsign as MS
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as P

HERE = FIXTURES / "modsign"
KERNEL = "6.1.0-57-amd64"  # the fixture module's vermagic
SOFTHSM = "/usr/lib/softhsm/libsofthsm2.so"


BUILT = modsign_build.build()  # the module and sign-file's signatures, made at test time (.cache/modsign)


def read(name):
    path = (BUILT if name.endswith(".ko") else HERE) / name
    need(path.exists(), "%s: the kernel's sign-file is missing (linux-kbuild-6.1, make setup-vm)" % name)
    return path.read_bytes()


def pair(letter):
    return (MS.load_private_key(read("key-%s.pem" % letter)), MS.load_certificate(read("cert-%s.der" % letter)))


def modinfo_sig(path):
    """What modinfo reads of a module's signature: signer, key id, hash, signature value."""
    fields = ("signer", "sig_key", "sig_hashalgo", "signature", "sig_id")
    out = {}
    for field in fields:
        r = subprocess.run(["modinfo", "-F", field, str(path)], capture_output=True, text=True, check=True)
        out[field] = " ".join(r.stdout.split())
    return out


UNSIGNED = read("gdrdrv-unsigned.ko")
CASES = [("a", "sha256"), ("a", "sha512"), ("b", "sha256")]


@pytest.mark.parametrize("letter,hash_name", CASES)
def test_the_signature_equals_sign_files_for_the_same_key_hash_and_module(tmp_path, letter, hash_name):
    key, cert = pair(letter)
    ours = MS.sign_module(UNSIGNED, KERNEL, hash_name, key, cert)
    theirs = read("signfile-%s-%s.ko" % (letter, hash_name))
    content, our_der = P.split_signature(ours)
    their_content, their_der = P.split_signature(theirs)
    assert content == their_content == UNSIGNED
    ours_parsed, theirs_parsed = MS.parse_pkcs7(our_der), MS.parse_pkcs7(their_der)
    # RSA PKCS#1 v1.5 is deterministic: the same signature value. The DER differs only where the digest algorithm
    # is named (the SignedData's list and the signer's): cryptography writes its NULL parameters (2 bytes each),
    # OpenSSL's CMS leaves them out; RFC 5754 has readers take both, and the kernel's parser does.
    assert ours_parsed == theirs_parsed
    assert ours_parsed["digest"] == hash_name and ours_parsed["serial"] == cert.serial_number
    assert len(our_der) - len(their_der) == 4
    assert our_der.replace(b"\x05\x00", b"").endswith(ours_parsed["signature"])
    # modinfo reads the same signer, key id, hash and signature from both files
    (tmp_path / "ours.ko").write_bytes(ours)
    (tmp_path / "theirs.ko").write_bytes(theirs)
    got, want = modinfo_sig(tmp_path / "ours.ko"), modinfo_sig(tmp_path / "theirs.ko")
    assert got == want
    assert got["signer"] == "gdrcopy-ansible test signing key %s" % letter.upper()
    assert got["sig_hashalgo"] == hash_name and got["sig_id"] == "PKCS#7"
    # and each verifies as the kernel checks it, on the controller and with the host's openssl
    MS.verify(content, their_der, cert, hash_name)
    for path in (tmp_path / "ours.ko", tmp_path / "theirs.ko"):
        cert_path = HERE / ("cert-%s.der" % letter)
        assert P.signature_verifies(subprocess.run, path.read_bytes(), str(cert_path)) == (True, "")


def test_append_and_split_are_each_others_inverse():
    theirs = read("signfile-a-sha256.ko")
    content, der = P.split_signature(theirs)
    assert P.append_signature(content, der) == theirs
    assert P.split_signature(UNSIGNED) == (UNSIGNED, b"")
    broken = theirs[:-len(P.SIG_MAGIC) - 4] + b"\xff\xff\xff\xff" + P.SIG_MAGIC
    with pytest.raises(ValueError, match="malformed"):
        P.split_signature(broken)


def test_a_module_signed_by_another_key_is_stripped_and_signed_again():
    key, cert = pair("a")
    resigned = MS.sign_module(read("signfile-b-sha256.ko"), KERNEL, "sha256", key, cert)
    assert resigned == MS.sign_module(UNSIGNED, KERNEL, "sha256", key, cert)
    twice = P.append_signature(read("signfile-b-sha256.ko"), P.split_signature(read("signfile-a-sha256.ko"))[1])
    assert MS.sign_module(twice, KERNEL, "sha256", key, cert) == resigned


def test_the_host_side_check_refuses_what_the_kernel_would_refuse(tmp_path):
    signed = read("signfile-a-sha256.ko")
    cert_a, cert_b = str(HERE / "cert-a.der"), str(HERE / "cert-b.der")
    pem = tmp_path / "cert-a.pem"
    pem.write_text(P.pem_certificate(cert_a))
    assert P.signature_verifies(subprocess.run, signed, str(pem)) == (True, "")
    ok, why = P.signature_verifies(subprocess.run, signed, cert_b)
    assert not ok and "does not verify against" in why
    ok, why = P.signature_verifies(subprocess.run, UNSIGNED, cert_a)
    assert (ok, why) == (False, "no signature is appended")
    tampered = bytearray(signed)
    tampered[100] ^= 1
    assert not P.signature_verifies(subprocess.run, bytes(tampered), cert_a)[0]
    with pytest.raises(MS.SignError, match="does not verify"):
        content, der = P.split_signature(bytes(tampered))
        MS.verify(content, der, pair("a")[1])


def test_the_controller_signs_only_gdrdrv_built_for_the_named_kernel():
    key, cert = pair("a")
    with pytest.raises(MS.SignError, match=r"refused: it is 'gdrdrv' built for '6.1.0-57-amd64', not gdrdrv built "
                                           r"for 6.12.0-1-amd64"):
        MS.sign_module(UNSIGNED, "6.12.0-1-amd64", "sha256", key, cert)
    renamed = UNSIGNED.replace(b"name=gdrdrv", b"name=evildr")
    with pytest.raises(MS.SignError, match="it is 'evildr'"):
        MS.sign_module(renamed, KERNEL, "sha256", key, cert)
    with pytest.raises(MS.SignError, match="not an ELF file"):
        MS.sign_module(b"#!/bin/sh\nrm -rf /\n", KERNEL, "sha256", key, cert)
    with pytest.raises(MS.SignError, match="does not make"):
        MS.sign_module(UNSIGNED, KERNEL, "sha1", key, cert)
    assert MS.modinfo(UNSIGNED)["version"] == ["2.6"]
    # the hash the host names becomes part of a file name in the controller's cache: only the known ones
    with pytest.raises(MS.SignError, match=r"hash '../../x' for 6.1.0-57-amd64: only sha224, sha256"):
        MS.Signer(key, cert, cache="/nonexistent").sign(UNSIGNED, KERNEL, "../../x")


def test_a_key_that_is_not_the_certificates_is_refused():
    key_b, dummy = pair("b")
    with pytest.raises(MS.SignError, match="does not belong to the certificate"):
        MS.check_pair(key_b, pair("a")[1])
    MS.check_pair(*pair("a"))


def test_the_kernel_hash_comes_from_its_config(tmp_path):
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "config-6.1.0-57-amd64").write_text('CONFIG_MODULE_SIG=y\nCONFIG_MODULE_SIG_HASH="sha512"\n')
    build = tmp_path / "lib/modules/6.12.0-1-amd64/build"
    build.mkdir(parents=True)
    (build / ".config").write_text('CONFIG_MODULE_SIG_HASH="sha384"\n')
    assert P.kernel_sig_hash("6.1.0-57-amd64", str(tmp_path)) == "sha512"
    assert P.kernel_sig_hash("6.12.0-1-amd64", str(tmp_path)) == "sha384"
    assert P.kernel_sig_hash("6.99.0", str(tmp_path)) == "sha256"


@pytest.mark.parametrize("uri,want", [
    ("pkcs11:token=mok;object=gdrdrv%20key?pin-value=1234",
     {"token": "mok", "object": "gdrdrv key", "pin-value": "1234"}),
    ("pkcs11:id=%01%02;type=private?module-path=/usr/lib/softhsm/libsofthsm2.so",
     {"id": b"\x01\x02", "type": "private", "module-path": "/usr/lib/softhsm/libsofthsm2.so"}),
])
def test_pkcs11_uris_are_read_as_rfc_7512_says(uri, want):
    assert MS.parse_pkcs11_uri(uri) == want


@pytest.mark.parametrize("uri,why", [
    ("pkcs11:token=mok", "names no key"),
    ("file:/etc/key.pem", "does not start with pkcs11:"),
    ("pkcs11:object=k;object=l", "given twice"),
    ("pkcs11:object=k;type=cert", "type=private"),
    ("pkcs11:object=k;slot=1", "not one of the attributes"),
    ("pkcs11:object=k\n", "white space"),
])
def test_bad_pkcs11_uris_are_refused_with_the_reason(uri, why):
    with pytest.raises(ValueError, match=why):
        MS.parse_pkcs11_uri(uri)


@pytest.fixture
def softhsm_token(tmp_path, monkeypatch):
    """A SoftHSM2 token "gdrcopy-test" holding test key A as object "mok-a" (user PIN 4321)."""
    # python-pkcs11 is the controller's optional package for tokens (requirements-test.txt has it): make test fails
    # without it, the ansible-core matrix (ansible-core and pytest only) skips these tests
    need(importlib.util.find_spec("pkcs11") is not None, "python-pkcs11 is not installed (requirements-test.txt)")
    assert os.path.exists(SOFTHSM) and shutil.which("softhsm2-util"), "tests/harness/setup-host.sh (make setup-vm) installs softhsm2"
    (tmp_path / "tokens").mkdir()
    conf = tmp_path / "softhsm2.conf"
    conf.write_text("directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n" % (tmp_path / "tokens"))
    monkeypatch.setenv("SOFTHSM2_CONF", str(conf))
    pkcs8 = tmp_path / "key-a.p8"
    subprocess.run(["openssl", "pkcs8", "-topk8", "-nocrypt", "-in", str(HERE / "key-a.pem"), "-out", str(pkcs8)],
                   check=True)
    subprocess.run(["softhsm2-util", "--init-token", "--free", "--label", "gdrcopy-test", "--so-pin", "9999",
                    "--pin", "4321"], check=True, capture_output=True)
    subprocess.run(["softhsm2-util", "--import", str(pkcs8), "--token", "gdrcopy-test", "--label", "mok-a",
                    "--id", "0a", "--pin", "4321"], check=True, capture_output=True)
    return tmp_path


# A PKCS#11 library is initialised once per process (python-pkcs11 keeps it, and a login is the process's): each
# case runs in a fresh interpreter, as each Ansible worker does.
TOKEN_CASE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_modsign as MS
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as P
here, uri, module, pin, cert_letter = sys.argv[2:7]
cert = MS.load_certificate(open(here + "/cert-a.der", "rb").read())
try:
    key = MS.token_key(uri, module, pin, cert)
    MS.check_pair(key, MS.load_certificate(open(here + "/cert-%s.der" % cert_letter, "rb").read()))
    signed = MS.sign_module(open(sys.argv[7], "rb").read(), "6.1.0-57-amd64", "sha256", key, cert)
    try:
        key.private_bytes(None, None, None)
    except MS.SignError as e:
        leaves = str(e)
    print(json.dumps({"signed": signed.hex(), "private_bytes": leaves}))
except MS.SignError as e:
    print(json.dumps({"error": str(e)}))
"""


def token_case(uri, module=SOFTHSM, pin="4321", cert="a"):
    from conftest import COLLECTIONS
    r = subprocess.run([sys.executable, "-c", TOKEN_CASE, str(COLLECTIONS), str(HERE), uri, module, pin, cert,
                        str(BUILT / "gdrdrv-unsigned.ko")],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def test_a_pkcs11_token_key_signs_what_sign_file_signs(softhsm_token):
    got = token_case("pkcs11:token=gdrcopy-test;object=mok-a")
    ours = bytes.fromhex(got["signed"])
    assert ours == MS.sign_module(UNSIGNED, KERNEL, "sha256", *pair("a"))
    theirs = read("signfile-a-sha256.ko")
    assert MS.parse_pkcs7(P.split_signature(ours)[1]) == MS.parse_pkcs7(P.split_signature(theirs)[1])
    assert "does not leave the token" in got["private_bytes"]
    assert "error" not in token_case("pkcs11:object=mok-a;type=private?module-path=" + SOFTHSM, module="")


@pytest.mark.parametrize("case,why", [
    ({"uri": "pkcs11:token=gdrcopy-test;object=mok-a", "pin": "0000"}, "could not be opened"),
    ({"uri": "pkcs11:token=gdrcopy-test;object=other"}, "names 0 RSA private keys"),
    ({"uri": "pkcs11:token=nope;object=mok-a"}, "matches 0 tokens"),
    ({"uri": "pkcs11:object=mok-a", "module": ""}, "no PKCS#11 library"),
    ({"uri": "pkcs11:object=mok-a", "module": "/nonexistent/libp11.so"}, "cannot be used"),
    ({"uri": "pkcs11:object=mok-a", "cert": "b"}, "does not belong"),
])
def test_a_pkcs11_token_is_refused_with_what_to_fix(softhsm_token, case, why):
    case = dict(case)
    assert why in token_case(case.pop("uri"), **case)["error"]
