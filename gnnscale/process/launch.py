"""Local worker launch: ``gnnscale train --workers N`` on one machine, no torchrun needed.

:func:`launch_local` spawns N processes that rendezvous on 127.0.0.1 at a free port (or one
the user names, checked first), watches them, and when one fails stops the others and raises
one error naming the failing rank. No process outlives the launcher.

Torch-free on purpose: the launcher process only reads the partition folder, starts the
workers and waits; each worker imports torch itself. Keeping torch out of the launcher takes
its import (about 3 s) off the path from the command to the first step.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import multiprocessing as mp
import multiprocessing.connection
import multiprocessing.context
import multiprocessing.forkserver as forkserver
import multiprocessing.popen_forkserver as popen_forkserver
import os
import pickle
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any, Callable

from gnnscale.config import DEVICES
from gnnscale.errors import GnnscaleError, PeerError, RuntimeSetupError


STORE_FD_ENV = "GNNSCALE_STORE_FD"  # rank 0 of launch_local: the listening socket's fd for the store


def in_torchrun() -> bool:
    """True when started by torchrun (or any launcher that sets RANK and WORLD_SIZE)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_ADDR" in os.environ


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port(port: int | None) -> None:
    """An explicit rendezvous port in 1..65535 (None: the system picks one); RuntimeSetupError in one line."""
    if port is not None and not 0 < int(port) < 65536:
        raise RuntimeSetupError(f"--port must be in 1..65535, found {port}; give a free port, or leave --port out "
                                "and the system picks one")


def listen_socket(port: int | None = None, host: str = "127.0.0.1") -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (``port`` None: one the system picks).

    :func:`launch_local` hands it to rank 0, whose rendezvous store serves on it
    (``TCPStore(master_listen_fd=...)``): the port stays held from the launcher's choice to the
    store, so no other process can take it in between (the race a free port found, closed and
    bound again later loses on a busy host: EADDRINUSE in rank 0's rendezvous).
    Raises RuntimeSetupError (one line) when ``port`` is out of range or taken."""
    check_port(port)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((host, 0 if port is None else int(port)))
        s.listen(128)
    except OSError as err:
        s.close()
        raise RuntimeSetupError(
            f"port {port} on {host} is already in use ({err.strerror}); the workers need it for their "
            "rendezvous. Pass a free port with --port, or leave --port out to pick a free one."
        ) from None
    return s


def die_with_parent() -> None:
    """Linux: have the kernel send SIGTERM to this worker when its launcher (launch_local, or
    torchrun's agent) dies, even by SIGKILL: an orphaned worker would go on training alone."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        except OSError:
            pass


def _torch_has_gpu_build() -> bool:
    """False when the installed torch is a CPU build (``torch.version.cuda`` and ``.hip`` are
    None), found without importing torch: its ``version.py`` holds plain assignments. True when
    it is a GPU build, or when that cannot be told (then the caller imports torch to look)."""
    if "torch" in sys.modules:
        version = sys.modules["torch"].version
        return version.cuda is not None or getattr(version, "hip", None) is not None
    try:
        spec = importlib.util.find_spec("torch")  # finds the package, runs none of it
        path = os.path.join(os.path.dirname(spec.origin), "version.py")
        namespace: dict[str, Any] = {}
        with open(path, encoding="utf-8") as fh:
            exec(compile(fh.read(), path, "exec"), namespace)  # noqa: S102 - torch's own version file
        return namespace.get("cuda") is not None or namespace.get("hip") is not None
    except Exception:  # noqa: BLE001 - unusual install: look with torch itself
        return True


def launch_device(name: str, local_workers: int) -> str:
    """The device type ("cpu" or "cuda") that ``local_workers`` workers will train on, checked
    before any of them starts: ``--device cuda`` without a GPU, or more workers than GPUs, is
    a RuntimeSetupError here (see :func:`gnnscale.process.device.resolve_device`). Imports torch only
    when a GPU could be there: with a CPU build of torch, ``auto`` is ``cpu`` at no cost."""
    if name not in DEVICES:
        raise RuntimeSetupError(f"--device must be one of {', '.join(DEVICES)}; found {name!r}")
    if name == "cpu" or (name == "auto" and not _torch_has_gpu_build()):
        return "cpu"
    from gnnscale.process.device import resolve_device

    return resolve_device(name, 0, local_workers).type


def resolve_target(fn: Callable[..., Any] | str) -> Callable[..., Any]:
    """``fn`` itself, or the function a ``"module:function"`` string names (imported here)."""
    if callable(fn):
        return fn
    module, _, name = str(fn).partition(":")
    return getattr(importlib.import_module(module), name)


def _launcher_gone(launcher: int) -> bool:
    """True when the launching process no longer exists (a spawned worker's parent is the
    launcher; a forked one's is the forkserver, which outlives the launcher only briefly)."""
    if os.getppid() == launcher:
        return False
    try:
        os.kill(launcher, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # pragma: no cover - a pid reused by another user's process
        return True
    return False


def _entry(fn: Callable | str, rank: int, world: int, port: int, threads: int, args: tuple, queue, parent: int,
           late_env: dict[str, str | None] | None = None, listener: socket.socket | None = None) -> None:
    die_with_parent()
    if _launcher_gone(parent):  # the launcher died before we got here
        os._exit(1)
    if late_env:  # forked: the launch-time values of the variables read after import
        _restore_env(late_env)
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
    )
    # rank 0: the launcher's bound socket, for the store (groups.init_distributed); the others connect to it
    os.environ[STORE_FD_ENV] = str(listener.detach()) if listener is not None else "client"
    try:
        import torch

        torch.set_num_threads(threads)  # the thread variables came with the environment (launch_local)
        result = resolve_target(fn)(*args)
        # Plain pickle: tensors travel by value, not as shared-memory handles that die with us.
        queue.put((rank, "ok", pickle.dumps(result)))
        code = 0
    except GnnscaleError as err:
        queue.put((rank, "error", f"{type(err).__name__}: {err}"))
        code = 2
    except BaseException as err:  # noqa: BLE001 - report any crash to the launcher
        queue.put((rank, "crash", "".join(traceback.format_exception(err))))
        code = 1
    finally:
        try:
            from gnnscale.process.groups import shutdown_distributed

            shutdown_distributed()
        except Exception:  # noqa: BLE001
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def thread_env(threads: int, nprocs: int, typed: bool = False) -> dict[str, str]:
    """A worker's thread and allocator settings. They must be in its environment before it imports torch
    and numba (a spawned child imports them while unpickling its target, before any of its
    code runs), or numba's pool keeps one thread per core and OpenMP threads spin. ``typed``:
    the run trains a typed graph (its idle OpenMP threads sleep, even in a lone worker)."""
    env = {
        # Compiled kernels' thread pools sized to this worker's share of the cores.
        "NUMBA_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
        # An engine worker: its parallel numba kernels may run (samplers.cpu_kernels.WORKER_THREADS_ENV;
        # a user's process keeps the serial ones and never starts numba's pool).
        "GNNSCALE_WORKER_THREADS": str(threads),
    }
    # torch's CPU allocator puts tensors of 2 MB and more on transparent huge pages (aligned,
    # madvise HUGEPAGE; numpy already does so for its arrays): random row reads (sampling,
    # feature and edge-attribute gathers) then miss the TLB far less. Measured on R-MAT 100k,
    # 2 threads: the sampler 12-13% faster (109k -> 124k seeds/s). A value the user set wins.
    env["THP_MEM_ALLOC_ENABLE"] = os.environ.get("THP_MEM_ALLOC_ENABLE", "1")
    if nprocs > 1 or typed:
        # Idle OpenMP threads sleep instead of spinning on cores the other workers need. (A
        # lone worker keeps them spinning: waking sleeping threads for every op cost it 30%.
        # Not on a typed graph: its steps run their small ops on one thread and wake the others
        # for a few wide ones (gnnscale.process.threads), and with another process on the
        # machine a spinning thread made its epochs 10x slower than one thread.)
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    elif "OMP_WAIT_POLICY" in os.environ:
        # A lone worker takes the policy the user set (it inherits it when spawned; given here, so a
        # worker forked from a server gets the launch's value too). Issue 54 item 9, R-MAT 100k, one
        # worker, 2 threads, against spinning: quiet (load 1-2) 1.105 wall, 0.964 CPU an epoch
        # sleeping; beside other jobs (load 10-14) 0.192 wall, 0.291 CPU. So spinning stays the
        # default, and a shared machine (the test suite's conftest) sets OMP_WAIT_POLICY=PASSIVE.
        env["OMP_WAIT_POLICY"] = os.environ["OMP_WAIT_POLICY"]
    return env


# Where local workers come from: spawned (a fresh interpreter each, the default), or forked from a
# server of start_workers_by_fork when this process's environment is the one it started with.
_START: dict[str, Any] = {"base": None, "late": (), "preload": [], "servers": {}, "forked": 0, "spawned": {}}

# Variables that no module of the server reads at import (inductor computes its cache folder
# when asked, and sets this variable to its default then; pytest names the running test; the
# ``outdated`` package's switch): a launch that differs only in them still forks, and each
# worker gets their launch-time values.
READ_LATE = ("TORCHINDUCTOR_CACHE_DIR", "PYTEST_CURRENT_TEST", "OUTDATED_IGNORE")


def start_workers_by_fork(nprocs: int = 2, preload: tuple[str, ...] = ("gnnscale.process.fork_preload",),
                          read_late: tuple[str, ...] = READ_LATE) -> None:
    """Start this process's later :func:`launch_local` workers by forking a server process
    that has imported ``preload`` once (multiprocessing's forkserver; by default
    :mod:`gnnscale.process.fork_preload`: torch, numba's registries, the sampling kernels),
    instead of spawning a fresh interpreter per worker that imports them again (about 2 s
    per launch here, 0.05 s forked).

    For a process that launches many runs (a test suite, a notebook); ``gnnscale train``
    launches once and keeps spawning. A server runs in the environment of one kind of
    launch (this process's environment now plus :func:`thread_env`'s variables for its worker
    and thread count) and keeps it: torch and libgomp read their settings at import. The server
    of ``nprocs``-worker launches starts now; that of another worker or thread count (a 1-worker
    launch, ``threads_per_worker``, a typed run's) at its first launch. So a worker sees exactly the
    environment a spawned one would: a launch made after a variable of this process changed
    is spawned as before, except for the variables of ``read_late``, which no preloaded module
    reads at import: those the forked worker sets to their values at launch. A server imports
    modules only (no thread runs when it forks) and exits with this process; its workers die
    with it (``die_with_parent``)."""
    if int(nprocs) < 1:
        raise RuntimeSetupError(f"start_workers_by_fork: nprocs (the launches' worker count) must be at least 1; "
                                f"found {nprocs}")
    threads = max(1, (os.cpu_count() or 1) // nprocs)
    _START.update(base=_without(os.environ, read_late), late=tuple(read_late), preload=list(preload), servers={})
    _forking(thread_env(threads, nprocs))


def _forking(env: dict[str, str]) -> Any:
    """The context whose processes fork from the server of launches whose :func:`thread_env` is
    ``env`` (that server started now, in this process's environment plus ``env``, if there is none yet)."""
    key = repr(sorted(env.items()))
    if key not in _START["servers"]:
        server = forkserver.ForkServer()
        server.set_forkserver_preload(_START["preload"])
        with _environ(env):  # the server keeps the environment it starts in
            server.ensure_running()
        _START["servers"][key] = server
    return _ServerContext(key)


class _ServerContext(mp.context.ForkServerContext):
    """multiprocessing's ``forkserver`` context, but its processes fork from the server
    ``_START["servers"][key]`` (multiprocessing's own uses its one module-wide server)."""

    def __init__(self, key: str):
        super().__init__()
        self.key = key

    def Process(self, *args, **kwargs):  # noqa: N802 - multiprocessing's name
        p = _ServerProcess(*args, **kwargs)
        p.server_key = self.key
        return p


class _ServerProcess(mp.context.ForkServerProcess):
    server_key: str | None = None

    @staticmethod
    def _Popen(process_obj):  # noqa: N802 - multiprocessing's name
        return _ServerPopen(process_obj)


class _ServerPopen(popen_forkserver.Popen):
    _lock = threading.Lock()

    def _launch(self, process_obj):
        # multiprocessing's Popen asks the module's connect_to_new_process (its one server) for the process
        server = _START["servers"][process_obj.server_key]
        with self._lock:
            default = forkserver.connect_to_new_process
            forkserver.connect_to_new_process = server.connect_to_new_process
            try:
                super()._launch(process_obj)
            finally:
                forkserver.connect_to_new_process = default


@contextlib.contextmanager
def _environ(env: dict[str, str]):
    """Set ``env``'s variables in this process for the block, then put back what they were."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        _restore_env(saved)


def _restore_env(saved: dict[str, str | None]) -> None:
    """Set each variable of ``saved`` to its value there (None: unset it)."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _without(env, names: tuple[str, ...]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in names}


def _context(env: dict[str, str]) -> tuple[Any, dict[str, str | None] | None]:
    """The multiprocessing context for workers whose :func:`thread_env` is ``env``, and what a
    forked worker sets itself: a forkserver's context when this process's environment is the one
    :func:`start_workers_by_fork` started in (but for the variables read late), with their values
    now; else spawn's, and None."""
    if _START["base"] is None:
        return mp.get_context("spawn"), None
    now = _without({**os.environ, **env}, _START["late"])
    then = {**_START["base"], **env}
    if now == then:
        _START["forked"] += 1
        return _forking(env), {k: os.environ.get(k) for k in _START["late"]}
    for k in set(now) | set(then):
        if now.get(k) != then.get(k):
            _START["spawned"][k] = _START["spawned"].get(k, 0) + 1
    return mp.get_context("spawn"), None


def fork_counts() -> dict[str, Any]:
    """Launches since :func:`start_workers_by_fork`: ``forked``, and per environment variable
    the number of launches ``spawned`` because it differed from the server's."""
    return {"forked": _START["forked"], "spawned": dict(_START["spawned"])}


def launch_local(
    fn: Callable[..., Any] | str,
    nprocs: int,
    args: tuple = (),
    port: int | None = None,
    threads_per_worker: int | None = None,
    grace: float = 10.0,
    typed: bool = False,
) -> list[Any]:
    """Run ``fn(*args)`` in ``nprocs`` spawned processes forming one gloo/nccl group.

    ``fn`` is a function (pickled by reference: its module is imported here and in each
    worker) or a ``"module:function"`` string, imported only in the workers.

    ``typed``: the workers train a typed graph (:func:`thread_env`: idle OpenMP threads sleep).

    Returns the list of per-rank return values. If a worker fails, the others get ``grace``
    seconds to report their own error, then are terminated; the raised error names the
    first failing rank and carries its message.
    """
    if nprocs < 1:
        raise RuntimeSetupError(f"--workers must be at least 1, found {nprocs}")
    oom_before = oom_kills()  # to tell the out-of-memory killer from other SIGKILLs
    listener = listen_socket(port)  # held until rank 0's store serves on it
    port = int(listener.getsockname()[1])
    threads = threads_per_worker or max(1, (os.cpu_count() or 1) // nprocs)
    env = thread_env(threads, nprocs, typed)
    ctx, late_env = _context(env)
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=_entry, args=(fn, r, nprocs, port, threads, args, queue, os.getpid(), late_env,
                                              listener if r == 0 else None),
                         daemon=False) for r in range(nprocs)]
    results: dict[int, tuple[str, Any]] = {}
    terminated: set[int] = set()
    failed_at: float | None = None
    try:
        with _environ(env):  # inherited by the children at start
            for p in procs:
                p.start()
        listener.close()  # rank 0 holds its own copy of the socket now
        while True:
            while not queue.empty():
                rank, status, payload = queue.get()
                results[rank] = (status, payload)
                if status != "ok" and failed_at is None:
                    failed_at = time.monotonic()
            alive = [p for p in procs if p.is_alive()]
            for r, p in enumerate(procs):
                if not p.is_alive() and p.exitcode not in (0, None) and failed_at is None:
                    failed_at = time.monotonic()
            if not alive:
                break
            if failed_at is not None and time.monotonic() - failed_at > grace:
                break
            mp.connection.wait([p.sentinel for p in alive] + [queue._reader], timeout=0.5)
        while not queue.empty():
            rank, status, payload = queue.get()
            results[rank] = (status, payload)
    finally:
        listener.close()
        for r, p in enumerate(procs):
            if p.is_alive():
                terminated.add(r)
                p.terminate()
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    return _collect(procs, results, terminated, oom_before)


def oom_kills() -> int | None:
    """The host's count of processes killed by the kernel's out-of-memory killer since boot
    (``oom_kill`` in ``/proc/vmstat``, Linux 4.13+), or None where it cannot be read."""
    try:
        with open("/proc/vmstat") as fh:
            for line in fh:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def death_message(exitcode: int | None, oom_before: int | None, oom_after: int | None) -> str:
    """Why a worker ended without reporting a result, in one line: its signal by name, and the
    out-of-memory killer when the host's OOM kills rose during the run and the signal was SIGKILL."""
    if exitcode is None or exitcode >= 0:
        return f"exited with code {exitcode} without reporting a result"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        name = f"signal {-exitcode}"
    if -exitcode == signal.SIGKILL and None not in (oom_before, oom_after) and oom_after > oom_before:
        return (f"was killed by the kernel's out-of-memory killer ({name}; the host's OOM kills rose from "
                f"{oom_before} to {oom_after} during the run): the workers needed more memory than this host "
                "has; run fewer workers on it, or a smaller model, batch or evaluation")
    return f"was killed by {name} (exit code {exitcode}) without reporting a result"


def _collect(procs, results: dict, terminated: set[int], oom_before: int | None = None) -> list[Any]:
    """Return per-rank results, or raise one error that names the root-cause rank first.

    Priority: a reported error or crash; then a rank that died without a word (killed,
    out of memory, os._exit); then ranks whose collectives failed because of a peer
    (PeerError); last, ranks the launcher stopped.
    """
    errors = []
    for r, p in enumerate(procs):
        status, payload = results.get(r, (None, None))
        if status == "ok":
            continue
        if status == "error":
            errors.append((2 if payload.startswith("PeerError") else 0, r, payload))
        elif status == "crash":
            errors.append((0, r, "crashed:\n" + payload))
        elif r in terminated:
            errors.append((3, r, "stopped by the launcher after a peer failed"))
        else:
            errors.append((1, r, death_message(p.exitcode, oom_before, oom_kills())))
    if not errors:
        return [pickle.loads(results[r][1]) for r in range(len(procs))]
    errors.sort()
    _, first_rank, first_msg = errors[0]
    others = "; ".join(f"worker {r}: {m.splitlines()[0]}" for _, r, m in errors[1:]
                       if m != first_msg)  # an error every rank raised alike is said once
    msg = f"worker {first_rank} of {len(procs)} failed: {first_msg}"
    if others:
        msg += f"\n(also: {others})"
    raise PeerError(msg)
