"""A server that runs Python scripts as forks of one process that imported their libraries once.

``python tests/script_forks.py MODULE...`` imports the MODULEs (torch, torch_geometric, gnnscale's
packages: about 2-8 CPU seconds a fresh interpreter pays before a script's first line), then reads
one JSON request a line on its stdin::

    {"id": ..., "script": PATH, "argv": [...], "cwd": DIR, "env": {...}, "stdout": FILE, "stderr": FILE}

and for each forks a child that runs ``python PATH ARGV...`` as an interpreter would (``__main__``,
``sys.argv``, ``sys.path[0]`` the script's folder, the environment, the folder and the output files
given; numpy's and torch's global generators seeded afresh, as a new interpreter's; SystemExit's code,
or a traceback and exit status 1; threads joined and atexit's functions run
at the end) in a session of its own (``os.killpg(pid, ...)`` stops it and what it started). The server
answers on its stdout ``{"id", "pid"}`` when the child starts and ``{"id", "rc", "cpu"}`` when it ends
(``rc`` as ``Popen.returncode``; ``cpu``: user+system seconds of the child and the processes it waited
for, from ``wait4``). It exits when its stdin closes, killing the sessions of children still running,
and dies with the process that started it.

What a fork cannot give a script: a library that reads a variable when it is imported (``OMP_*``,
``THP_MEM_ALLOC_ENABLE``, ``NUMBA_*``) read it in the server's environment; a script that sets one
before it imports the library, or that must import it itself, runs in its own interpreter instead
(the caller's choice). The server imports modules only: no thread runs when it forks (checked: no Python thread).
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import sys


def _pdeathsig(sig: int) -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except OSError:  # pragma: no cover - not Linux
        pass


def _child(req: dict, keep: tuple[int, ...]) -> None:
    """In the forked child: become ``python SCRIPT ARGV`` and never return."""
    code = 1
    try:
        os.setsid()
        _pdeathsig(signal.SIGKILL)  # the server gone (the suite killed): no orphaned script
        for fd in keep:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for src, dst in ((null, 0), (out, 1), (err, 2)):
            os.dup2(src, dst)
            os.close(src)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import tempfile

        tempfile.tempdir = None  # computed again from this environment's TMPDIR
        # a new interpreter's global generators draw their seeds from the OS (random's does after a fork)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        if "torch" in sys.modules:
            sys.modules["torch"].seed()
        script = os.path.abspath(req["script"])
        sys.argv = [script, *req["argv"]]
        sys.path[0] = os.path.dirname(script)
        import runpy

        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exit:
            c = exit.code
            if c is None:
                code = 0
            elif isinstance(c, int):
                code = c
            else:
                print(c, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - as the interpreter: the traceback, exit status 1
            sys.excepthook(*sys.exc_info())
            code = 1
        import threading

        threading._shutdown()  # non-daemon threads joined, as at an interpreter's exit
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        try:
            sys.excepthook(*sys.exc_info())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF if code >= 0 else 1)


def serve(modules: list[str]) -> None:
    _pdeathsig(signal.SIGTERM)
    for name in modules:
        importlib.import_module(name)
    import threading

    if threading.active_count() != 1:  # (torch's and numba's idle native helpers are there, as in
        # multiprocessing's forkserver of gnnscale.process.fork_preload, which forks the suite's workers)
        raise SystemExit(f"script_forks: Python threads run after importing {modules}: forking is unsafe")
    reqs, answers = os.dup(0), os.dup(1)  # private: the children's 0 and 1 become their own
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    running: dict[int, object] = {}  # pid -> request id

    def answer(obj: dict) -> None:
        os.write(answers, (json.dumps(obj) + "\n").encode())

    buf = b""
    open_ = True
    try:
        while open_ or running:
            ready, _, _ = select.select([reqs] if open_ else [], [], [], 0.1)
            if ready:
                chunk = os.read(reqs, 65536)
                if not chunk:
                    open_ = False
                    for pid in running:  # the caller is done: nothing may outlive it
                        try:
                            os.killpg(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    req = json.loads(line)
                    sys.stdout.flush()
                    sys.stderr.flush()
                    pid = os.fork()
                    if pid == 0:
                        _child(req, (reqs, answers))
                    running[pid] = req["id"]
                    answer({"id": req["id"], "pid": pid})
            while running:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
                if pid == 0:
                    break
                rid = running.pop(pid, None)
                if rid is not None:
                    answer({"id": rid, "rc": os.waitstatus_to_exitcode(status),
                            "cpu": usage.ru_utime + usage.ru_stime})
    finally:
        for pid in running:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    serve(sys.argv[1:])
