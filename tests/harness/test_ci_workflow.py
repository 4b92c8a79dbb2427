"""The CI workflow (`.github/workflows/parity.yml`) is the one the CI guide (docs/guides/ci.md) shows, has the shape
GitHub Actions accepts (checked against the workflow schema that check-jsonschema ships, never
fetched), and its `gateway` job works as written: its `run:` steps are run literally, in
order, each in a shell of its own as a runner runs them, in a copy of the checkout, and the
scenarios run against the reference gateway started as a separate process get no failure.
The guide's workflows that split a run and a matrix (gateway x shard) over machines are of
that shape too, and run here job by job, their artifacts passed on as GitHub passes them: the
merged matrix is the unsplit one."""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import shlex
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
from click.testing import CliRunner
from parity_process import the_documented_ports

from responses_parity.harness.cli import main
from responses_parity.harness.engine.child_process import ChildProcess
from responses_parity.harness.scenario.loader import parse_yaml

REPOSITORY = Path(__file__).resolve().parents[2]
WORKFLOW = REPOSITORY / ".github" / "workflows" / "parity.yml"
CI_GUIDE = REPOSITORY / "docs" / "guides" / "ci.md"
STEP_TIMEOUT_S = 600.0
STOP_GRACE_S = 10.0
NOT_COPIED = (".git", ".venv", "reports", "logs", "site", "*.egg-info", "__pycache__", ".pytest_cache", "*.sqlite3*")
"""What a fresh checkout does not have: the local environment and earlier runs' output."""


def workflow() -> dict[str, Any]:
    return parse_yaml(WORKFLOW.read_text())


def steps(job: str) -> list[dict[str, Any]]:
    return workflow()["jobs"][job]["steps"]


def test_the_ci_guide_shows_the_workflow_file_as_it_is() -> None:
    blocks = re.findall(r"^```yaml\n(.*?)^```$", CI_GUIDE.read_text(), re.MULTILINE | re.DOTALL)
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


def test_the_screenshots_of_the_browser_test_and_the_docs_site_are_uploaded() -> None:
    uploaded = [step["with"]["path"] for step in steps("tests") if "upload-artifact" in step.get("uses", "")]
    assert uploaded == ["reports/latest/screenshots", "site"]
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


SPLIT_WORKFLOWS = ("# a split run", "# a split matrix")
"""How the CI guide's workflows that split over machines begin: the jobs of a workflow each."""


def guide_workflow(title: str) -> dict[str, Any]:
    """The CI guide's workflow that begins with `title`, made a workflow of its jobs, as the guide says."""
    blocks = re.findall(r"^```yaml\n(.*?)^```$", CI_GUIDE.read_text(), re.MULTILINE | re.DOTALL)
    [jobs] = [parse_yaml(block) for block in blocks if block.startswith(title)]
    return {"name": "split", "on": "push"} | jobs


@pytest.mark.parametrize("title", SPLIT_WORKFLOWS)
def test_the_guide_s_split_workflows_are_ones_github_actions_accepts_that_merge_every_shard(title: str) -> None:
    split = guide_workflow(title)
    assert [error.message for error in jsonschema.Draft7Validator(_workflow_schema()).iter_errors(split)] == []
    [(name, job)] = [(name, job) for name, job in split["jobs"].items() if "strategy" in job]
    shards = job["strategy"]["matrix"]["shard"]
    runs = [step["run"] for job in split["jobs"].values() for step in job["steps"] if "run" in step]
    assert f"--shard ${{{{ matrix.shard }}}}/{len(shards)}" in " ".join(runs)
    assert split["jobs"]["report"]["needs"] == name and any(run.startswith("parity merge ") for run in runs)


def with_values(step: dict[str, Any], context: dict[str, str]) -> dict[str, Any]:
    """A step with each `${{ matrix.NAME }}` in it replaced by its value in `context`."""
    return json.loads(re.sub(r"\$\{\{ matrix\.(\w+) \}\}", lambda match: context[match[1]], json.dumps(step)))


def run_here(workflow: dict[str, Any], root: Path, monkeypatch: pytest.MonkeyPatch,
             extra: dict[str, list[str]]) -> dict[str, list[int]]:
    """Run a workflow's jobs here, in the order written (each after those it needs), every
    combination of a job's matrix in a folder of its own (a runner of its own), `${{ matrix.NAME }}`
    replaced by its value. Its `parity` steps run in this process, globs expanded as bash expands
    them, with `extra` words after each command's own (by command); artifacts go to a folder and
    come back as GitHub keeps them (the files under the path uploaded; each artifact downloaded
    to PATH/NAME); checkout, Python and the install are this environment's. Returns each job's
    `parity` exit codes."""
    store, codes = root / "artifacts", {}
    for name, job in workflow["jobs"].items():
        axes = job.get("strategy", {}).get("matrix", {})
        for values in itertools.product(*axes.values()):
            context = dict(zip(axes, map(str, values), strict=True))
            runner = root / "-".join([name, *context.values()])
            runner.mkdir(parents=True)
            monkeypatch.chdir(runner)
            for written in job["steps"]:
                step = with_values(written, context)
                uses, given = step.get("uses", ""), step.get("with", {})
                if uses.startswith("actions/upload-artifact@"):
                    shutil.copytree(runner / given["path"], store / given["name"])
                elif uses.startswith("actions/download-artifact@"):
                    for artifact in sorted(store.glob(given["pattern"])):
                        shutil.copytree(artifact, runner / given["path"] / artifact.name)
                elif step.get("run", "").startswith("parity "):
                    words = [found for word in shlex.split(step["run"])[1:]
                             for found in (sorted(glob.glob(word)) if "*" in word else [word])]
                    result = CliRunner().invoke(main, [*words, *extra.get(words[0], [])])
                    assert result.exit_code in (0, 1), f"{step['run']}: {result.output}"
                    codes.setdefault(name, []).append(result.exit_code)
    return codes


SCENARIOS = ["-s", "text-basic", "-s", "function-call", "-s", "background-poll"]
"""A few scenarios, for the CI guide's workflows run here (one the child gateway's profile lacks)."""


def test_the_guide_s_split_run_runs_here_and_merges_every_shard(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    codes = run_here(guide_workflow("# a split run"), tmp_path, monkeypatch, {"run": SCENARIOS})
    assert codes == {"shard": [0, 0, 0, 0], "report": [0]}
    merged = json.loads((tmp_path / "report" / "reports" / "latest" / "results.json").read_text())
    assert sorted((entry["scenario"], entry["mode"]) for entry in merged["results"]) == \
        sorted((scenario, mode) for scenario in SCENARIOS[1::2] for mode in ("nonstream", "stream"))
    assert (tmp_path / "report" / "reports" / "junit.xml").is_file()


def test_the_guide_s_split_matrix_runs_here_as_gateway_x_shard_and_merges_into_the_unsplit_matrix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job matrix's gateways are two this machine starts: the reference gateway, embedded
    and in a child process from a profile (the guide's would be installed, minutes each)."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    shutil.copy(REPOSITORY / "tests" / "harness" / "profiles" / "reference-process.yaml", profiles)
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path / "cache"))
    workflow = guide_workflow("# a split matrix")
    workflow["jobs"]["matrix"]["strategy"]["matrix"]["gateway"] = ["reference", "reference-process"]
    extra = [*SCENARIOS, "--profile-dir", str(profiles)]
    codes = run_here(workflow, tmp_path / "jobs", monkeypatch, {"matrix": extra})
    assert codes == {"matrix": [0] * 8, "report": [0]}
    unsplit = CliRunner().invoke(main, ["matrix", "--targets", "reference,reference-process", *extra,
                                        "--output", str(tmp_path / "unsplit.md"), "--report-dir",
                                        str(tmp_path / "unsplit")])
    assert unsplit.exit_code == 0, unsplit.output
    merged = tmp_path / "jobs" / "report" / "reports" / "latest"
    assert [target["name"] for target in json.loads((merged / "matrix.json").read_text())["targets"]] == \
        ["reference", "reference-process"]
    for name in ("reference", "reference-process"):
        one, together = (json.loads((folder / name / "results.json").read_text())
                         for folder in (tmp_path / "unsplit", merged / "matrix"))
        assert [(r["scenario"], r["mode"], r["outcome"]) for r in together["results"]] == \
            [(r["scenario"], r["mode"], r["outcome"]) for r in one["results"]]
        assert together["summary"] == one["summary"]
