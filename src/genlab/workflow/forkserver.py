"""A fork server for the pipeline's jobs: import torch and genlab once, fork once per job.

Every stage used to pay 2-3 s of start-up (the interpreter, torch ~1 s, torch._dynamo ~1 s at a
training stage's first optimizer step, genlab's CLI and settings models, the study's code) for a
median of a few seconds of work: a fifth of the default pipeline's job time. When Snakemake runs
the pipeline on this machine, the Snakefile starts this server (:func:`start`); it imports
everything the stages import (:func:`preload`), listens on a Unix socket, and for each job's
``python -m genlab ...`` (whose :mod:`genlab.forkclient` connects here) forks a child that

- takes the client's standard streams (so it writes to the job's log), working directory,
  environment and arguments, and SIGINT disposition, in a process group of its own;
- reseeds what a fresh interpreter seeds at random (Python's and NumPy's global generators,
  torch's default generator): genlab seeds every generator it uses explicitly, and this keeps
  anything that does not from sharing the server's state between jobs;
- runs :func:`genlab.cli.main` as ``python -m genlab`` would, joins its threads, runs the exit
  handlers and exits with the command's code, which the client returns to Snakemake.

A job's outputs are byte-identical to those of a fresh process (tests/workflow/test_forkserver.py
runs the same stages both ways). The server declines a job (the client then runs it itself)
when the client runs another interpreter or environment, or when a genlab source file it
imported has changed since (an edit during a run); it kills a job's process group when the
client disappears (Snakemake killed the job), and exits when Snakemake does. Jobs run elsewhere
(a SLURM executor, ``dvc repro``) never see it: the socket's path travels in
``GENLAB_FORKSERVER``, which only the local Snakemake sets.

Forking after importing torch is what torch's own DataLoader workers do; the server itself never
runs a torch operation, so no OpenMP pool exists to be inherited (the BLAS libraries' pools are
fork-safe).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import json
import logging
import os
import pkgutil
import random
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from genlab.forkclient import ENV, HEADER

log = logging.getLogger("genlab.forkserver")

LIBRARIES = ("torch", "torch._dynamo", "numpy", "pyarrow.parquet", "scipy.stats",
             "matplotlib.figure", "safetensors.torch", "psutil", "tqdm", "curvlinops",
             "kronfluence", "sklearn.datasets")
"""Third-party modules the stages import inside functions (torch._dynamo: at the first optimizer
step), imported up front with every genlab module."""

NOT_PRELOADED = ("genlab.__main__",)
"""Modules whose import runs something (``python -m genlab``'s entry point)."""

TARGET = "genlab.cli:main"
"""What a child runs: ``module:function``, called with the client's ``sys.argv[1:]``."""

THREAD_POOLS = {"openmp": "OMP_NUM_THREADS", "blas": "OPENBLAS_NUM_THREADS"}
"""threadpoolctl's API -> the variable a library reads once, when it loads. Snakemake sets these
(and MKL's, GOTO's, ...) to each job's ``threads``; the server loads the libraries under a
one-thread job's values (:func:`start`), and a child whose job says otherwise resizes the pools."""

JOB_THREAD_VARS = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                   "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
"""What Snakemake's shell sets for a job (snakemake/shell.py), set to 1 for the server."""

REQUEST_TIMEOUT_S = 5.0
"""How long a connected client may take to send its request (it sends it at once)."""


def preload(extra: Sequence[str] = ()) -> list[str]:
    """Import the libraries, every genlab module and ``extra``; the names that failed."""
    import genlab

    failed = []
    names = [*LIBRARIES, *(m.name for m in pkgutil.walk_packages(genlab.__path__, "genlab."))]
    for name in [*names, *extra]:
        if name in NOT_PRELOADED:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # an optional library missing: its stages import it themselves
            failed.append(name)
    return failed


def source_stats() -> dict[str, tuple[int, int]]:
    """(mtime, size) of every genlab source file imported so far."""
    import genlab

    root = str(Path(genlab.__file__).parent) + os.sep
    stats = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and path.startswith(root):
            st = os.stat(path)
            stats[path] = (st.st_mtime_ns, st.st_size)
    return stats


def edited_source(stats: dict[str, tuple[int, int]]) -> str | None:
    """The first of the imported genlab sources changed since ``stats``, if any."""
    for path, stat in stats.items():
        try:
            st = os.stat(path)
        except OSError:
            return path
        if (st.st_mtime_ns, st.st_size) != stat:
            return path
    return None


@dataclass
class Request:
    argv: list[str]
    cwd: str
    env: dict[str, str]
    executable: str
    prefix: str
    client_pid: int
    sigint_ignored: bool
    fds: list[int]


def receive(conn: socket.socket) -> Request:
    """Read one client's request and the three file descriptors that come with it."""
    conn.settimeout(REQUEST_TIMEOUT_S)
    head, ancillary, _, _ = conn.recvmsg(HEADER.size, socket.CMSG_SPACE(3 * 4))
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4]))
    try:
        if len(head) != HEADER.size or len(fds) != 3:
            raise OSError("malformed request")
        (length,) = HEADER.unpack(head)
        body = bytearray()
        while len(body) < length:
            chunk = conn.recv(length - len(body))
            if not chunk:
                raise OSError("client hung up mid-request")
            body += chunk
        return Request(**json.loads(body), fds=fds)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _exit_status(code: object) -> int:
    """``sys.exit(code)``'s process status, as the interpreter computes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def run_child(request: Request, target: Callable[[list[str]], int | None], server: int) -> int:
    """In the forked child: become the client's process, run the command, return its status."""
    _die_with(server)
    os.setpgid(0, 0)  # the client forwards signals to this group
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT,
                  signal.SIG_IGN if request.sigint_ignored else signal.default_int_handler)
    for target_fd, fd in enumerate(request.fds):
        os.dup2(fd, target_fd)
        os.close(fd)
    unbuffered = bool(request.env.get("PYTHONUNBUFFERED"))
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=unbuffered or stream is sys.stderr or stream.isatty(),
                           write_through=unbuffered)
    os.chdir(request.cwd)
    loaded_with = {var: os.environ.get(var) for var in THREAD_POOLS.values()}
    os.environ.clear()
    os.environ.update(request.env)
    _size_thread_pools(loaded_with)
    sys.argv = list(request.argv)
    sys.path[0] = request.cwd  # as `python -m` sets it
    _reseed()
    from genlab import timing

    timing.started_by(request.client_pid)
    try:
        code = _exit_status(target(sys.argv[1:]))
    except KeyboardInterrupt:
        print("genlab: interrupted", file=sys.stderr)
        code = 130
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    _finalise()
    return code


def _size_thread_pools(loaded_with: dict[str, str | None]) -> None:
    """Give OpenMP and BLAS the thread counts the job's environment asks for where they differ
    from those the server loaded them with (a job of more than one thread; a command run without
    the variables, whose libraries would take one thread per core)."""
    for api, var in THREAD_POOLS.items():
        wanted = os.environ.get(var)
        if wanted == loaded_with[var]:
            continue
        from threadpoolctl import threadpool_limits

        # unset: the library's default, one thread per core it may run on
        count = int(wanted) if wanted and wanted.isdigit() else len(os.sched_getaffinity(0))
        threadpool_limits(limits=count, user_api=api)


def _die_with(server: int) -> None:
    """Be killed when the server dies (Linux): its clients then fail their jobs, and a child
    left running would write outputs nobody waits for."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the server's own exit still kills its jobs
        return
    if os.getppid() != server:  # it died before the call
        os._exit(1)


def _reseed() -> None:
    """What a fresh interpreter seeds from the OS, seeded from the OS again."""
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()


def _finalise() -> None:
    """What the interpreter does at exit before the process ends: join the threads the command
    left running, run the exit handlers (logging's flush among them), flush the streams."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _resolve(target: str) -> Callable[[list[str]], int | None]:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


class Server:
    """The accept-fork-reap loop. One thread: a fork never copies another thread's lock state."""

    def __init__(self, path: str, parent: int, target: str) -> None:
        self.path, self.parent = path, parent
        self.target = _resolve(target)
        self.pid = os.getpid()
        self.identity = (os.path.realpath(sys.executable), sys.prefix)
        self.sources = source_stats()
        self.children: dict[int, socket.socket | None] = {}  # None: its client is gone
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stopping = False

    def serve(self) -> None:
        for sock in (self.wake_r, self.wake_w):
            sock.setblocking(False)
        signal.set_wakeup_fd(self.wake_w.fileno())
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the wakeup fd
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the clients forward Ctrl-C to their jobs
        self.listener.bind(self.path)
        self.listener.listen(64)
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        log.info("listening on %s", self.path)
        try:
            while not self.stopping and os.getppid() == self.parent:
                for key, _ in self.selector.select(timeout=1.0):
                    if key.fileobj is self.listener:
                        self._accept()
                    elif key.fileobj is self.wake_r:
                        self._drain_wakeups()
                    else:
                        self._client_event(key.fileobj, key.data)
                self._reap()
        finally:
            self._shutdown()

    def _stop(self, *_: object) -> None:
        self.stopping = True

    def _drain_wakeups(self) -> None:
        try:
            while self.wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            request = receive(conn)
        except (OSError, ValueError, TypeError) as exc:
            log.warning("dropped a malformed request: %s", exc)
            conn.close()
            return
        why = self._decline(request)
        if why is not None:
            log.info("declined %s: %s", " ".join(request.argv[1:3]), why)
            for fd in request.fds:
                os.close(fd)
            self._send(conn, b"F " + why.encode() + b"\n")
            conn.close()
            return
        self._remember_jobs(request.cwd)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # nothing of the server's buffers may reach a job's log
        pid = os.fork()
        if pid == 0:  # the child: never returns into the loop
            code = 1
            try:
                self._forget_in_child(conn)
                code = run_child(request, self.target, self.pid)
            finally:
                os._exit(code)
        for fd in request.fds:
            os.close(fd)
        self.children[pid] = conn
        log.info("pid %d: genlab %s", pid, " ".join(request.argv[1:]))
        self._send(conn, b"P %d\n" % pid)
        conn.setblocking(False)
        self.selector.register(conn, selectors.EVENT_READ, pid)

    @staticmethod
    def _remember_jobs(cwd: str) -> None:
        """The workspace's stages parsed here, once per version of its dvc.yaml and params.yaml,
        so that no child parses them again (genlab.workflow.adapter.remember_jobs)."""
        from genlab.workflow.adapter import remember_jobs

        began = time.perf_counter()
        try:
            remember_jobs(cwd)
        except Exception as exc:  # not a workspace, or a broken dvc.yaml: the child will say so
            log.info("did not parse the stages of %s: %s", cwd, exc)
            return
        if time.perf_counter() - began > 0.01:
            log.info("parsed the stages of %s in %.2f s", cwd, time.perf_counter() - began)

    def _decline(self, request: Request) -> str | None:
        if (os.path.realpath(request.executable), request.prefix) != self.identity:
            return (f"another interpreter ({request.executable}, {request.prefix}) than the "
                    f"server's {self.identity}")
        edited = edited_source(self.sources)
        if edited is not None:
            return f"{edited} changed since the server imported it"
        return None

    def _forget_in_child(self, conn: socket.socket) -> None:
        """Drop the server's sockets and handlers in a fresh child (closing descriptors only:
        unregistering would edit the epoll set the server shares)."""
        signal.set_wakeup_fd(-1)
        self.selector.close()
        for sock in (self.listener, self.wake_r, self.wake_w, conn, *self.children.values()):
            if sock is not None:
                sock.close()
        for handler in log.handlers[:]:  # the server's log is not the job's
            log.removeHandler(handler)

    def _client_event(self, conn: socket.socket, pid: int) -> None:
        """The client of a running child spoke or hung up: if it is gone (its job was killed),
        so is the child."""
        try:
            if conn.recv(64):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self.selector.unregister(conn)
        conn.close()
        self.children[pid] = None
        log.warning("pid %d: its client went away; killing its process group", pid)
        _killpg(pid, signal.SIGKILL)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = os.waitstatus_to_exitcode(status)
            log.info("pid %d: exit %d", pid, code)
            conn = self.children.pop(pid, None)
            if conn is not None:
                self.selector.unregister(conn)
                conn.setblocking(True)
                self._send(conn, b"X %d\n" % code)
                conn.close()

    @staticmethod
    def _send(conn: socket.socket, data: bytes) -> None:
        # a client that is gone: its child, if any, is killed when that is noticed
        with contextlib.suppress(OSError):
            conn.sendall(data)

    def _shutdown(self) -> None:
        for pid in list(self.children):
            _killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while self.children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for pid in list(self.children):
            _killpg(pid, signal.SIGKILL)
        self.listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        log.info("stopped")


def _killpg(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


# --------------------------------------------------------------------------------------------
# The Snakefile's side.


@dataclass
class Handle:
    process: subprocess.Popen
    folder: Path

    @property
    def socket_path(self) -> str:
        return str(self.folder / "socket")

    def stop(self) -> None:
        """Stop the server (it lets no job outlive it) and remove its socket."""
        os.environ.pop(ENV, None)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for path in (self.folder / "socket", self.folder):
            with contextlib.suppress(OSError):
                path.rmdir() if path.is_dir() else path.unlink()


_STARTED: list[Handle] = []


def start(log_path: Path, target: str = TARGET, preload_extra: Sequence[str] = ()) -> Handle | None:
    """Start a server for this process's jobs and point them to it (``GENLAB_FORKSERVER`` in
    this process's environment, which the jobs inherit); None when turned off by the variable,
    and off Linux.

    The server becomes ready once it has imported everything (a few seconds); jobs started
    before then run in their own processes, as without a server."""
    if os.environ.get(ENV) == "0" or not sys.platform.startswith("linux"):
        # macOS: forking after its system frameworks are loaded (torch loads Accelerate) is
        # unsafe; jobs there start their own interpreter
        return None
    # a short path: Unix socket paths are limited to ~107 bytes
    folder = Path(tempfile.mkdtemp(prefix="genlab-fs-"))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as out:  # the last run's
        command = [sys.executable, "-m", "genlab.workflow.forkserver", str(folder / "socket"),
                   "--parent", str(os.getpid()), "--target", target]
        for name in preload_extra:
            command += ["--preload", name]
        # the libraries' thread pools sized as a one-thread job's (each job's own count follows)
        env = {**os.environ, **dict.fromkeys(JOB_THREAD_VARS, "1")}
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, env=env,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    handle = Handle(process, folder)
    os.environ[ENV] = handle.socket_path
    _STARTED.append(handle)
    return handle


def stop_all() -> None:
    """Stop every server this process started (the Snakefile's onsuccess and onerror)."""
    while _STARTED:
        _STARTED.pop().stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m genlab.workflow.forkserver",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("socket", help="the Unix socket to listen on")
    parser.add_argument("--parent", type=int, required=True,
                        help="exit when this process (Snakemake) is gone")
    parser.add_argument("--target", default=TARGET, help="module:function each job runs")
    parser.add_argument("--preload", action="append", default=[],
                        help="another module to import up front")
    args = parser.parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)  # not the root logger's: the jobs configure theirs
    handler.setFormatter(logging.Formatter("%(asctime)s genlab fork server: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    began = time.perf_counter()
    failed = preload(args.preload)
    log.info("imported %d modules in %.1f s%s", len(sys.modules), time.perf_counter() - began,
             f" (not importable: {', '.join(failed)})" if failed else "")
    Server(args.socket, args.parent, args.target).serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
