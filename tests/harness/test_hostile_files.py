"""Every file the tool reads is untrusted: a billion laughs, a recursive anchor, a file too large or
nested too deep is one line naming the file and what is wrong, at once; the files beside it
still run. Scenario folders through `parity validate`, `parity run` and the pytest plugin (as
commands run, in processes of their own: a hang is a failure, not a stuck test run), and every
other reader (goldens, baselines, captures, results, probe answers, scripts, profiles, configs,
the schema cache)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from parity_process import PARITY
from test_cli import PASSING
from test_placeholders import HOSTILE

from responses_parity.harness.cli import main
from responses_parity.harness.engine import child_process
from responses_parity.harness.errors import HarnessError
from responses_parity.harness.probe.answers import ANSWERS_FILE, read_answers
from responses_parity.openai_contract.json_cache import load_or_build
from responses_parity.openai_contract.documents import MAX_DEPTH, MAX_JSON_BYTES, MAX_VALUES, MAX_YAML_BYTES

pytest_plugins = ["pytester"]

LAUGHS = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
          + "".join(f"{name}: &{name} [{','.join([f'*{below}'] * 9)}]\n"
                    for below, name in zip("abcdefgh", "bcdefghi", strict=True)))
"""A billion laughs: nine lines, each nine aliases of the line above; 9^9 strings in 500 bytes."""
RUN_DEADLINE_S = 300.0
"""How long a command may take here: a run starts the reference gateway and every fixture, slow on
a loaded 2-core machine; a hostile file that hangs it takes longer still (for ever)."""
LAUGHS_SAYS = f"line 6: holds more than {MAX_VALUES:,} values with its aliases expanded"
RECURSIVE_SAYS = "an alias refers to the node that holds it (a recursive anchor)"
DEEP_SAYS = f"nests deeper than {MAX_DEPTH} levels"


CODE_SAYS = ("scenario 'code': steps[0].request.input: ", ": parentheses are not allowed")
"""How the line on the placeholder that would run a command starts and ends (the placeholder is shown between)."""


def hostile_scenarios(folder: Path) -> tuple[Path, Path]:
    """The issue's three hostile scenario files (a billion laughs, a recursive anchor, a placeholder
    that would run a command creating `folder/MARKER`), beside one good scenario."""
    folder.mkdir()
    (folder / "code.yaml").write_text(PASSING.replace("id: passing", "id: code").replace(
        'input: "Hi"', f"input: {json.dumps(HOSTILE['popen.yaml'].replace('MARKER', str(folder / 'MARKER')))}"))
    laughs = folder / "laughs.yaml"
    laughs.write_text(LAUGHS + "id: laughs\ntitle: x\nsteps: []\n")
    recursive = folder / "recursive.yaml"
    recursive.write_text('id: recursive\ntitle: recursive anchor\nsteps:\n  - id: ask\n'
                         '    request: {model: "{{model}}", input: &r [*r]}\n    model: [{text: hi}]\n')
    (folder / "good.yaml").write_text(PASSING)
    return laughs, recursive


def parity(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`parity ARGS` run as a user runs it; fails the test when it has not ended by the deadline."""
    return child_process.run([str(PARITY), *args], cwd=cwd, capture_output=True, text=True, timeout=RUN_DEADLINE_S,
                             stdin=subprocess.DEVNULL)


def test_validate_names_each_hostile_file_in_one_line_and_validates_the_good_one(tmp_path: Path) -> None:
    hostile_scenarios(tmp_path / "scenarios")
    done = parity("validate", "scenarios", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    code, *others = done.stderr.splitlines()
    assert others == [f"error scenarios/laughs.yaml: {LAUGHS_SAYS}",
                      f"error scenarios/recursive.yaml: line 5: {RECURSIVE_SAYS}"], done.stderr
    assert code.startswith(f"error scenarios/code.yaml: {CODE_SAYS[0]}") and code.endswith(CODE_SAYS[1]), code
    assert done.stdout.splitlines() == ["1 scenario(s) valid, 3 problem(s)"]


def test_run_names_each_hostile_file_and_runs_the_good_one(tmp_path: Path) -> None:
    hostile_scenarios(tmp_path / "scenarios")
    done = parity("run", "scenarios", "--mode", "nonstream", "--report-dir", "reports", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    document = json.loads((tmp_path / "reports" / "results.json").read_text())
    assert document["summary"]["pass"] == 1
    code, *others = document["file_errors"]
    assert others == [f"scenarios/laughs.yaml: {LAUGHS_SAYS}", f"scenarios/recursive.yaml: line 5: {RECURSIVE_SAYS}"]
    assert code.startswith(f"scenarios/code.yaml: {CODE_SAYS[0]}") and code.endswith(CODE_SAYS[1]), code
    assert not (tmp_path / "scenarios" / "MARKER").exists()


def test_the_pytest_plugin_fails_each_hostile_file_and_runs_the_good_one(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    laughs, recursive = hostile_scenarios(pytester.path / "scenarios")
    (pytester.path / "scenarios" / "notes.yaml").write_text("title: not a scenario\nsteps: [one, two]\n")
    result = pytester.runpytest_subprocess("--parity", "--parity-mode", "nonstream", "-p", "no:cacheprovider",
                                           "-p", "no:asyncio", "scenarios", timeout=RUN_DEADLINE_S)
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines_random([f"*{laughs}: {LAUGHS_SAYS}", f"*{recursive}: line 5: {RECURSIVE_SAYS}"])


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as file:
        file.truncate(size)


def _yaml_file(path: Path, kind: str) -> str:
    """Writes a hostile YAML file of `kind` to `path`; what the reader must say of it."""
    if kind == "oversized":
        _sparse(path, MAX_YAML_BYTES + 1)
        return f"is {MAX_YAML_BYTES + 1:,} bytes, more than the {MAX_YAML_BYTES:,} a YAML file may hold"
    path.write_text({"laughs": LAUGHS, "recursive": "name: x\nturns: &r [*r]\n",
                     "deep": f"name: x\nturns: {'[' * (MAX_DEPTH + 1)}{']' * (MAX_DEPTH + 1)}\n"}[kind])
    return {"laughs": LAUGHS_SAYS, "recursive": f"line 2: {RECURSIVE_SAYS}", "deep": f"line 2: {DEEP_SAYS}"}[kind]


def _json_file(path: Path, kind: str) -> str:
    """Writes a hostile JSON file of `kind` to `path`; what the reader must say of it."""
    if kind == "oversized":
        _sparse(path, MAX_JSON_BYTES + 1)
        return f"is {MAX_JSON_BYTES + 1:,} bytes, more than the {MAX_JSON_BYTES:,} a JSON file may hold"
    path.write_text("[" * 100_000 + "]" * 100_000)
    return DEEP_SAYS


def invoke(*args: str) -> tuple[int, str]:
    """The command in this process; an exception it lets out fails the test (no traceback allowed)."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def said_of(output: str, path: Path, says: str) -> bool:
    """Whether one line of `output` names `path` and says `says`."""
    return any(str(path) in line and says in line for line in output.splitlines())


YAML_KINDS = ("laughs", "recursive", "deep", "oversized")


@pytest.mark.parametrize("kind", YAML_KINDS)
def test_a_hostile_script_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    script = tmp_path / "script.yaml"
    says = _yaml_file(script, kind)
    code, output = invoke("serve", "upstream", "--port", "0", "--script", str(script))
    assert code == 2 and said_of(output, script, says), output


@pytest.mark.parametrize("kind", YAML_KINDS)
def test_a_hostile_profile_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    profile = tmp_path / "gateway.yaml"
    says = _yaml_file(profile, kind)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "good.yaml").write_text(PASSING)
    code, output = invoke("run", str(tmp_path / "scenarios"), "--target", str(profile),
                          "--report-dir", str(tmp_path / "reports"))
    assert code == 2 and said_of(output, profile, says), output


@pytest.mark.parametrize("kind", YAML_KINDS)
def test_a_hostile_gateway_config_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    config = tmp_path / "gateway.yaml"
    says = _yaml_file(config, kind)
    code, output = invoke("serve", "reference", "--port", "0", "--config", str(config))
    assert code == 2 and said_of(output, config, says), output


JSON_KINDS = ("deep", "oversized")


@pytest.mark.parametrize("kind", JSON_KINDS)
@pytest.mark.parametrize("command", ["check-exchange", "replay"])
def test_a_hostile_capture_is_one_line_naming_it(tmp_path: Path, kind: str, command: str) -> None:
    capture = tmp_path / "capture.json"
    says = _json_file(capture, kind)
    code, output = invoke(command, str(capture))
    assert code == 2 and said_of(output, capture, says), output


@pytest.mark.parametrize("kind", JSON_KINDS)
@pytest.mark.parametrize("part", ["manifest.json", "good/nonstream.json"])
def test_a_hostile_golden_file_is_one_line_naming_it(tmp_path: Path, kind: str, part: str) -> None:
    golden = tmp_path / "goldens" / "mine"
    (golden / "good").mkdir(parents=True)
    (golden / "manifest.json").write_text(json.dumps({"name": "mine", "unsupported": []}))
    says = _json_file(golden / part, kind)
    code, output = invoke("run", "-s", "text-basic", "--mode", "nonstream", "--against", "golden:mine",
                          "--golden-dir", str(tmp_path / "goldens"), "--report-dir", str(tmp_path / "reports"))
    assert code == 2 and said_of(output, golden / part, says), output


@pytest.mark.parametrize("kind", JSON_KINDS)
def test_a_hostile_baseline_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    baseline = tmp_path / "baseline.json"
    says = _json_file(baseline, kind)
    code, output = invoke("run", "-s", "text-basic", "--mode", "nonstream", "--baseline", str(baseline),
                          "--report-dir", str(tmp_path / "reports"))
    assert code == 2 and said_of(output, baseline, says), output


@pytest.mark.parametrize("kind", JSON_KINDS)
def test_a_hostile_results_file_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    results = tmp_path / "results.json"
    says = _json_file(results, kind)
    code, output = invoke("baseline", "update", "--results", str(results), "--output", str(tmp_path / "b.json"))
    assert code == 2 and said_of(output, results, says), output


@pytest.mark.parametrize("kind", JSON_KINDS)
def test_hostile_probe_answers_are_one_line_naming_the_file(tmp_path: Path, kind: str) -> None:
    says = _json_file(tmp_path / ANSWERS_FILE, kind)
    with pytest.raises(HarnessError) as refused:
        read_answers(tmp_path)
    assert "\n" not in str(refused.value) and said_of(str(refused.value), tmp_path / ANSWERS_FILE, says)


@pytest.mark.parametrize("kind", JSON_KINDS)
def test_a_hostile_cache_file_is_built_again(tmp_path: Path, kind: str) -> None:
    cache = tmp_path / "cache.json"
    _json_file(cache, kind)
    assert load_or_build(cache, lambda: {"built": 1}, lambda value: isinstance(value, dict)) == {"built": 1}
    assert json.loads(cache.read_text()) == {"built": 1}


def test_a_drafted_scenario_the_loader_would_refuse_is_not_written(tmp_path: Path) -> None:
    capture = tmp_path / "0001-post-v1-responses.json"
    items = MAX_VALUES // 5 + 1  # a mapping, two keys and two values each
    capture.write_text(json.dumps({
        "request": {"method": "POST", "url": "http://127.0.0.1:9/v1/responses",
                    "body": {"model": "m", "input": [{"role": "user", "content": "x"}] * items}},
        "response": {"status": 400, "headers": {"content-type": "application/json"},
                     "body": {"error": {"message": "no", "type": "invalid_request_error", "param": None,
                                        "code": None}}}}))
    code, output = invoke("scenario", "from-capture", str(capture), "-o", str(tmp_path / "drafted.yaml"))
    said = " ".join(output.split())
    assert code == 2 and "the drafted scenario does not load: line " in said, output
    assert f"holds more than {MAX_VALUES:,} values with its aliases expanded" in said, output
    assert not (tmp_path / "drafted.yaml").exists()
