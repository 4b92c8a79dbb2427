"""The README's "Test your own gateway", followed literally with the reference gateway as the
user's gateway: its commands are taken from README.md (so the section cannot drift), each run
as a separate process as a user runs it, on the ports the section names."""

from __future__ import annotations

import re
import shlex
import socket
from pathlib import Path

import pytest
from parity_process import command_line, running, the_documented_ports

from responses_parity.harness.engine import child_process

README = Path(__file__).resolve().parents[2] / "README.md"
SERVED_PORTS = range(8642, 8647)
"""Where `parity serve` listens by default: the upstream, one port per MCP fixture, the search fixture."""


def section() -> str:
    text = README.read_text()
    start = text.index("## Test your own gateway\n")
    return text[start:text.index("\n## ", start)]


def shell_commands(text: str) -> list[str]:
    """The commands of the `sh` blocks, comments left out."""
    blocks = re.findall(r"^ *```sh\n(.*?)^ *```", text, re.MULTILINE | re.DOTALL)
    return [shlex.join(shlex.split(line, comments=True)) for block in blocks for line in block.splitlines()
            if shlex.split(line, comments=True)]


def printed_settings(text: str) -> str:
    """The section's picture of what `parity serve` prints (its `text` block, dedented)."""
    block = re.search(r"^( *)```text\n(.*?)^ *```", text, re.MULTILINE | re.DOTALL)
    assert block is not None, "the section shows no output of `parity serve`"
    return "".join(line.removeprefix(block[1]) for line in block[2].splitlines(keepends=True))


def busy(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_readme_section_gets_no_failure_from_the_reference_gateway(tmp_path: Path) -> None:
    commands = shell_commands(section())
    serve = next(line for line in commands if line == "parity serve")
    gateway = next(line for line in commands if line.startswith("parity serve reference "))
    run = next(line for line in commands if line.startswith("parity run --target "))
    gateway_port = int(re.search(r"--target http://127\.0\.0\.1:(\d+)", run)[1])
    with the_documented_ports(), running(tmp_path) as start:
        if taken := [port for port in (*SERVED_PORTS, gateway_port) if busy(port)]:
            pytest.skip(f"the README's commands use ports {SERVED_PORTS[0]}-{SERVED_PORTS[-1]} and {gateway_port}, "
                        f"and something listens on {taken}")
        fixtures = start(command_line(serve), "serve", cwd=tmp_path)
        fixtures.wait_for(r"^serving until Ctrl-C$")
        assert fixtures.output() == printed_settings(section())
        settings = fixtures.output().split("reference gateway settings", 1)[1].splitlines()[1:]
        (tmp_path / "gateway.yaml").write_text("".join(f"{line.strip()}\n" for line in settings
                                                       if line.startswith("  ")))
        start(command_line(gateway), "gateway", cwd=tmp_path).wait_for(r"reference gateway listening on")
        ran = child_process.run(command_line(run), cwd=tmp_path, capture_output=True, text=True, timeout=600,
                                check=False)
    summary = ran.stdout.strip().splitlines()[-1]
    report = tmp_path / "reports" / "latest" / "report.md"  # says what failed, the console's end may not
    assert re.match(r"\d+ passed, 0 failed, 0 could not run, \d+ unsupported;", summary), \
        report.read_text() if report.exists() else ran.stdout[-3000:]
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
    assert (tmp_path / "reports" / "latest" / "report.md").exists()
