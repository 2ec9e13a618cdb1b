"""What the benchmark scripts share: where the real data lies and how they call the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GNNSCALE_SHARED_DATA", REPO.parent / "shared" / "data"))


_IN_PROCESS = {"on": False}


def python_run(argv: list[str], env: dict | None = None, fork: bool = False) -> subprocess.CompletedProcess:
    """``subprocess.run([python, *argv], capture_output=True, text=True, env=env)``. ``fork``: the same
    script run (``__main__``, ``sys.argv``, ``env``, its exit status or traceback) in a fork of this
    process instead, whose imports are done (torch, torch_geometric: about 2-6 CPU s a fresh interpreter
    pays): for ``--smoke`` runs of scripts whose real runs need a fresh process per side. Only from a
    process that has run no torch op yet (no OpenMP thread to lose in the fork), and not for a side that
    must not find gnnscale imported."""
    if not fork:
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env)
    import runpy
    import tempfile
    import traceback

    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        pid = os.fork()
        if pid == 0:  # the child: becomes ``python ARGV`` and never returns
            code = 1
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                if env is not None:
                    os.environ.clear()
                    os.environ.update(env)
                sys.argv = [os.path.abspath(argv[0]), *argv[1:]]
                try:
                    runpy.run_path(sys.argv[0], run_name="__main__")
                    code = 0
                except SystemExit as exit:
                    code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
                    if not isinstance(exit.code, (int, type(None))):
                        print(exit.code, file=sys.stderr)
                except BaseException:  # noqa: BLE001 - a traceback, as an interpreter prints it
                    traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess([sys.executable, *argv], os.waitstatus_to_exitcode(status),
                                           out.read(), err.read())


def gnnscale(*args: str) -> None:
    """Run ``python -m gnnscale ARGS``; on failure exit with the command and its stderr's tail.
    After :func:`smoke_in_process`: ``gnnscale.cli.main(ARGS)`` in this process (stdout dropped)."""
    if _IN_PROCESS["on"]:
        rc = run_gnnscale(list(args)).returncode
        if rc:
            raise SystemExit(f"gnnscale {' '.join(args)} failed (exit {rc}): its error is above")
        return
    r = subprocess.run([sys.executable, "-m", "gnnscale", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode:
        raise SystemExit(f"gnnscale {' '.join(args)} failed:\n{r.stderr[-3000:]}")


def run_gnnscale(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run([python, -m, gnnscale, *argv], **kwargs)``; after :func:`smoke_in_process`:
    ``gnnscale.cli.main(argv)`` in this process (stdout dropped; its errors print to this stderr,
    the result's ``stdout`` and ``stderr`` are empty)."""
    if _IN_PROCESS["on"]:
        import contextlib
        import io

        from gnnscale.cli.main import main

        with contextlib.redirect_stdout(io.StringIO()):
            rc = main(list(argv))
        return subprocess.CompletedProcess(argv, rc, "", "")
    return subprocess.run([sys.executable, "-m", "gnnscale", *argv], **kwargs)


def smoke_parts(nodes: int = 2000, parts: int = 1) -> str:
    """A folder of a small synthetic graph (16 features) cut into ``parts`` parts, for ``--smoke``
    runs of scripts that take a partition folder; made in a temporary folder (left to the OS)."""
    import tempfile

    out = Path(tempfile.mkdtemp(prefix="gnnscale-smoke-")) / f"synthetic{nodes}-p{parts}"
    gnnscale("partition", "--dataset", f"synthetic?num_nodes={nodes}&avg_degree=8&num_features=16",
             "--parts", str(parts), "--out", str(out))
    return str(out)


def write_json(path: str | None, obj) -> None:
    """Write the benchmark's figures to ``path`` (folders made), if a path was given."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(obj, indent=1))
        print(f"wrote {path}")


def graph_parallel_bytes(graph, hidden: int, num_layers: int, dtype_bytes: int = 4) -> dict:
    """Bytes per epoch of graph-parallel full-graph training of an L-layer model with hidden size
    H on the same parts (computed, not run): every layer, each part receives the h^i of its halo
    (forward) and sends the gradients of those rows back to their owners (backward)::

        forward = backward = L x sum_p |halo_p| x H x dtype_bytes

    (the layer-0 rows are counted as H-wide encoded rows, not as F-wide features, in the
    baseline's favour). Parameter gradients are left out on both sides."""
    halo = sum(graph.halo_sizes)
    fwd = num_layers * halo * hidden * dtype_bytes
    return dict(halo_rows=halo, forward=fwd, backward=fwd, total=2 * fwd)


def fork_smoke_workers(nprocs: int = 2, preload: tuple[str, ...] = ()) -> None:
    """For ``--smoke`` runs that launch in this process (``gnnscale.train``, ``launch_local``): their
    ``nprocs``-worker launches fork from one server that imported torch once, instead of spawning
    interpreters that import it again each (``start_workers_by_fork``; about 2-3 CPU seconds a worker).
    The workers run the same code; launches of another worker or thread count fork from a server of their own,
    started at their first launch. ``preload``: more modules the server imports once (``torch_geometric``)."""
    from gnnscale.process.launch import start_workers_by_fork

    start_workers_by_fork(nprocs, preload=("gnnscale.process.fork_preload", *preload))


def in_process() -> bool:
    """Whether :func:`smoke_in_process` was called: gnnscale commands run in this process."""
    return _IN_PROCESS["on"]


def smoke_in_process(preload: tuple[str, ...] = ()) -> None:
    """For ``--smoke`` runs: :func:`gnnscale` runs the CLI in this process (the same commands and
    launcher; torch and the dataset readers imported once, not per command) and its 2-worker
    launches fork (:func:`fork_smoke_workers`, with ``preload``)."""
    fork_smoke_workers(2, preload)
    _IN_PROCESS["on"] = True


# The peers' DGL environment (bash ../shared/peers/setup_peers.sh dgl); $GNNSCALE_DGL_PYTHON names another.
DGL_PYTHON = os.environ.get("GNNSCALE_DGL_PYTHON", "/tmp/peers/dgl/bin/python")
PEER_CHECK_SECONDS = 120


def peer_python(python: str, modules: tuple[str, ...]) -> tuple[str | None, str]:
    """``(python, "")`` when the interpreter ``python`` exists and imports ``modules`` (``python -c
    'import ...'`` within :data:`PEER_CHECK_SECONDS`); ``(None, why)`` otherwise: a peer
    environment whose interpreter is there but broken (a torch it cannot import) counts as absent.
    The answer is cached in this process's environment (``GNNSCALE_PEER_OK_<hash>``, keyed by the
    interpreter's path, size and mtime and the modules), so the scripts it starts do not ask again."""
    import hashlib

    path = Path(python)
    if not path.exists():
        return None, f"{python} not found"
    st = path.stat()
    key = "GNNSCALE_PEER_OK_" + hashlib.sha1(
        repr((str(path), st.st_size, st.st_mtime_ns, modules)).encode()).hexdigest()[:16]
    cached = os.environ.get(key)
    if cached is not None:
        return (python, "") if cached == "1" else (None, cached)
    cmd = [python, "-c", "import " + ", ".join(modules)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=PEER_CHECK_SECONDS,
                           env=dict(os.environ, DGLBACKEND="pytorch"))
        why = "" if r.returncode == 0 else (
            f"{python} cannot import {', '.join(modules)} (exit {r.returncode}: "
            f"{(r.stderr.strip().splitlines() or ['no message'])[-1][:200]})")
    except (OSError, subprocess.TimeoutExpired) as err:
        why = f"{python} -c 'import {', '.join(modules)}' failed: {err}"
    os.environ[key] = "1" if not why else why
    return (python, "") if not why else (None, why)


def dgl_python() -> tuple[str | None, str]:
    """:func:`peer_python` of the DGL environment (:data:`DGL_PYTHON`, importing torch and dgl):
    ``(path, "")`` or ``(None, why, with how to set it up)``."""
    python, why = peer_python(DGL_PYTHON, ("torch", "dgl"))
    return python, why and f"no usable DGL environment: {why} (bash ../shared/peers/setup_peers.sh dgl)"
