"""The roles' package tables against the names the distributions publish (tests/fixtures/packages/published.json:
what each release's archive, or NVIDIA's repository for EL, had on the day it was looked at, with its source), and
the README's platform table against the roles' metadata: a misspelled name, or a release the README calls
supported without a proof, fails here."""

import json
import re
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, REPO

PUBLISHED = json.loads((FIXTURES / "packages" / "published.json").read_text())
RELEASES = PUBLISHED["releases"]
GDRCOPY = yaml.safe_load((REPO / "roles" / "gdrcopy" / "vars" / "main.yml").read_text())["__gdrcopy_os_packages"]
MOK = yaml.safe_load((REPO / "roles" / "mok_signing" / "vars" / "main.yml").read_text())["__mok_signing_os_packages"]


def names(family):
    """Every package name (or template) the roles may install on a host of the family, by what it is for."""
    table = GDRCOPY[family]
    return ([("build", n) for n in table["build"]] + [("headers", table["headers"])]
            + [("nvidia " + flavor, n) for flavor, ns in table["nvidia_source"].items() for n in ns]
            + [("signing", n) for n in MOK[family] + ["mokutil"]])


def pattern(template):
    """A name of the table as a pattern: {kernel} a kernel release, {branch} a driver branch."""
    rx = re.escape(template).replace(re.escape("{kernel}"), r"[0-9][0-9A-Za-z.+_-]*")
    return re.compile(rx.replace(re.escape("{branch}"), r"[0-9]+"))


def published(release, template):
    rx = pattern(template)
    return sorted(n for n in RELEASES[release]["packages"] if rx.fullmatch(n))


def unverified(release):
    u = RELEASES[release].get("unverified", {})
    return set(u) if isinstance(u, dict) else set()


def test_every_source_the_fixture_cites_is_named_and_dated():
    for release, r in RELEASES.items():
        for name, sources in r["packages"].items():
            assert sources and all(s in PUBLISHED["sources"] for s in sources), (release, name)
    assert all(s["looked"] and s["url"] for s in PUBLISHED["sources"].values())


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_every_build_header_and_signing_name_is_published_or_said_unchecked(release):
    """Debian and Ubuntu: each name is in the release's archive. EL: each is seen published, or listed as not
    checked (their mirrors did not answer), which the README's platform table says."""
    family = RELEASES[release]["family"]
    missing = [(what, n) for what, n in names(family) if not what.startswith("nvidia")
               and not published(release, n) and n not in unverified(release)]
    assert missing == []
    if family == "Debian":
        assert not unverified(release) & {n for _, n in names(family)}, "Debian and Ubuntu names are all checked"


@pytest.mark.parametrize("release", sorted(RELEASES))
@pytest.mark.parametrize("flavor", ["proprietary", "open"])
def test_each_driver_flavor_has_a_published_source_package(release, flavor):
    family = RELEASES[release]["family"]
    candidates = GDRCOPY[family]["nvidia_source"][flavor]
    found = {c: published(release, c) for c in candidates}
    if not any(found.values()):
        assert set(candidates) <= unverified(release), (release, flavor, "no candidate is published")


@pytest.mark.parametrize("family", sorted(GDRCOPY))
def test_no_name_of_a_table_is_published_nowhere(family):
    """A name no release of its family publishes is a typo or a retired package (EL names not checked aside)."""
    releases = [r for r, v in RELEASES.items() if v["family"] == family]
    nowhere = [n for _, n in names(family)
               if not any(published(r, n) for r in releases) and not any(n in unverified(r) for r in releases)]
    assert nowhere == []


def test_the_names_that_are_only_debians_or_only_ubuntus_are_those_the_tables_expect():
    """The Debian family's list holds both distributions' names: Debian has no branch-numbered NVIDIA packages,
    Ubuntu no nvidia-kernel-dkms; the plan takes the first that the host's package manager knows."""
    assert published("debian-13", "nvidia-kernel-dkms") and not published("ubuntu-24.04", "nvidia-kernel-dkms")
    assert published("ubuntu-24.04", "nvidia-dkms-{branch}-server") and not published("debian-13", "nvidia-dkms-{branch}")
    # {kernel} is a release (a digit first): the metapackage linux-headers-amd64 is none
    assert published("debian-13", "linux-headers-{kernel}") == ["linux-headers-6.12.118+deb13-amd64"]


def platform_rows():
    section = (REPO / "README.md").read_text().split("\n## Platforms", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.match(r"^(Debian|Ubuntu|EL) ", cells[0]):
            rows[cells[0]] = cells
    return rows


def test_the_readme_platform_table_covers_every_release_and_the_metadata_lists_only_the_supported():
    rows = platform_rows()
    assert set(rows) == {"Debian 12", "Debian 13", "Ubuntu 22.04", "Ubuntu 24.04", "EL 8", "EL 9"}
    supported = {k for k, c in rows.items() if c[1].startswith("**supported")}
    assert supported == {"Debian 12", "Debian 13"}
    for k in supported:  # proven in a VM: the row names its scenarios, which exist
        scenarios = re.findall(r"`molecule/(\w+)`", rows[k][2])
        assert scenarios and all((REPO / "molecule" / s / "molecule.yml").exists() for s in scenarios), k
    codenames = {"Debian 12": "bookworm", "Debian 13": "trixie"}
    for role in ("gdrcopy", "mok_signing", "nvidia_peermem"):
        meta = yaml.safe_load((REPO / "roles" / role / "meta" / "main.yml").read_text())
        platforms = {(p["name"], str(v)) for p in meta["galaxy_info"]["platforms"] for v in p["versions"]}
        assert platforms == {("Debian", codenames[k]) for k in supported}, role
