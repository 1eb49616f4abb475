"""Hand a ``python -m genlab ...`` command to the workflow's fork server, if one is listening.

A stage's process used to spend ~2-3 s starting (the interpreter, torch, genlab's CLI and the
study's code) before any work. When Snakemake runs the pipeline on this machine it starts a fork
server (:mod:`genlab.workflow.forkserver`) that has imported all of that once; this client, the
process Snakemake's rule starts, sends it the command, its working directory, its environment and
its standard streams, and the server forks a child that runs the command exactly as this process
would have, writing to the same log. The client waits, passes on SIGINT, SIGTERM and SIGHUP, and
exits with the child's status.

Nothing here may import more than the standard library: the point is to start in milliseconds.
Every failure before the child exists (no server, a different interpreter, genlab's sources
edited since the server imported them, a refused connection) returns ``None`` and the caller runs
the command in this process, as it always did. ``GENLAB_FORKSERVER=0`` turns the server off.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys

ENV = "GENLAB_FORKSERVER"
"""The server's socket path (the Snakefile sets it for its jobs); unset, empty or ``0``: none."""

HEADER = struct.Struct("!I")
"""The request's length, sent with the three file descriptors."""

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def request(argv: list[str]) -> dict:
    """What the server needs to run ``argv`` as this process would."""
    return {
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "executable": os.path.realpath(sys.executable),
        "prefix": sys.prefix,
        "client_pid": os.getpid(),
        # a process started with SIGINT ignored (a background job without job control) keeps it so
        "sigint_ignored": signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
    }


def read_line(conn: socket.socket) -> bytes:
    """One reply line from the server, without its newline; b"" when the server hung up."""
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            return b""
        data += chunk
    return bytes(data[:-1])


def exit_code(reply: bytes) -> int:
    """A child's wait status as a shell reports it: its exit code, or 128 + the killing signal."""
    code = int(reply)
    return 128 - code if code < 0 else code


def run_in_server(argv: list[str]) -> int | None:
    """Run ``genlab argv`` in a child of the fork server; its exit code, or None to run it here."""
    path = os.environ.get(ENV, "")
    if path in ("", "0"):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        body = json.dumps(request(argv)).encode()
        conn.sendmsg([HEADER.pack(len(body))],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", 0, 1, 2))])
        conn.sendall(body)
        reply = read_line(conn)
    except OSError:
        conn.close()
        return None
    if not reply.startswith(b"P "):  # b"F <why>": the server declined; run it here
        conn.close()
        return None
    child = int(reply[2:])

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signum)

    for signum in FORWARDED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, forward)
    reply = read_line(conn)  # a forwarded signal does not interrupt it: recv retries (PEP 475)
    conn.close()
    if not reply.startswith(b"X "):  # the server died under the child: say so, fail the job
        print("genlab: the fork server stopped while running this command", file=sys.stderr)
        return 1
    return exit_code(reply[2:])


__all__ = ["ENV", "HEADER", "exit_code", "read_line", "request", "run_in_server"]
