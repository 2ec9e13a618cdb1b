"""docs/*.md's snippets run as written, as the README's do (tests/test_readme.py; issue 54 item 11).

The same rules: every fenced block whose language is ``bash``, ``sh`` or ``python`` runs unless the
line before its fence is ``<!-- not-run: REASON -->`` (a REASON is required: several hosts, a GPU, a
download, an outline of signatures). A page's snippets run in order, one page per test, in a folder
shaped like a fresh clone's root with ``../shared/data`` beside it (a page may read what its earlier
snippets wrote, never another page's).

Kept cheap (the suite's time is tight), without changing what a snippet does: every ``gnnscale``
command runs in this process (``gnnscale.cli.main``, its workers forked from the suite's server)
and a Python snippet through ``runpy``, with training cut to one epoch (two for more than 50, so
that a resume still trains; ``epochs=1`` in Python: the commands' options, modes and files are what
is checked, not the accuracy) and the partition cache in the test's folder (``--cache-dir`` /
``cache_dir=``: nothing written into the user's home). A command other than ``gnnscale`` (a here-document, ``torchrun``) runs under ``bash
-euo pipefail``; a ``-m gnnscale train`` inside it gets the same epochs.
"""
from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import shared_data_dir
from test_cli import cli_in_process
from test_readme import RUN_LANGS, commands, run_python, snippets

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").glob("*.md"))
BLOCKS = {p.name: snippets(p.read_text()) for p in DOCS}
PAGES = [name for name, blocks in BLOCKS.items() if any(b.lang in RUN_LANGS and b.not_run is None for b in blocks)]
TIMEOUT_S = 300


def test_every_docs_block_says_what_it_is() -> None:
    """A fence has a language; a not-run mark sits only on a snippet and gives its reason."""
    for name, blocks in BLOCKS.items():
        for s in blocks:
            assert s.lang, f"docs/{name}:{s.line}: a fence without a language (use text for output or layouts)"
            if s.not_run is not None:
                assert s.lang in RUN_LANGS, f"docs/{name}:{s.line}: not-run marks a {s.lang} block, which never runs"
    assert len(PAGES) >= 4, PAGES


def cheap(args: list[str], cache: str) -> list[str]:
    """``gnnscale train`` args with 1 epoch where 50 or fewer are given (or none), else 2 (so that a resume
    from epoch 50 to 100 still has an epoch to train), and the test's partition cache (``--dataset``
    runs)."""
    if not args or args[0] != "train":
        return args
    out, skip, epochs = [], False, 50
    for a in args:
        if skip:
            skip, epochs = False, int(a)
            continue
        if a == "--epochs":
            skip = True
            continue
        if a.startswith("--epochs="):
            epochs = int(a.split("=", 1)[1])
            continue
        out.append(a)
    out += ["--epochs", "1" if epochs <= 50 else "2"]
    if any(a == "--dataset" or a.startswith("--dataset=") for a in args) and "--cache-dir" not in args:
        out += ["--cache-dir", cache]
    return out


def run_bash(command: str, root: Path, cache: str) -> subprocess.CompletedProcess:
    words = shlex.split(command, comments=True) if "<<" not in command else []
    if "-m" in words and words[words.index("-m") + 1:words.index("-m") + 3] == ["gnnscale", "train"]:
        at = words.index("-m") + 2
        command = shlex.join(words[:at] + cheap(words[at:], cache))
    env = dict(os.environ, GNNSCALE_CACHE=cache, CI="1")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=root, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = shared_data_dir()
    if not data.is_dir():
        pytest.skip(f"real data folder {data} not found (set GNNSCALE_SHARED_DATA)")
    root = tmp_path / "gnnscale"
    root.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and not entry.name.endswith(".egg-info") and entry.name != "__pycache__":
            (root / entry.name).symlink_to(entry)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "data").symlink_to(data)
    monkeypatch.chdir(root)
    monkeypatch.delenv("GNNSCALE_DATA", raising=False)
    monkeypatch.delenv("GNNSCALE_FAULT", raising=False)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_docs_snippets_run_as_written(page: str, clone: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import gnnscale

    cache = str(clone.parent / "cache")
    real_train = gnnscale.train

    def train(*args, **kw):  # a Python snippet's training: one epoch, the test's cache
        kw["epochs"] = 1
        if args or kw.get("dataset") is not None:
            kw.setdefault("cache_dir", cache)
        return real_train(*args, **kw)

    monkeypatch.setattr(gnnscale, "train", train)
    for s in BLOCKS[page]:
        if s.lang not in RUN_LANGS or s.not_run is not None:
            continue
        where = f"docs/{page}:{s.line}"
        if RUN_LANGS[s.lang] == "python":
            run_python(s, clone, monkeypatch, capsys)
            continue
        for command in commands(s.code):
            words = [] if "<<" in command else shlex.split(command, comments=True)
            if words and words[0] == "gnnscale":
                r = cli_in_process(*cheap(words[1:], cache))
            else:
                r = run_bash(command, clone, cache)
            assert r.returncode == 0, f"{where}: `{command}` exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
