"""What every command shares: the consoles, the exit codes, and output that passes through a
run's redactor."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout

from rich.console import Console
from rich.control import strip_control_codes
from rich.markup import escape

from ..wire.redaction import RedactedStream, Redactor

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
"""Lines are never wrapped: piped to a file they stay whole (a terminal folds them itself);
tables still fit the terminal's width, or 80 columns when there is none."""


def say(line: str) -> None:
    """One line on standard output, as it is (no markup), without the control codes `out`
    would strip. Written straight to the stream, not rendered: `parity proxy` says a line per
    exchange, at its traffic's rate, and rich's rendering cost the relay a sixth of its time."""
    sys.stdout.write(strip_control_codes(line) + "\n")
    sys.stdout.flush()


def for_people(as_json: bool) -> Callable[[str], None]:
    """How a command with `--json` says a line for people: like `say`, or on standard error when
    `as_json`, so that standard output is all JSON from its first line (`... --json | jq`)."""
    return (lambda line: err.print(line, soft_wrap=True, markup=False)) if as_json else say


def warning(message: str) -> None:
    """`warning <message>` on standard error."""
    err.print(f"[yellow]warning[/yellow] {escape(message)}", soft_wrap=True)


def error(message: str) -> None:
    """`error <message>` on standard error."""
    err.print(f"[red]error[/red] {escape(message)}", soft_wrap=True)


@contextmanager
def redacted_consoles() -> Iterator[Redactor]:
    """A new redactor for a run; until the block ends, everything written to standard output
    and error passes through it: `out` and `err`, and the log lines of the servers the run
    starts (uvicorn, the reference gateway)."""
    redactor = Redactor()
    with redirect_stdout(RedactedStream(sys.stdout, redactor)), redirect_stderr(RedactedStream(sys.stderr, redactor)):
        yield redactor
