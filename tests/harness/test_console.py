"""What the long commands print, each run as a user runs it (a process of its own, its output
piped as in CI): a green `parity run` against a gateway of one's own is a few lines, not a line
per scenario run; `run`, `matrix` and `probe` print their own lines and their progress and
never a server's log line (uvicorn's, the gateway's, a form parser's: test_serve.py and
test_probe.py hold each server to its level, these the whole command); and the progress helper
they share says a bounded number of lines, or a live bar on a terminal, always on standard
error."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from parity_process import PARITY, running
from rich.console import Console

from responses_parity.harness.commands import progress
from responses_parity.harness.engine import child_process

LISTENING = r"reference gateway listening on (?P<url>http://\S+)"
RUN_TIMEOUT_S = 600
TALLY = re.compile(r"^\d+ passed, 0 failed, 0 could not run, (?P<unsupported>\d+) unsupported; .*; report: ")


@pytest.fixture(scope="module")
def own_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The reference gateway as a gateway of one's own, as the README's "Test your own gateway"
    starts it (`parity serve`, then `parity serve reference --config`, each a process, on free
    ports): its URL and the served upstream's."""
    folder = tmp_path_factory.mktemp("own-gateway")
    with running(folder) as start:
        serve = start([str(PARITY), "serve", "--port", "0", "--json"], "serve")
        served = json.loads(serve.wait_for(r"^\{.*\}$").group(0))
        (folder / "gateway.yaml").write_text(yaml.safe_dump(served["reference_config"]))
        gateway = start([str(PARITY), "serve", "reference", "--port", "0", "--config", str(folder / "gateway.yaml")],
                        "gateway").wait_for(LISTENING)["url"]
        yield gateway, served["upstream"]


def parity(*args: str, cwd: Path) -> tuple[int, list[str], list[str]]:
    """`parity args` run to its end, its output piped: exit code, standard output's and error's lines."""
    ran = child_process.run([str(PARITY), *args], cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                            check=False)
    return ran.returncode, ran.stdout.splitlines(), ran.stderr.splitlines()


def unknown(lines: list[str], *shapes: str) -> list[str]:
    """The lines none of `shapes` (regular expressions) matches at their start: what the command
    does not print itself, such as a server's log line."""
    return [line for line in lines if not any(re.match(shape, line) for shape in shapes)]


def test_a_green_run_against_a_gateway_of_ones_own_prints_at_most_15_lines(
        own_gateway: tuple[str, str], tmp_path: Path) -> None:
    gateway, upstream = own_gateway
    code, stdout, stderr = parity("run", "--target", gateway, "--upstream", upstream, cwd=tmp_path)
    assert code == 0, "\n".join(stdout + stderr)
    assert len(stdout + stderr) <= 15, "\n".join(stdout + stderr)
    assert re.match(rf"Running \d+ scenario run\(s\) against {re.escape(gateway)} \.\.\.$", stdout[0]), stdout
    tally = TALLY.match(stdout[-1])
    assert tally is not None, stdout
    reasons = [line for line in stdout if line.startswith("unsupported [")]
    assert len(reasons) == len(set(reasons)) >= 1, "each reason once, with its count"
    assert sum(int(re.match(r"unsupported \[(\d+)\]", line)[1]) for line in reasons) == int(tally["unsupported"])
    assert unknown(stdout[1:-1], r"unsupported \[\d+\] ") == []
    assert unknown(stderr, r"scenario runs: \d+/\d+ \(\d+%\)$") == [], "no server log line, only progress"


def test_a_matrix_prints_no_server_log_line(tmp_path: Path) -> None:
    """Every scenario against the embedded reference gateway: its servers run in a child process
    (60 runs and more), each one's start configures logging."""
    code, stdout, stderr = parity("matrix", "--targets", "reference", "--output", "m/matrix.md", "--report-dir",
                                  "m/runs", cwd=tmp_path)
    assert code == 0, "\n".join(stdout + stderr)
    assert unknown(stdout, r"Running \d+ scenario run\(s\) against each of reference \.\.\.$", r"== reference: ",
                   r"reference: parity \d+/\d+$", r"matrix: m/matrix\.md and m/matrix\.html$") == []
    assert len(stdout) == 4
    assert unknown(stderr, r"scenario runs: \d+/\d+ \(\d+%\)$") == []


def test_a_matrix_of_a_gateway_of_ones_own_uses_the_upstream_it_is_pointed_at(own_gateway: tuple[str, str],
                                                                              tmp_path: Path) -> None:
    """Its scripted upstream on a port of its own, as `parity serve --port` puts it: without
    `--upstream`, the matrix would serve another one, which the gateway never asks."""
    gateway, upstream = own_gateway
    code, stdout, stderr = parity("matrix", "--targets", gateway, "--upstream", upstream, "-s", "text-basic",
                                  "--output", "m/matrix.md", "--report-dir", "m/runs", cwd=tmp_path)
    assert code == 0, "\n".join(stdout + stderr)
    assert f"{gateway}: parity 2/2" in stdout, stdout


def test_a_probe_run_prints_no_server_log_line(tmp_path: Path) -> None:
    """Probes on the request body (the broken uploads among them: a form parser logs them),
    temperature and tools, against the embedded reference gateway in this process."""
    code, stdout, stderr = parity("probe", "--field", "body", "--field", "temperature", "--field", "tools", "--json",
                                  cwd=tmp_path)
    document = json.loads("\n".join(stdout))
    assert code == (1 if document["diverging"] else 0)
    assert unknown(stderr, r"warning --target reference compared with --against reference ", r"sending \d+ probes to ",
                   r"probes to reference: \d+/\d+ \(\d+%\)$", rf"{document['probes']} probes \(",
                   r"Expectations: ", r"  \[[a-z ]+\] ") == []
    assert sum(line.startswith("  [") for line in stderr) == len(document["groups"])


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The progress helper's clock, moved by the test."""
    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    return now


def test_without_a_terminal_progress_is_a_line_at_most_every_few_seconds_and_tenth_of_the_work(
        clock: list[float], capsys: pytest.CaptureFixture[str]) -> None:
    with progress.Progress(live=False) as shown:
        for done in range(1, 1001):
            clock[0] += 0.1  # 100 s in all
            shown.update("units", done, 1000)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == ""
    told = [int(re.fullmatch(r"units: (\d+)/1000 \(\d+%\)", line)[1]) for line in lines]
    assert 5 <= len(told) <= 9
    assert all(later - earlier >= 100 for earlier, later in zip([0, *told], told, strict=False))
    assert 1000 not in told, "the end is the command's own line"


def test_on_a_terminal_progress_is_a_live_bar_on_standard_error_gone_at_the_end(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    terminal = io.StringIO()
    monkeypatch.setattr(progress, "err", Console(file=terminal, force_terminal=True, force_interactive=True, width=80))
    with progress.Progress() as shown:
        assert shown.live
        shown.update("units", 3, 10)
        shown.update("units", 10, 10)
    assert capsys.readouterr().out == ""
    drawn = terminal.getvalue()
    assert "units" in drawn and "10/10" in drawn
    assert drawn.endswith("\x1b[1A\x1b[2K"), "the bar's line is erased when the work ends"
