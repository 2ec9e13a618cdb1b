"""README.md's snippets run as written, in order, on a fresh clone: CI's proof that the guide works.

Every fenced block whose language is ``bash``, ``sh`` or ``python`` is a snippet, and is run,
unless the line before its fence is ``<!-- not-run: REASON -->`` (a REASON is required: several
hosts under torchrun, an OGB download, a GPU, an install). Other fences (``text``, ``yaml``, none)
are output or file layouts and are never run.

The snippets run one after the other, as a user following the guide would, in one temporary
working folder that looks like the clone's root: the repository's top-level entries are linked
into it (``examples/``, ``benchmarks/``, ...), and ``../shared/data`` beside it is the real data
folder (``$GNNSCALE_SHARED_DATA`` or the clone's ``../shared/data``), so a snippet writes its
outputs (``parts/``, ``ckpt/``, ...) there and never into the repository, and may read what an
earlier snippet wrote.

How they run (the suite's time is tight: issue 54 item 9). The guide's first snippet (the quick
start) runs as a user types it: ``bash -euo pipefail`` in a subprocess, the installed ``gnnscale``
command, its workers spawned, the partition cache that folder's own (``$GNNSCALE_CACHE``). So do
the snippets that need a process of their own (``torchrun``, a loop that joins a process group with
``start_run``). In the others, as in docs/*.md's (tests/test_docs.py), each ``gnnscale``
command runs through ``gnnscale.cli.main`` in this process, exactly as written (the same options,
epochs and files; its 2-worker launches forked from the suite's server, which imported torch once,
instead of an interpreter and its imports per command and per worker; the partition cache the
suite's), a Python snippet through ``runpy`` as ``__main__`` (its workers import it as spawned ones
do), and any other command under ``bash -euo pipefail``. Each has a timeout (in-process: the
commands' own ``--timeout`` on every wait).
"""
from __future__ import annotations

import os
import re
import runpy
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import shared_data_dir

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
RUN_LANGS = {"bash": "bash", "sh": "bash", "python": "python"}
NOT_RUN = re.compile(r"^<!-- not-run: (?P<reason>\S.*?) -->$")
FENCE = re.compile(r"^```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
TIMEOUT_S = 300
INSTALL = "pip install torch==2.13.0 && pip install -e . && gnnscale train"
TESTS = 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q -n 3 --dist loadfile tests'


@dataclass
class Snippet:
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the reason, when marked not-run


def snippets(text: str) -> list[Snippet]:
    """Every fenced code block of ``text`` (any language), with its not-run mark if any."""
    out: list[Snippet] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group("lang")
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            raise AssertionError(f"README.md:{start + 1}: a code fence that is never closed")
        prev = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        mark = NOT_RUN.match(prev)
        out.append(Snippet(start + 1, lang, "\n".join(lines[start + 1 : j]) + "\n", mark.group("reason") if mark else None))
        i = j + 1
    return out


ALL = snippets(README.read_text())
RUNNABLE = [s for s in ALL if s.lang in RUN_LANGS and s.not_run is None]


def test_the_two_commands_are_given_verbatim_and_ci_runs_the_test_command() -> None:
    text = README.read_text()
    assert INSTALL in text and TESTS in text
    assert "python -m pytest -q -n 3 --dist loadfile tests" in (REPO / ".ci" / "run").read_text()


def test_every_code_block_says_what_it_is() -> None:
    """A fence has a language; a not-run mark sits only on a snippet (bash/sh/python)."""
    assert RUNNABLE, "README.md has no runnable snippet"
    for s in ALL:
        assert s.lang, f"README.md:{s.line}: a fence without a language (use text for output or layouts)"
        if s.not_run is not None:
            assert s.lang in RUN_LANGS, f"README.md:{s.line}: not-run marks a {s.lang} block, which never runs"


def test_readme_links_to_files_that_exist() -> None:
    """Every relative link of the README (docs/..., ARCHITECTURE.md) names a file of the repository."""
    targets = re.findall(r"\]\((?!https?://|#)([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert targets
    missing = sorted({t for t in targets if not (REPO / t).exists()})
    assert not missing, f"README.md links to missing files: {missing}"


def test_snippet_extraction_reads_marks_and_languages() -> None:
    text = "a\n```bash\necho 1\n```\n<!-- not-run: needs two hosts -->\n\n```python\nx = 1\n```\n```text\nout\n```\n"
    got = [(s.line, s.lang, s.code, s.not_run) for s in snippets(text)]
    assert got == [(2, "bash", "echo 1\n", None), (7, "python", "x = 1\n", "needs two hosts"), (10, "text", "out\n", None)]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> tuple[Path, dict]:
    """A folder shaped like a fresh clone's root, with ``../shared/data`` beside it, and the env to run in."""
    data = shared_data_dir()
    if not data.is_dir():
        pytest.skip(f"real data folder {data} not found (set GNNSCALE_SHARED_DATA)")
    top = tmp_path_factory.mktemp("readme")
    root = top / "gnnscale"
    root.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and not entry.name.endswith(".egg-info") and entry.name != "__pycache__":
            (root / entry.name).symlink_to(entry)
    (top / "shared").mkdir()
    (top / "shared" / "data").symlink_to(data)
    env = dict(os.environ, GNNSCALE_CACHE=str(top / "cache"), CI="1", PYTHONUNBUFFERED="1")
    env.pop("GNNSCALE_DATA", None)
    return root, env


def run_python(snippet, folder: Path, monkeypatch, capsys) -> None:
    """A Python snippet run in this process as ``python snippet_LINE.py`` runs it (written into
    ``folder``, ``__main__``, its path in argv[0]); an exception fails the test with its traceback.
    README's snippets and docs/*.md's (tests/test_docs.py) run so."""
    path = folder / f"snippet_{snippet.line}.py"
    path.write_text(snippet.code)
    monkeypatch.setattr(sys, "argv", [str(path)])
    capsys.readouterr()
    runpy.run_path(str(path), run_name="__main__")


def commands(code: str) -> list[str]:
    """A bash snippet's commands: comments dropped, ``\\`` continuations joined, a here-document kept
    whole with its command."""
    out: list[str] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + " " + lines[i].strip()
        i += 1
        heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
        if heredoc:
            body = []
            while i < len(lines) and lines[i].strip() != heredoc.group(1):
                body.append(lines[i])
                i += 1
            out.append("\n".join([line, *body, heredoc.group(1)]))
            i += 1
            continue
        if shlex.split(line, comments=True):
            out.append(line)
    return out


def in_a_process(snippet: Snippet) -> bool:
    """Whether the snippet runs as a user's process: the quick start (the installed command, spawned
    workers, on a fresh clone), ``torchrun``, and a Python loop that joins a process group itself."""
    return snippet is RUNNABLE[0] or "torchrun" in snippet.code or "start_run(" in snippet.code


def test_snippet_commands_split_as_bash_reads_them() -> None:
    code = "# c\ngnnscale a --x 1 \\\n    --y 2   # why\ncat > f <<'EOF'\na: 1\nEOF\nprintf 'b\\n' > g\n"
    assert commands(code) == ["gnnscale a --x 1  --y 2   # why", "cat > f <<'EOF'\na: 1\nEOF", "printf 'b\\n' > g"]
    assert [s.line for s in RUNNABLE if in_a_process(s)][:1] == [RUNNABLE[0].line]


@pytest.mark.slow
@pytest.mark.parametrize("snippet", RUNNABLE, ids=[f"README.md:{s.line}" for s in RUNNABLE])
def test_readme_snippet_runs_as_written(snippet: Snippet, clone: tuple[Path, dict], monkeypatch, capsys) -> None:
    from test_cli import cli_in_process

    root, env = clone
    where = f"README.md:{snippet.line}"
    if not in_a_process(snippet):
        monkeypatch.chdir(root)
        monkeypatch.delenv("GNNSCALE_FAULT", raising=False)
        if RUN_LANGS[snippet.lang] == "python":
            run_python(snippet, root, monkeypatch, capsys)
            return
        for command in commands(snippet.code):
            words = [] if "<<" in command else shlex.split(command, comments=True)
            if words and words[0] == "gnnscale":
                done = cli_in_process(*words[1:])
            else:
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=root, env=env,
                                      capture_output=True, text=True, timeout=TIMEOUT_S)
            assert done.returncode == 0, (f"{where}: `{command}` exited {done.returncode}:\n--- stdout\n"
                                          f"{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}")
        return
    if RUN_LANGS[snippet.lang] == "python":
        path = root / f"snippet_{snippet.line}.py"
        path.write_text(snippet.code)
        cmd = [sys.executable, path.name]
    else:
        cmd = ["bash", "-euo", "pipefail", "-c", snippet.code]
    try:
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        raise AssertionError(f"{where}: still running after {TIMEOUT_S} s:\n{snippet.code}") from err
    assert done.returncode == 0, (
        f"{where} exited {done.returncode}:\n{snippet.code}\n--- stdout\n{done.stdout[-4000:]}"
        f"\n--- stderr\n{done.stderr[-4000:]}"
    )
