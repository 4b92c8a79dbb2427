"""Every command the documentation marks as runnable is run as a user runs it (a separate
process, no shell, the reference gateway standing in for the user's gateway), and what the
documentation shows it printing is what it prints. The pages are README.md and docs/**/*.md;
the convention is an HTML comment (invisible on GitHub and on the site) on the line before a
fenced block:

- `<!-- runnable -->` before an `sh` block: each line is a command (`a && b` is two), run to its
  end in order, in a folder of the page's own; each must exit 0 (`<!-- runnable: exits 2 -->`:
  each must exit 2). `<!-- runnable: in the background until "TEXT" -->`: each keeps running
  until the page is done, and the page goes on once it printed TEXT. A `pip install` is taken as
  done: this environment has the tool.
- `<!-- output -->` before a `text` block: what the last command of the runnable block above it
  printed, standard output and error as a terminal shows them (a background command's: until it
  printed TEXT). A line `...` stands for any lines; durations, the page's folder and ephemeral
  ports may differ, and the repository's folder shows as `<repository>`.
- `<!-- file: NAME -->` before any block: its text is written to NAME in the page's folder.

Commands use the fixed ports the documentation names (`the_documented_ports`); a page whose
ports something else listens on is skipped, saying so.

`PARITY_REFRESH_DOCS=1` rewrites each output block that differs with what its command prints now
(as many lines before the first `...` and after the last as the block shows), then fails saying
which: review the diff, then run again."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from parity_process import command_line, running, the_documented_ports

from responses_parity.harness.engine import child_process

REPOSITORY = Path(__file__).resolve().parents[2]
PAGES = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
DOCUMENTED_PORTS = (*range(8642, 8647), 8080)
"""Where `parity serve` listens by default (the upstream, one port per MCP fixture, the search
fixture) and where the documented gateway does."""
COMMAND_TIMEOUT_S = 600.0
MARKER = re.compile(r"^(?P<indent> *)<!-- (?P<kind>runnable|output|file)(?::\s*(?P<argument>.*?))? -->\n"
                    r"(?P=indent)```(?P<language>\S*)\n(?P<body>.*?)^(?P=indent)```$", re.MULTILINE | re.DOTALL)
BACKGROUND = re.compile(r'in the background until "(?P<ready>[^"]+)"')
ELIDED = "..."


@dataclass(frozen=True)
class Block:
    """A marked block of a page: its marker, its text (dedented) and where that text is in the page."""

    kind: str
    argument: str
    text: str
    span: tuple[int, int]
    indent: str


def blocks(page: Path) -> list[Block]:
    return [Block(match["kind"], match["argument"] or "",
                  "".join(line.removeprefix(match["indent"]) for line in match["body"].splitlines(keepends=True)),
                  match.span("body"), match["indent"])
            for match in MARKER.finditer(page.read_text())]


def commands(block: Block) -> list[str]:
    """The commands of a runnable block, comments and installs left out."""
    found = []
    for line in block.text.splitlines():
        command: list[str] = []
        for word in [*shlex.split(line, comments=True), "&&"]:
            if word != "&&":
                command.append(word)
            elif command:
                found += [] if command[:2] == ["pip", "install"] else [shlex.join(command)]
                command = []
    return found


def normalised(text: str, folder: Path) -> str:
    text = text.replace(str(folder), "<folder>").replace(str(REPOSITORY), "<repository>")
    text = re.sub(r"\b\d+(?:\.\d+)?\s?(?:ms|s)\b", "<duration>", text)
    return re.sub(r"(127\.0\.0\.1|localhost):\d{5}\b", r"\1:<port>", text)


def shows(shown: str, printed: str) -> bool:
    """Whether `printed` is what `shown` shows, `...` lines standing for any lines."""
    pattern = "".join(r"(?:.*\n)*?" if line == ELIDED else re.escape(line) + r"\n" for line in shown.splitlines())
    return re.fullmatch(pattern, printed.rstrip("\n") + "\n") is not None


def refreshed(shown: str, printed: str) -> str:
    """`printed` cut as `shown` is: its first and last lines, as many as `shown` keeps around `...`."""
    lines, kept = printed.rstrip("\n").splitlines(), shown.splitlines()
    if ELIDED not in kept:
        return printed.rstrip("\n") + "\n"
    head, tail = kept.index(ELIDED), kept[::-1].index(ELIDED)
    return "\n".join([*lines[:head], ELIDED, *(lines[-tail:] if tail else [])]) + "\n"


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


RUNNABLE_PAGES = [page for page in PAGES if any(block.kind == "runnable" for block in blocks(page))]


def test_the_pages_mark_commands_as_runnable() -> None:
    """The convention is in use where it matters (a typo in a marker would silently test nothing)."""
    names = {page.relative_to(REPOSITORY).as_posix() for page in RUNNABLE_PAGES}
    assert {"README.md", "docs/guides/own-gateway.md", "docs/troubleshooting.md"} <= names
    for page in PAGES:
        for line in page.read_text().splitlines():
            if line.strip().startswith("<!-- ") and re.search(r"runnable|output|file", line):
                assert re.match(r" *<!-- (runnable|output|file)(: .+)? -->$", line), f"{page.name}: {line!r}"


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=lambda page: page.relative_to(REPOSITORY).as_posix())
def test_the_page_s_commands_print_what_it_shows(page: Path, tmp_path: Path) -> None:
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "100"}
    last: tuple[str, str] | None = None
    differing: list[tuple[Block, str, str]] = []
    (tmp_path / "logs").mkdir()
    with the_documented_ports(), running(tmp_path / "logs") as start:
        if taken := [port for port in DOCUMENTED_PORTS if listening(port)]:
            pytest.skip(f"the documentation's commands use ports {DOCUMENTED_PORTS}, and something listens on {taken}")
        for index, block in enumerate(blocks(page)):
            if block.kind == "file":
                (tmp_path / block.argument).write_text(block.text)
            elif block.kind == "output":
                assert last is not None, f"{page.name}: an output block with no runnable command above it"
                command, printed = last
                if not shows(normalised(block.text, tmp_path), normalised(printed, tmp_path)):
                    differing.append((block, command, printed))
            elif background := BACKGROUND.fullmatch(block.argument):
                for number, command in enumerate(commands(block)):
                    started = start(command_line(command), f"{index}-{number}", cwd=tmp_path, env=env)
                    last = command, started.wait_for(re.escape(background["ready"])).string
            else:
                expected = int(re.fullmatch(r"exits (\d+)", block.argument)[1]) if block.argument else 0
                for command in commands(block):
                    ran = child_process.run(command_line(command), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT_S)
                    assert ran.returncode == expected, f"`{command}` exited {ran.returncode}:\n{ran.stdout[-4000:]}"
                    last = command, ran.stdout
    if differing and os.environ.get("PARITY_REFRESH_DOCS") == "1":
        text = page.read_text()
        for block, _, printed in sorted(differing, key=lambda item: -item[0].span[0]):
            new = "".join(f"{block.indent}{line}" if line.strip() else line
                          for line in refreshed(block.text, printed).splitlines(keepends=True))
            text = text[:block.span[0]] + new + text[block.span[1]:]
        page.write_text(text)
        pytest.fail(f"{page.name}: rewrote the output of {', '.join(f'`{c}`' for _, c, _ in differing)}; review it")
    if differing:
        pytest.fail("\n\n".join(f"`{command}` printed:\n{printed}\n--- where {page.name} shows:\n{block.text}"
                                  for block, command, printed in differing) + "\n(PARITY_REFRESH_DOCS=1 rewrites it)")
