"""Output paths: checked before any work starts, and kept elsewhere when a write fails at the end.

:func:`check_output` is the one check of every output option (``--save-model``, ``--metrics``,
``--checkpoint-dir``, ``--tensorboard``, ``gnnscale partition --out``, ``embed`` / ``predict`` /
``report`` / ``bench-partition --out``), made by :func:`gnnscale.api.prepare_run` and by each
command's entry before it loads, partitions or trains anything: the folder that will hold the
output exists or can be created (no file in the way) and this process can create a file in it
(a probe file is made and removed, so a read-only mount or ``/proc`` is refused as the write
would be). A write that fails later all the same (the disk filled, the folder was removed during
training) goes through :func:`write_or_keep`: what was made is written beside (the checkpoint
folder, the working folder, the temporary folder) and one line says where. Torch-free.
"""
from __future__ import annotations

import os
import tempfile
from typing import Callable, Sequence

from gnnscale.errors import OutputError

__all__ = ["check_output", "keep", "write_or_keep"]


def _reason(err: OSError) -> str:
    return err.strerror or type(err).__name__


def _folder_problem(folder: str) -> str | None:
    """Why no file can be written in ``folder`` (created as needed), or None: the nearest existing
    folder above it (or it) must be a folder and take a probe file."""
    existing = folder
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            break
        existing = parent
    if not os.path.isdir(existing):
        return f"{existing} is a file, so the folder {folder} cannot be made there"
    try:
        fd, probe = tempfile.mkstemp(prefix=".gnnscale-probe-", dir=existing)
    except OSError as err:
        return f"no file can be created in {existing} ({_reason(err)})"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:  # pragma: no cover - made a moment ago by this process
        pass
    return None


def check_output(path: str | os.PathLike | None, flag: str, *, folder: bool = False) -> str | None:
    """``path`` (an output file, or with ``folder`` an output folder) made absolute, checked writable.

    Args:
        path: the option's value (None: not given, nothing to check).
        flag: how the message names the option (``--save-model``, ``gnnscale partition --out``).
        folder: the output is a folder (created if missing) rather than a file.

    Raises:
        OutputError: one line naming the option, the path, what is in the way and how to fix it.
    """
    if path is None:
        return None
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise OutputError(f"{flag} expects a {'folder' if folder else 'file'} path, found {path!r}")
    given = os.fspath(path)
    full = os.path.abspath(os.path.expanduser(given))
    if folder:
        problem = f"{full} is a file" if os.path.exists(full) and not os.path.isdir(full) else _folder_problem(full)
        what = "a folder"
    else:
        if os.path.isdir(full):
            problem = f"{full} is a folder"
        elif os.path.exists(full) and not os.access(full, os.W_OK):
            problem = f"{full} exists and is read-only"
        else:
            problem = _folder_problem(os.path.dirname(full))
        what = "a file in a folder"
    if problem:
        raise OutputError(f"{flag} {given}: expected {what} that exists or can be created and that this process can "
                          f"write, found that {problem}; give another path")
    return full


def write_or_keep(write: Callable[[str], None], path: str, flag: str, what: str,
                  folders: Sequence[str | None] = ()) -> str | None:
    """``write(path)``; where that fails (an ``OSError``: a full disk, a folder removed meanwhile), the
    same ``write`` to a file of the same name in the first of ``folders``, the working folder and the
    temporary folder that takes it.

    Returns:
        None when ``path`` was written; else the one line to report: where ``what`` (``the trained
        model``) is kept instead, or that no folder took it.
    """
    try:
        write(path)
        return None
    except OSError as err:
        where = f": {err.filename}" if err.filename and os.fspath(err.filename) != path else ""
        failed = f"{flag} {path} could not be written ({_reason(err)}{where})"
    name = os.path.basename(path) or "output"
    kept, tried = keep(write, name, folders)
    if kept:
        return f"{failed}: {what} is kept in {kept} instead; move it where it belongs"
    return f"{failed}, nor in {', '.join(tried)}: {what} could not be kept"


def keep(write: Callable[[str], None], name: str, folders: Sequence[str | None] = ()) -> tuple[str | None, list[str]]:
    """``write`` to ``gnnscale-kept-<pid>-<name>`` in the first of ``folders``, the working folder and
    the temporary folder that takes it: (the path written or None, the folders tried)."""
    tried: list[str] = []
    for base in [*folders, os.getcwd(), tempfile.gettempdir()]:
        if not base or base in tried:
            continue
        tried.append(base)
        kept = os.path.join(os.path.abspath(base), f"gnnscale-kept-{os.getpid()}-{name}")
        try:
            os.makedirs(base, exist_ok=True)
            write(kept)
        except OSError:
            continue
        return kept, tried
    return None, tried
