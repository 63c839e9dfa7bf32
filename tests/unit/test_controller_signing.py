"""Signing on the controller, through the host's pipeline (gdrcopy_build's build(), gdrcopy_pipeline) and the
controller's signer (gdrcopy_modsign.Signer): the build is the role's gdrcopy-build on the fixture source tree, whose
kbuild step leaves the real fixture module (.cache/modsign/gdrdrv-unsigned.ko, tests/unit/modsign_build.py, with 6.1.0-57-amd64's vermagic);
the host checks signatures with openssl, the controller signs with cryptography. The action plugin's part (slurp,
put, the second call) runs in the secureboot scenario on a real Secure Boot VM."""

import subprocess

import pytest
import modsign_build
from conftest import FIXTURES
from test_build_module import FILES, make_tarball

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_modsign as MS
from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_pipeline as P
from ansible_collections.gpufleet.gdrcopy.plugins.modules import gdrcopy_build as M

HERE = FIXTURES / "modsign"
BUILT = modsign_build.build()
K = "6.1.0-57-amd64"


def signer(letter, cache=""):
    return MS.Signer(MS.load_private_key((HERE / ("key-%s.pem" % letter)).read_bytes()),
                     MS.load_certificate((HERE / ("cert-%s.der" % letter)).read_bytes()), cache)


@pytest.fixture
def node(tmp_path):
    kbuild = "all:\n\tcp '%s' gdrdrv.ko\n" % (BUILT / "gdrdrv-unsigned.ko")
    tarball, sha = make_tarball(tmp_path, kbuild=kbuild)
    modules = tmp_path / "lib-modules"
    (modules / K / "build").mkdir(parents=True)
    (modules / K / "build" / "Makefile").write_text("")
    build = tmp_path / "build" / ("2.6-" + sha[:12])
    driver = {"build_helper": str(FILES / "gdrcopy-build"), "tarball": str(tarball),
              "build_log": str(tmp_path / "build" / "builds.log"), "driver_dir": str(build / "driver"),
              "stamp_base": {"component": "driver", "sha256": sha, "nvidia_src_dir": "/usr/src/nv", "flavor": "open"},
              "nvidia_src_dir": "/usr/src/nv", "flavor": "open", "module_subdir": "updates/gdrcopy",
              "sign_command": [], "sign_cert": str(HERE / "cert-a.der"), "timeout": 600}
    return {"tmp": tmp_path, "modules": modules, "driver": driver, "depmod": []}


def call(node, signed=None, hold=False, **driver):
    def run(argv, **kw):
        if argv[0] == "depmod":
            node["depmod"].append(argv[1])
            return subprocess.CompletedProcess(argv, 0, "", "")
        return subprocess.run(argv, **kw)
    params = {"kernels": [K], "install": True, "record": None, "driver": dict(node["driver"], **driver),
              "signed": [{"kernel": k, "from": str(p)} for k, p in (signed or {}).items()], "hold_resigned": hold}
    return M.build(params, modules_root=str(node["modules"]), run=run)


def dest(node):
    return node["modules"] / K / "updates" / "gdrcopy" / "gdrdrv.ko"


def controller(node, result, who, name="sent.ko"):
    """What the action plugin does with the modules the call left awaiting: {kernel: signed copy on the host}."""
    out = {}
    for entry in result["awaiting"]:
        data = open(entry["path"], "rb").read()
        signed, dummy = who.sign(data, entry["kernel"], entry["hash"])
        path = node["tmp"] / name
        path.write_bytes(signed)
        out[entry["kernel"]] = path
    return out


def row(result):
    r = result["kernels"][0]
    return r["build"], r["sign"], r["install"]


def test_a_module_waits_for_the_controller_then_installs_signed_and_stays(node):
    result, error = call(node)
    assert error is None and row(result) == ("built", P.AWAITING, P.AWAITING)
    assert not dest(node).exists() and node["depmod"] == []  # nothing unsigned is installed
    [entry] = result["awaiting"]
    assert entry["kernel"] == K and entry["hash"] == "sha256" and entry["path"].endswith("/%s/gdrdrv.ko" % K)
    result, error = call(node, signed=controller(node, result, signer("a")))
    assert error is None and row(result) == ("current", "signed", "installed") and result["awaiting"] == []
    assert P.signature_verifies(subprocess.run, dest(node).read_bytes(), str(HERE / "cert-a.der")) == (True, "")
    # RSA signatures are deterministic: the module installed is byte for byte the one signed with sign-file but for
    # the digest algorithm's NULL parameters (tests/unit/test_modsign.py)
    assert MS.parse_pkcs7(P.split_signature(dest(node).read_bytes())[1]) == MS.parse_pkcs7(
        P.split_signature((BUILT / "signfile-a-sha256.ko").read_bytes())[1])
    assert P.unsigned_content(dest(node).read_bytes()) == (BUILT / "gdrdrv-unsigned.ko").read_bytes()
    assert node["depmod"] == [K]
    result, error = call(node)  # the rerun: nothing to sign, nothing to install
    assert error is None and row(result) == ("current", "unchanged", "current") and not result["changed"]


def test_a_new_key_resigns_and_the_old_module_stays_until_then(node):
    result, dummy = call(node)
    call(node, signed=controller(node, result, signer("a")))
    old = dest(node).read_bytes()
    result, error = call(node, sign_cert=str(HERE / "cert-b.der"))
    assert error is None and row(result) == ("current", P.AWAITING, P.AWAITING)
    assert dest(node).read_bytes() == old  # still loadable with the enrolled key A until B signs
    sent = controller(node, result, signer("b"))
    # while B waits for its enrollment (a rotation: the mok_signing role's gdrcopy_hold_resigned), A's stays
    result, error = call(node, signed=sent, hold=True, sign_cert=str(HERE / "cert-b.der"))
    assert error is None and row(result) == ("current", "signed", "held") and dest(node).read_bytes() == old
    result, error = call(node, hold=True, sign_cert=str(HERE / "cert-b.der"))
    assert error is None and row(result) == ("current", "unchanged", "held") and not result["changed"]
    result, error = call(node, sign_cert=str(HERE / "cert-b.der"))  # B enrolled: the re-signed module goes in
    assert error is None and row(result) == ("current", "unchanged", "installed")
    assert P.signature_verifies(subprocess.run, dest(node).read_bytes(), str(HERE / "cert-b.der"))[0]


def test_the_host_refuses_what_the_controller_should_not_have_sent(node):
    result, dummy = call(node)
    sent = controller(node, result, signer("b"))  # signed by a key the host does not trust
    result2, error = call(node, signed=sent)
    assert "is refused: it does not verify against" in error and not dest(node).exists()
    other = node["tmp"] / "other.ko"  # another module, validly signed
    other.write_bytes(P.append_signature(b"\x7fELF" + b"\0" * 100, P.split_signature(
        (BUILT / "signfile-a-sha256.ko").read_bytes())[1]))
    result2, error = call(node, signed={K: other})
    assert "is not the one built here" in error and not dest(node).exists()
    with pytest.raises(P.PipelineError, match="a kernel of this call"):
        call(node, signed={"6.12.0-1-amd64": other})


def test_one_signature_per_distinct_module_with_the_fleet_cache(node, tmp_path):
    cache = tmp_path / "fleet-cache"
    first, second = signer("a", str(cache)), signer("a", str(cache))  # two hosts' workers
    data = (BUILT / "gdrdrv-unsigned.ko").read_bytes()
    one, how1 = first.sign(data, K, "sha256")
    two, how2 = second.sign(data, K, "sha256")
    assert one == two and (how1, how2) == ("signed", "cached") and first.signatures + second.signatures == 1
    [kept] = (cache / "signatures").glob("*.p7s")
    kept.write_bytes(kept.read_bytes()[:-1] + b"\0")  # a damaged entry is signed again, not used
    three, how3 = signer("a", str(cache)).sign(data, K, "sha256")
    assert three == one and how3 == "signed"
    assert signer("b", str(cache)).sign(data, K, "sha256")[1] == "signed"  # per certificate

