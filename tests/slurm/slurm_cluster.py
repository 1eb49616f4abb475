"""A one-node SLURM cluster on localhost, in a folder of its own, for the SLURM tests.

Daemons: ``munged`` (authentication), ``mariadbd`` and ``slurmdbd`` (accounting: the executor
plugin asks ``sacct`` for every job's state, and without accounting it waits forever), then
``slurmctld`` and ``slurmd``. Each runs in the foreground as a child of this process, so stopping
it reaps it (this sandbox's PID 1 reaps nothing). Every path, socket and port is private to the
folder, so nothing in ``/etc`` is read or written: clients find the cluster through ``SLURM_CONF``
(:meth:`Cluster.env`). docs/slurm.md lists the settings that mattered and why.

Start-up first kills daemons left by an earlier run that was killed before it could stop them
(found by their folder, whose owner process is gone), so a crashed run never blocks the next.

Also a script: ``python tests/slurm/slurm_cluster.py`` starts a cluster, prints how to use it and
stops it on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PREFIX = "genlab-slurm-"  # every cluster folder is tempdir/genlab-slurm-XXXX
ACCOUNT, PARTITION, CLUSTER = "genlab", "debug", "genlab"
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmscriptd", "slurmd", "slurmstepd")
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def which(name: str) -> str | None:
    """A binary on PATH or in the sbin folders, which are often not on a user's PATH."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *SBIN]))


def missing_binaries() -> list[str]:
    return [b for b in ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd",
                        "mariadb-install-db", "sbatch", "sacct", "sacctmgr") if not which(b)]


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _alive(pid: int) -> bool:
    """True for a running process; a zombie (state Z, never reaped here) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill_leftovers(tmp: Path | None = None) -> list[int]:
    """Kill daemons of clusters whose owner process is gone, and remove their folders."""
    tmp = tmp or Path(tempfile.gettempdir())
    stale = []
    for folder in tmp.glob(f"{PREFIX}*"):
        try:
            owner = int((folder / "owner.pid").read_text())
        except (OSError, ValueError):
            owner = -1
        if owner != os.getpid() and not _alive(owner):
            stale.append(str(folder))
    killed = []
    if stale:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or not _alive(int(proc.name)):
                continue
            try:
                if proc.joinpath("comm").read_text().strip() not in DAEMONS:
                    continue
                # daemons name their folder on the command line (munged, mariadbd) or get it
                # through SLURM_CONF (slurmdbd, slurmctld, slurmd)
                seen = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
            except OSError:
                continue
            if any(s.encode() in seen for s in stale):
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
        for folder in stale:
            shutil.rmtree(folder, ignore_errors=True)
    return killed


class Cluster:
    """A running one-node cluster; :meth:`stop` kills and reaps every daemon and removes the
    folder. Use as a context manager."""

    def __init__(self, root: Path | None = None, gpus: int = 0) -> None:
        kill_leftovers()
        self.root = Path(root or tempfile.mkdtemp(prefix=PREFIX))
        self.root.chmod(0o755)  # munged wants its socket's folder searchable by all
        (self.root / "owner.pid").write_text(str(os.getpid()))
        self.gpus = gpus
        self.host = socket.gethostname().split(".")[0]
        self.cpus = os.cpu_count() or 1
        # what slurmd finds, less a margin: a node configured with more than it has is drained
        self.memory_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                             / 2**20 * 0.8)
        self.db_port, self.dbd_port, self.ctld_port, self.slurmd_port = _free_ports(4)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------------ configuration
    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the cluster's ``SLURM_CONF``."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def _write_configs(self) -> None:
        r = self.root
        for sub in ("state", "spool", "log", "db"):
            (r / sub).mkdir(exist_ok=True)
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        gres = ""
        if self.gpus:
            # fake GPUs: device files are required, or the node is INVALID
            files = []
            for i in range(self.gpus):
                dev = r / f"fakegpu{i}"
                if not dev.exists():
                    os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # like /dev/null
                files.append(str(dev))
            (r / "gres.conf").write_text("".join(
                f"NodeName={self.host} Name=gpu File={f}\n" for f in files))
            gres = f" Gres=gpu:{self.gpus}"
        self.conf.write_text(f"""\
ClusterName={CLUSTER}
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={r}/munge.sock
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
# no cgroups in containers
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# without it a job that asks no memory takes the whole node, and jobs run one at a time
DefMemPerCPU=1024
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={self.dbd_port}
# the munge socket for slurmdbd connections: AuthInfo covers only the cluster's own
AccountingStoragePass={r}/munge.sock
# sacct then shows the comment, where the executor plugin writes the rule's name
AccountingStoreFlags=job_comment
MailProg=/bin/true
{"GresTypes=gpu" if self.gpus else ""}
{"AccountingStorageTRES=gres/gpu" if self.gpus else ""}
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.memory_mb}{gres} \
State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        dbd = r / "slurmdbd.conf"  # read from SLURM_CONF's folder; must be 0600
        dbd.write_text(f"""\
AuthType=auth/munge
AuthInfo=socket={r}/munge.sock
DbdAddr=127.0.0.1
DbdHost={self.host}
DbdPort={self.dbd_port}
SlurmUser=root
PidFile={r}/slurmdbd.pid
LogFile={r}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.db_port}
StorageUser=root
StorageLoc=slurm_acct_db
""")
        dbd.chmod(0o600)

    # ------------------------------------------------------------------ processes
    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.root / "log" / f"{name}.out").open("wb")
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env(),
                                            start_new_session=True)
        log.close()

    def _wait(self, what: str, ready, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited {proc.returncode} while waiting for "
                                       f"{what}\n{self.logs()}")
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out after {timeout} s waiting for {what}\n{self.logs()}")

    def sh(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(args), env=self.env(), capture_output=True, text=True,
                              timeout=60)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return proc

    def _ok(self, *args: str) -> bool:
        try:
            return self.sh(*args, check=False).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def start(self) -> Cluster:
        r = self.root
        try:
            self._write_configs()
            self._spawn("munged", [which("munged"), "--foreground", "--force",
                                   f"--key-file={r}/munge.key", f"--socket={r}/munge.sock",
                                   f"--pid-file={r}/munged.pid", f"--seed-file={r}/munged.seed",
                                   f"--log-file={r}/log/munged.log"])
            self._wait("munged", lambda: (r / "munge.sock").exists())
            # root with no password, as slurmdbd's StorageUser: nothing outside 127.0.0.1
            subprocess.run([which("mariadb-install-db"), "--no-defaults", f"--datadir={r}/db",
                            "--user=root", "--skip-test-db",
                            "--auth-root-authentication-method=normal"],
                           check=True, capture_output=True, timeout=120)
            self._spawn("mariadbd", [which("mariadbd"), "--no-defaults", f"--datadir={r}/db",
                                     "--user=root", f"--socket={r}/mysqld.sock",
                                     f"--pid-file={r}/mysqld.pid", "--bind-address=127.0.0.1",
                                     f"--port={self.db_port}", "--skip-name-resolve",
                                     "--innodb-buffer-pool-size=32M",
                                     f"--log-error={r}/log/mariadb.log"])
            self._wait("MariaDB", lambda: _port_open(self.db_port))
            self._spawn("slurmdbd", [which("slurmdbd"), "-D"])
            self._wait("slurmdbd", lambda: _port_open(self.dbd_port))
            self._spawn("slurmctld", [which("slurmctld"), "-D", "-i"])
            self._wait("slurmctld", lambda: self._ok("scontrol", "ping"))
            self._spawn("slurmd", [which("slurmd"), "-D", "-N", self.host])
            self._wait("the node to be idle", lambda: self.sh(
                "sinfo", "-h", "-o", "%T", check=False).stdout.strip() == "idle")
            self._wait("the cluster in the accounting database", lambda: CLUSTER in self.sh(
                "sacctmgr", "-n", "-P", "list", "cluster", "format=cluster",
                check=False).stdout.split())
            self.sh("sacctmgr", "-i", "add", "account", ACCOUNT, f"Cluster={CLUSTER}")
            self.sh("sacctmgr", "-i", "add", "user", "root", f"Account={ACCOUNT}",
                    f"DefaultAccount={ACCOUNT}")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Terminate every daemon (in reverse start order), reap it, remove the folder."""
        if not self.root.exists():
            return
        for name in reversed(list(self.procs)):
            proc = self.procs.pop(name)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        # job steps are children of slurmd's slurmstepd, which may outlive it
        kill_leftovers_of(self.root)
        shutil.rmtree(self.root, ignore_errors=True)

    def logs(self) -> str:
        out = []
        for f in sorted((self.root / "log").glob("*")):
            out.append(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}")
        return "\n".join(out)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def kill_leftovers_of(root: Path) -> None:
    (root / "owner.pid").write_text("-1")  # no owner any more: kill_leftovers takes it
    kill_leftovers(root.parent)


def _port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    with Cluster() as cluster:
        print(f"export SLURM_CONF={cluster.conf}  # then sbatch, sacct, snakemake --profile ...")
        print(f"account {ACCOUNT}, partition {PARTITION}; Ctrl-C stops and removes the cluster")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
