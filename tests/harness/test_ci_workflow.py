"""The CI workflow (`.github/workflows/parity.yml`) is the one the README shows, has the shape
GitHub Actions accepts (checked against the workflow schema that check-jsonschema ships, never
fetched), and its `gateway` job works as written: its `run:` steps are run literally, in
order, each in a shell of its own as a runner runs them, in a copy of the checkout, and the
scenarios run against the reference gateway started as a separate process get no failure."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from parity_process import the_documented_ports

from responses_parity.harness.engine.child_process import ChildProcess
from responses_parity.harness.scenario.loader import parse_yaml

REPOSITORY = Path(__file__).resolve().parents[2]
WORKFLOW = REPOSITORY / ".github" / "workflows" / "parity.yml"
README = REPOSITORY / "README.md"
STEP_TIMEOUT_S = 600.0
STOP_GRACE_S = 10.0
NOT_COPIED = (".git", ".venv", "reports", "logs", "*.egg-info", "__pycache__", ".pytest_cache", "*.sqlite3*")
"""What a fresh checkout does not have: the local environment and earlier runs' output."""


def workflow() -> dict[str, Any]:
    return parse_yaml(WORKFLOW.read_text())


def steps(job: str) -> list[dict[str, Any]]:
    return workflow()["jobs"][job]["steps"]


def test_the_readme_shows_the_workflow_file_as_it_is() -> None:
    blocks = re.findall(r"^```yaml\n(.*?)^```$", README.read_text(), re.MULTILINE | re.DOTALL)
    shown = [block for block in blocks if block.startswith("# .github/workflows/parity.yml\n")]
    assert shown == [WORKFLOW.read_text()]


def _workflow_schema() -> dict[str, Any]:
    """GitHub's workflow schema, as check-jsonschema ships it."""
    return json.loads((resources.files("check_jsonschema.builtin_schemas.vendor") / "github-workflows.json")
                      .read_text())


def test_the_workflow_is_one_github_actions_accepts() -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft7Validator(_workflow_schema()).iter_errors(workflow())]
    assert errors == []
    for name, job in workflow()["jobs"].items():
        for index, step in enumerate(job["steps"]):
            assert ("uses" in step) != ("run" in step), f"jobs.{name}.steps[{index}] needs `uses` or `run`, not both"


def test_every_upload_runs_when_the_job_failed_too() -> None:
    uploads = [(name, step) for name, job in workflow()["jobs"].items() for step in job["steps"]
               if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert {name for name, _ in uploads} == set(workflow()["jobs"])
    assert all(step.get("if") == "always()" for _, step in uploads), uploads


def test_the_tool_is_installed_from_the_repository_until_it_is_published() -> None:
    installs = [step["run"] for job in workflow()["jobs"].values() for step in job["steps"]
                if "pip install" in step.get("run", "")]
    assert installs and all(re.match(r"pip install \.(\s|$)", line) for line in installs), installs


def test_the_screenshots_of_the_browser_test_are_uploaded() -> None:
    uploaded = [step["with"]["path"] for step in steps("tests") if "upload-artifact" in step.get("uses", "")]
    assert uploaded == ["reports/latest/screenshots"]
    assert any(step.get("run") == "bash .ci/run" for step in steps("tests"))


def port_taken(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the repository as `actions/checkout` leaves it."""
    copy = tmp_path / "checkout"
    shutil.copytree(REPOSITORY, copy, ignore=shutil.ignore_patterns(*NOT_COPIED))
    return copy


@pytest.fixture
def steps_run() -> Iterator[list[ChildProcess]]:
    """The steps run, each a `ChildProcess` (a background server stays in its step's process
    group); each group is stopped at the end: SIGTERM, then SIGKILL after a grace period. The
    job's fixed ports are this test's until then (`the_documented_ports`)."""
    processes: list[ChildProcess] = []
    with the_documented_ports():
        yield processes
        for process in processes:
            process.stop()


def test_the_gateway_job_runs_as_written_and_gets_no_failure(checkout: Path, steps_run: list[ChildProcess]) -> None:
    job = steps("gateway")
    ports = sorted({int(port) for step in job for port in re.findall(r"127\.0\.0\.1:(\d+)", step.get("run", ""))})
    if taken := [port for port in ports if port_taken(port)]:
        pytest.skip(f"the gateway job uses ports {ports}, and something listens on {taken}")
    installs = [step["run"] for step in job if "pip install" in step.get("run", "")]
    assert installs == ["pip install ."], "only the install step is left out: this environment has the tool"
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    uploaded: list[str] = []
    outputs: list[str] = []
    for index, step in enumerate(job):
        if "uses" in step:
            uploaded += step.get("with", {}).get("path", "").split()
            continue
        if step["run"] in installs:
            continue
        script = checkout.parent / f"step-{index}.sh"
        script.write_text(step["run"] + "\n")
        process = ChildProcess(["bash", "-e", str(script)], cwd=checkout, env=env | step.get("env", {}),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               grace_s=STOP_GRACE_S)
        steps_run.append(process)
        output, _ = process.communicate(timeout=STEP_TIMEOUT_S)
        logs = "".join(f"\n--- {log.name}\n{log.read_text()}" for log in sorted((checkout / "logs").glob("*.log")))
        assert process.returncode == 0, f"step {index} `{step['run']}` failed:\n{output}{logs}"
        outputs.append(output)
    summary = outputs[-1].strip().splitlines()[-1]
    assert re.match(r"\d+ passed, 0 failed, 0 could not run, \d+ unsupported;", summary), outputs[-1][-3000:]
    results = json.loads((checkout / "reports" / "latest" / "results.json").read_text())
    outcomes = {(r["scenario"], r["mode"]): r["outcome"] for r in results["results"]}
    assert "fail" not in outcomes.values() and list(outcomes.values()).count("pass") >= 80
    assert outcomes[("mcp-call", "stream")] == "pass", "the gateway reaches the MCP fixtures on loopback"
    assert uploaded == ["reports/latest", "logs"]
    assert (checkout / "reports" / "latest" / "report.html").is_file()
    assert "reference gateway listening on http://127.0.0.1:8080" in (checkout / "logs" / "gateway.log").read_text()


def test_the_readme_s_split_run_is_a_workflow_github_actions_accepts_that_merges_every_shard() -> None:
    blocks = re.findall(r"^```yaml\n(.*?)^```$", README.read_text(), re.MULTILINE | re.DOTALL)
    [split] = [parse_yaml(block) for block in blocks if block.startswith("# a split run")]
    split = {"name": "split", "on": "push"} | split  # the jobs of a workflow, as the README says
    assert [error.message for error in jsonschema.Draft7Validator(_workflow_schema()).iter_errors(split)] == []
    shards = split["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    runs = [step["run"] for job in split["jobs"].values() for step in job["steps"] if "run" in step]
    assert f"--shard ${{{{ matrix.shard }}}}/{len(shards)}" in " ".join(runs)
    assert split["jobs"]["report"]["needs"] == "shard" and any(run.startswith("parity merge reports/shard-*")
                                                                for run in runs)
