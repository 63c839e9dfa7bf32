"""The gdrcopy role's source step on the controller, run for real with ansible-playbook against file:// sources:
a checksum mismatch, a corrupt cache entry, an unknown release, a git tag that moved."""

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "tests" / "unit" / "playbooks" / "source.yml"
BIN = Path(sys.executable).parent


def run(tmp_path, env_extra=None, **extra):
    env = dict(os.environ, **(env_extra or {}), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    if extra.get("gdrcopy_cache_dir") != "":
        extra.setdefault("gdrcopy_cache_dir", str(tmp_path / "cache"))
    extra["ansible_python_interpreter"] = sys.executable
    cmd = [str(BIN / "ansible-playbook"), "-i", "localhost,", str(PLAYBOOK), "-e", json.dumps(extra)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    m = re.search(r'"msg": (\{[^{}]*"tarball"[^{}]*\})', r.stdout)
    # ansible-core 2.17 escapes quotes in a JSON result's msg, 2.19 does not: compare the text unescaped
    out = (r.stdout + r.stderr).replace('\\"', '"')
    return r.returncode, out, json.loads(m.group(1)) if m else None


def make_tarball(path: Path, version: str, content: bytes = b"int main;\n") -> str:
    src = path.parent / f"tree-{version}"
    (src / f"gdrcopy-{version}").mkdir(parents=True, exist_ok=True)
    (src / f"gdrcopy-{version}" / "Makefile").write_bytes(content)
    with tarfile.open(path, "w:gz") as t:
        t.add(src / f"gdrcopy-{version}", arcname=f"gdrcopy-{version}")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_pinned_tarball_is_cached_and_a_rerun_changes_nothing(tmp_path):
    tarball = tmp_path / "mirror" / "gdrcopy-2.6.tar.gz"
    tarball.parent.mkdir()
    sha = make_tarball(tarball, "2.6")
    rc, out, src = run(tmp_path, gdrcopy_source_url=tarball.as_uri(), gdrcopy_source_sha256=sha)
    assert rc == 0, out
    assert src["sha256"] == sha and src["id"] == f"2.6-{sha[:12]}"
    assert hashlib.sha256(Path(src["tarball"]).read_bytes()).hexdigest() == sha
    rc, out, _ = run(tmp_path, gdrcopy_source_url=tarball.as_uri(), gdrcopy_source_sha256=sha)
    assert rc == 0 and re.search(r"localhost\s+: ok=\d+\s+changed=0 ", out), out


@pytest.mark.parametrize("xdg", [True, False])
def test_the_default_cache_is_the_controller_users(tmp_path, xdg):
    """No gdrcopy_cache_dir: $XDG_CACHE_HOME/gdrcopy-ansible, else ~/.cache/gdrcopy-ansible; never the collection."""
    tarball = tmp_path / "mirror" / "gdrcopy-2.6.tar.gz"
    tarball.parent.mkdir()
    sha = make_tarball(tarball, "2.6")
    home, cache = tmp_path / "home", tmp_path / "xdg-cache"
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(cache) if xdg else ""}
    rc, out, src = run(tmp_path, env_extra=env, gdrcopy_cache_dir="", gdrcopy_source_url=tarball.as_uri(),
                       gdrcopy_source_sha256=sha)
    assert rc == 0, out
    expected = (cache if xdg else home / ".cache") / "gdrcopy-ansible" / f"gdrcopy-2.6-{sha}.tar.gz"
    assert src["tarball"] == str(expected) and expected.is_file()
    assert not list(REPO.glob("src/cache/gdrcopy-*")) and not list(REPO.glob("roles/gdrcopy/**/gdrcopy-2.6.tar.gz"))


@pytest.mark.fault(2)
def test_a_checksum_mismatch_stops_with_what_to_do(tmp_path):
    tarball = tmp_path / "mirror" / "gdrcopy-2.6.tar.gz"
    tarball.parent.mkdir()
    make_tarball(tarball, "2.6")
    rc, out, _ = run(tmp_path, gdrcopy_source_url=tarball.as_uri(), gdrcopy_source_sha256="0" * 64)
    assert rc != 0
    assert "could not get gdrcopy 2.6 with sha256 " + "0" * 64 in out
    assert "Nothing was changed on this host" in out
    assert not list((tmp_path / "cache").glob("gdrcopy-2.6*")), "a file that failed its checksum must not stay"


@pytest.mark.fault(2)
def test_a_corrupt_cached_tarball_is_fetched_again(tmp_path):
    tarball = tmp_path / "mirror" / "gdrcopy-2.6.tar.gz"
    tarball.parent.mkdir()
    sha = make_tarball(tarball, "2.6")
    cached = tmp_path / "cache" / f"gdrcopy-2.6-{sha}.tar.gz"
    cached.parent.mkdir()
    cached.write_bytes(tarball.read_bytes()[:20])  # truncated
    rc, out, _ = run(tmp_path, gdrcopy_source_url=tarball.as_uri(), gdrcopy_source_sha256=sha)
    assert rc == 0, out
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == sha


@pytest.mark.fault(2)
def test_a_corrupt_cached_tarball_is_removed_when_the_refetch_fails(tmp_path):
    """Before: a corrupt cache entry stayed when fetching it again failed."""
    sha = "1" * 64
    cached = tmp_path / "cache" / f"gdrcopy-2.6-{sha}.tar.gz"
    cached.parent.mkdir()
    cached.write_bytes(b"corrupt")
    rc, out, _ = run(tmp_path, gdrcopy_source_url=(tmp_path / "gone.tar.gz").as_uri(), gdrcopy_source_sha256=sha)
    assert rc != 0 and "could not get gdrcopy 2.6 with sha256 " + sha in out, out
    assert not cached.exists()


@pytest.mark.fault(1)
def test_an_unknown_release_is_refused_before_any_download(tmp_path):
    rc, out, _ = run(tmp_path, gdrcopy_version="2.9")
    assert rc != 0
    assert 'gdrcopy_version "2.9" is not in the release table' in out
    assert not (tmp_path / "cache").exists()


@pytest.fixture
def git_repo(tmp_path):
    repo = tmp_path / "upstream"
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.invalid", GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True,
                              text=True).stdout.strip()
    repo.mkdir()
    git("init", "-q", "-b", "main")
    (repo / "Makefile").write_text("lib:\n")
    git("add", "Makefile")
    git("commit", "-q", "-m", "one")
    return repo, git


def git_commit_source(repo, commit):
    """The variables of a git source pinned by a full commit (a version outside the release table)."""
    return dict(gdrcopy_version="9.9", gdrcopy_source_type="git", gdrcopy_source_git_url=repo.as_uri(),
                gdrcopy_source_git_ref=commit)


def test_a_git_commit_ref_is_packed_like_a_release_tarball(tmp_path, git_repo):
    repo, git = git_repo
    commit = git("rev-parse", "HEAD")
    extra = git_commit_source(repo, commit)
    rc, out, src = run(tmp_path, **extra)
    assert rc == 0, out
    expected = subprocess.run(f"git -C {repo} archive --format=tar --prefix=gdrcopy-9.9/ {commit} | gzip -cn | sha256sum",
                              shell=True, capture_output=True, text=True).stdout.split()[0]
    assert src["sha256"] == expected
    rc, out, _ = run(tmp_path, **extra)
    assert rc == 0 and re.search(r"localhost\s+: ok=\d+\s+changed=0 ", out), out


def test_a_git_branch_is_refused_unless_allowed(tmp_path, git_repo):
    repo, _ = git_repo
    rc, out, _ = run(tmp_path, gdrcopy_version="9.9", gdrcopy_source_type="git", gdrcopy_source_git_url=repo.as_uri(),
                     gdrcopy_source_git_ref="main")
    assert rc != 0 and 'gdrcopy_source_git_ref "main" is not pinned' in out
    rc, out, _ = run(tmp_path, gdrcopy_version="9.9", gdrcopy_source_type="git", gdrcopy_source_git_url=repo.as_uri(),
                     gdrcopy_source_git_ref="main", gdrcopy_allow_unpinned=True)
    assert rc == 0, out


def test_a_release_added_with_gdrcopy_releases_is_pinned_like_a_shipped_one(tmp_path):
    tarball = tmp_path / "mirror" / "gdrcopy-2.7.tar.gz"
    tarball.parent.mkdir()
    sha = make_tarball(tarball, "2.7")
    row = {"tag": "v2.7", "commit": "a" * 40, "sha256": sha, "url": tarball.as_uri(), "top_dir": "gdrcopy-2.7",
           "tests": ["gdrcopy_sanity"], "gdrdrv_params": {"dbg_enabled": 0, "info_enabled": 0}}
    rc, out, src = run(tmp_path, gdrcopy_version="2.7", gdrcopy_releases={"2.7": row})
    assert rc == 0, out
    assert src["sha256"] == sha and src["id"] == f"2.7-{sha[:12]}"
    # a wrong field of a row: refused by name before anything is fetched
    rc, out, _ = run(tmp_path / "bad", gdrcopy_version="2.7", gdrcopy_releases={"2.7": dict(row, sha256="xyz")})
    assert rc != 0 and 'gdrcopy_releases["2.7"].sha256 must be 64 lowercase hex digits' in out, out
    assert not (tmp_path / "bad" / "cache").exists()
    # changing a shipped row's checksum is the user's pin too: a tarball that does not match is refused
    rc, out, _ = run(tmp_path / "pin", gdrcopy_version="2.6", gdrcopy_releases={"2.6": {"sha256": "0" * 64,
                                                                                       "url": tarball.as_uri()}})
    assert rc != 0 and "could not get gdrcopy 2.6 with sha256 " + "0" * 64 in out, out



def run_hosts(tmp_path, hosts):
    """The source step for several hosts of one play: hosts is name -> its variables. Returns rc, output and
    name -> what the role would build there."""
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": dict((h, dict(v, ansible_connection="local",
                                                                       ansible_python_interpreter=sys.executable))
                                                           for h, v in hosts.items())}}))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    playbook = tmp_path / "source.yml"
    playbook.write_text(PLAYBOOK.read_text().replace("hosts: localhost", "hosts: all"))
    r = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook),
                        "-e", json.dumps({"gdrcopy_cache_dir": str(tmp_path / "cache")})],
                       env=env, capture_output=True, text=True, timeout=300)
    built = dict((m.group(1), json.loads(m.group(2))) for m in
                 re.finditer(r'ok: \[(\w+)\] => \{\s*"msg": (\{[^{}]*"tarball"[^{}]*\})', r.stdout))
    return r.returncode, (r.stdout + r.stderr).replace('\\"', '"'), built


@pytest.mark.fault(18)
def test_each_host_of_a_play_gets_the_tarball_it_pinned(tmp_path):
    """Before: the download ran once per play and the cache file was named after the version alone: the second
    host got the first host's tarball under its own sha256 and stamp, and nothing failed."""
    a, b = tmp_path / "mirror-a" / "gdrcopy-2.6.tar.gz", tmp_path / "mirror-b" / "gdrcopy-2.6.tar.gz"
    a.parent.mkdir()
    b.parent.mkdir()
    sha_a, sha_b = make_tarball(a, "2.6", b"a\n"), make_tarball(b, "2.6", b"b\n")
    c = tmp_path / "mirror-c" / "gdrcopy-2.5.tar.gz"
    c.parent.mkdir()
    sha_c = make_tarball(c, "2.5", b"c\n")
    rc, out, built = run_hosts(tmp_path, {
        "h1": {"gdrcopy_source_url": a.as_uri(), "gdrcopy_source_sha256": sha_a},
        "h2": {"gdrcopy_source_url": b.as_uri(), "gdrcopy_source_sha256": sha_b},
        "h3": {"gdrcopy_version": "2.5", "gdrcopy_source_url": c.as_uri(), "gdrcopy_source_sha256": sha_c},
        "h4": {"gdrcopy_source_url": a.as_uri(), "gdrcopy_source_sha256": sha_a}})
    assert rc == 0, out
    for host, sha in (("h1", sha_a), ("h2", sha_b), ("h3", sha_c), ("h4", sha_a)):
        assert built[host]["sha256"] == sha, (host, built)
        assert hashlib.sha256(Path(built[host]["tarball"]).read_bytes()).hexdigest() == sha, host
    assert built["h1"]["tarball"] == built["h4"]["tarball"]  # one fetch per distinct source
    assert len(re.findall(r"Download each pinned tarball.*?(?=TASK)", out, re.S)[0].split("=> (item=")) == 4


@pytest.mark.fault(18)
def test_a_source_that_cannot_be_verified_stops_only_the_hosts_that_pin_it(tmp_path):
    a = tmp_path / "mirror" / "gdrcopy-2.6.tar.gz"
    a.parent.mkdir()
    sha = make_tarball(a, "2.6")
    rc, out, built = run_hosts(tmp_path, {
        "good": {"gdrcopy_source_url": a.as_uri(), "gdrcopy_source_sha256": sha},
        "bad": {"gdrcopy_source_url": a.as_uri(), "gdrcopy_source_sha256": "2" * 64}})
    assert rc != 0 and list(built) == ["good"] and built["good"]["sha256"] == sha, out
    assert re.search(r"bad\s+: ok=\d+\s+changed=0\s+unreachable=0\s+failed=1", out), out
    assert "could not get gdrcopy 2.6 with sha256 " + "2" * 64 in out


def test_a_tampered_tarball_made_from_git_is_made_again(tmp_path, git_repo):
    """Before: a cached git tarball was made once (creates=) and then trusted: a changed file built with changed=0."""
    repo, git = git_repo
    commit = git("rev-parse", "HEAD")
    extra = git_commit_source(repo, commit)
    rc, out, src = run(tmp_path, **extra)
    assert rc == 0, out
    Path(src["tarball"]).write_bytes(b"tampered")
    rc, out, again = run(tmp_path, **extra)
    assert rc == 0 and again["sha256"] == src["sha256"], out
    assert hashlib.sha256(Path(src["tarball"]).read_bytes()).hexdigest() == src["sha256"]
    assert not re.search(r"localhost\s+: ok=\d+\s+changed=0 ", out), "the repacked tarball is a change"
