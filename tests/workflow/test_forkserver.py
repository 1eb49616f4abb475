"""The fork server (genlab.workflow.forkserver) and its client (genlab.forkclient).

A server runs ``forkserver_target:main`` (beside this file) in its children, reached through the
real entry point ``python -m genlab``; the last test runs real pipeline stages both ways and
compares their outputs byte for byte.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from genlab import forkclient
from genlab.forkclient import ENV, HEADER
from genlab.workflow import adapter, forkserver
from genlab.workflow.adapter import dvc_jobs
from tests_support import ROOT, copy_project, tool_env

HERE = Path(__file__).parent


def wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose (the server reaps its children; the test does not)
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


@contextlib.contextmanager
def serving(log: Path, target: str = "forkserver_target:main"):
    """A server whose children run ``target``; the environment restored after."""
    saved = {key: os.environ.get(key) for key in (ENV, "PYTHONPATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), saved["PYTHONPATH"]]))
    handle = forkserver.start(log, target=target)
    try:
        assert handle is not None
        wait_for(lambda: Path(handle.socket_path).exists(), what="the server's socket")
        handle.log = log
        yield handle
    finally:
        if handle is not None:
            handle.stop()
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with serving(tmp_path_factory.mktemp("forkserver") / "server.log") as handle:
        yield handle


def client(server, *args: str, cwd: Path, **env: str) -> subprocess.Popen:
    """``python -m genlab ARGS`` as a Snakemake job starts it, its streams in files under cwd,
    with SIGINT at its default as under an interactive shell: a suite run in the background of
    a shell without job control inherits SIGINT ignored, which the job would rightly keep
    (test_an_ignored_sigint_stays_ignored)."""
    environment = dict(os.environ, **{ENV: server.socket_path}, **env)
    return subprocess.Popen([sys.executable, "-m", "genlab", *args], cwd=cwd, env=environment,
                            stdout=(cwd / "out.txt").open("w"), stderr=(cwd / "err.txt").open("w"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def sleeping_job(server, pid_file: Path, cwd: Path) -> tuple[subprocess.Popen, int]:
    """A job whose child sleeps until killed: the client, and the child's pid once it runs."""
    job = client(server, "sleep", str(pid_file), cwd=cwd)
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), what="the child")
    return job, int(pid_file.read_text())


def test_a_job_runs_in_a_child_of_the_server_as_it_would_alone(server, tmp_path: Path) -> None:
    job = client(server, "report", "x", cwd=tmp_path, FORKSERVER_TEST="from the client")
    assert job.wait(timeout=60) == 0
    seen = json.loads((tmp_path / "out.txt").read_text())
    assert seen["ppid"] == server.process.pid  # forked by the server, not started by the client
    assert seen["pgid"] == seen["pid"]  # its own group, which the client signals
    assert seen["cwd"] == str(tmp_path)
    assert seen["argv"][1:] == ["report", "x"]
    assert seen["env"] == "from the client"
    assert seen["sigint_ignored"] is False
    assert seen["timing_process"] == job.pid  # start-up counted from the client's creation
    assert (tmp_path / "err.txt").read_text() == "to stderr\n"
    assert f"pid {seen['pid']}: genlab report x" in server.log.read_text()


def test_children_are_seeded_afresh_like_new_interpreters(server, tmp_path: Path) -> None:
    seen = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        assert client(server, "report", cwd=tmp_path / name).wait(timeout=60) == 0
        seen.append(json.loads((tmp_path / name / "out.txt").read_text()))
    assert seen[0]["random"] != seen[1]["random"]
    assert seen[0]["torch_seed"] != seen[1]["torch_seed"]


@pytest.mark.parametrize("threads", [1, 2])
def test_the_jobs_thread_count_reaches_blas_and_openmp(server, tmp_path: Path,
                                                       threads: int) -> None:
    """Snakemake sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS to a job's threads, which the
    libraries read once, when they load: in the server, under a one-thread job's values."""
    job = client(server, "report", cwd=tmp_path, OMP_NUM_THREADS=str(threads),
                 OPENBLAS_NUM_THREADS=str(threads))
    assert job.wait(timeout=60) == 0
    seen = json.loads((tmp_path / "out.txt").read_text())
    assert seen["threads"] == {"blas": [threads], "openmp": [threads]}


def test_an_ignored_sigint_stays_ignored(server, tmp_path: Path) -> None:
    environment = dict(os.environ, **{ENV: server.socket_path})
    job = subprocess.Popen([sys.executable, "-m", "genlab", "report"], cwd=tmp_path,
                           env=environment, stdout=subprocess.PIPE,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    out, _ = job.communicate(timeout=60)
    assert json.loads(out)["sigint_ignored"] is True


@pytest.mark.parametrize(("args", "code", "stderr"), [
    (("exit", "3"), 3, ""),
    (("raise",), 1, "ValueError: raised in the child"),
    (("sysexit", "a message"), 1, "a message"),
])
def test_the_commands_status_is_the_jobs(server, tmp_path: Path, args, code, stderr) -> None:
    assert client(server, *args, cwd=tmp_path).wait(timeout=60) == code
    assert stderr in (tmp_path / "err.txt").read_text()


@pytest.mark.parametrize(("signum", "code", "stderr"), [
    (signal.SIGINT, 130, "genlab: interrupted"),  # Ctrl-C: the command's own handling
    (signal.SIGTERM, 128 + signal.SIGTERM, ""),  # Snakemake cancelling the job
])
def test_signals_to_the_client_reach_the_job(server, tmp_path: Path, signum, code,
                                             stderr) -> None:
    job, child = sleeping_job(server, tmp_path / "pid", cwd=tmp_path)
    job.send_signal(signum)
    assert job.wait(timeout=30) == code
    wait_for(lambda: not alive(child), timeout=10, what="the child to end")
    assert stderr in (tmp_path / "err.txt").read_text()


def test_a_killed_client_takes_its_job_with_it(server, tmp_path: Path) -> None:
    job, child = sleeping_job(server, tmp_path / "pid", cwd=tmp_path)
    job.kill()
    job.wait(timeout=30)
    wait_for(lambda: not alive(child), timeout=10, what="the orphaned child to be killed")
    assert "its client went away" in server.log.read_text()


def test_a_dead_server_fails_its_jobs_and_takes_their_children(tmp_path: Path) -> None:
    with serving(tmp_path / "server.log") as own:
        (tmp_path / "job").mkdir()
        job, child = sleeping_job(own, tmp_path / "pid", cwd=tmp_path / "job")
        own.process.kill()
        assert job.wait(timeout=30) == 1
        assert "the fork server stopped" in (tmp_path / "job/err.txt").read_text()
        wait_for(lambda: not alive(child), timeout=10, what="the child to die with the server")


def test_another_interpreter_is_declined(server) -> None:
    request = forkclient.request(["genlab", "report"])
    request["prefix"] = "/another/venv"
    body = json.dumps(request).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(server.socket_path)
        conn.sendmsg([HEADER.pack(len(body))],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", 0, 1, 2))])
        conn.sendall(body)
        assert forkclient.read_line(conn).startswith(b"F another interpreter")


def test_an_edited_source_is_noticed(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text("x = 1\n")
    stats = {str(module): (module.stat().st_mtime_ns, module.stat().st_size)}
    assert forkserver.edited_source(stats) is None
    module.write_text("x = 22\n")
    assert forkserver.edited_source(stats) == str(module)
    module.unlink()
    assert forkserver.edited_source(stats) == str(module)


def test_remembered_stages_are_served_until_dvc_yaml_or_params_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the server parses once for its children (adapter.remember_jobs) is what a child
    would parse itself, and never outlives an edit of either file."""
    monkeypatch.setattr(adapter, "_REMEMBERED", {})
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    adapter.remember_jobs(tmp_path)
    served = adapter.dvc_jobs(tmp_path)
    assert served == adapter._parse_jobs(tmp_path)
    assert served[0] is adapter.dvc_jobs(tmp_path)[0]  # from memory
    params = tmp_path / "params.yaml"
    params.write_text(params.read_text().replace("title: genlab report", "title: edited", 1))
    edited = adapter.dvc_jobs(tmp_path)
    assert edited[0] is not served[0]
    gate = next(job for job in edited if job.stage == "check_params")
    assert gate.params["report"]["title"] == "edited"  # check_params tracks every setting
    assert adapter.dvc_jobs(ROOT) == adapter._parse_jobs(ROOT)  # another workspace: parsed


def test_the_imported_genlab_sources_are_watched() -> None:
    stats = forkserver.source_stats()
    assert any(path.endswith(os.path.join("genlab", "workflow", "forkserver.py"))
               for path in stats)
    assert all("site-packages" not in path or "genlab" in path for path in stats)


@pytest.mark.parametrize("value", ["", "0", "/nonexistent/genlab-fs/socket"])
def test_without_a_server_the_command_runs_in_the_client(tmp_path: Path, value: str) -> None:
    environment = dict(os.environ, **{ENV: value})
    done = subprocess.run([sys.executable, "-m", "genlab", "--version"], cwd=tmp_path,
                          env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("genlab")
    assert forkclient.exit_code(b"-15") == 143 and forkclient.exit_code(b"2") == 2


def test_turned_off_by_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV, "0")
    assert forkserver.start(tmp_path / "log") is None


def test_the_server_ends_with_its_parent(tmp_path: Path) -> None:
    """Snakemake killed outright (no onerror hook): its server must not linger."""
    pid_file = tmp_path / "server.pid"
    script = ("import sys; from pathlib import Path; from genlab.workflow import forkserver;"
              f"h = forkserver.start(Path({str(tmp_path / 'log')!r}));"
              f"Path({str(pid_file)!r}).write_text(str(h.process.pid))")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60,
                   env={k: v for k, v in os.environ.items() if k != ENV})
    server_pid = int(pid_file.read_text())
    wait_for(lambda: not alive(server_pid), timeout=120, what="the server to exit")
    assert "stopped" in (tmp_path / "log").read_text()


# --------------------------------------------------------------------------------------------
# Real stages, both ways.

STAGES = ("random_labels_synthesize_s0", "random_labels_train_s0-9", "random_labels_sharpness",
          "random_labels_intrinsic_dim", "eos_gd_synthesize_s0", "eos_gd_train@lr0_2-s0")


def outputs_digest(root: Path, jobs) -> dict[str, str]:
    files = [p for job in jobs for out in job.outs for p in
             ([root / out] if (root / out).is_file() else sorted((root / out).rglob("*")))
             if p.is_file()]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.workflow
def test_real_stages_write_the_same_bytes_forked_as_alone(tmp_path: Path) -> None:
    """Training (the vectorised group trainer, and eos_gd's GD with Lanczos, whose optimizer
    imports torch._dynamo), curvature and the compiled TwoNN, run by their dvc.yaml commands in
    fresh interpreters and then in fork-server children: every output byte-identical."""
    env = tool_env(tmp_path / "home")
    env.pop(ENV, None)
    root = copy_project(tmp_path / "project", env)
    jobs = {job.stage: job for job in dvc_jobs(root)}
    chosen = [jobs[name] for name in STAGES]

    def run_all(environment: dict[str, str]) -> dict[str, str]:
        for job in chosen:
            subprocess.run(job.cmd, shell=True, cwd=root, env=environment, check=True,
                           capture_output=True, timeout=600)
        return outputs_digest(root, chosen)

    alone = run_all(dict(env, **{ENV: "0"}))
    with serving(tmp_path / "server.log", target=forkserver.TARGET) as handle:
        forked = run_all(dict(env, **{ENV: handle.socket_path}))
    log = (tmp_path / "server.log").read_text()
    assert all(f"genlab --stage {job.stage} " in log for job in chosen), log
    assert f"parsed the stages of {root}" in log  # once, for every child
    assert forked == alone and len(alone) >= len(chosen)
