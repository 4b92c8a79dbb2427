"""Profiled gateways as real child processes: started against the harness's own upstream and
fixtures, run, stopped by PID; and every way a start can fail, reported with the gateway's log."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from responses_parity.harness.engine.gateway_process import log_tail
from responses_parity.harness.engine.session import TargetOptions, open_session
from responses_parity.harness.errors import HarnessError
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load
from responses_parity.harness.scenario.loader import units_of

PROFILES = Path(__file__).parent / "profiles"
DEADLINE_S = 60.0


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path / "cache"))


def _units(*ids: str):
    catalogue = load([builtin_scenarios_dir()])
    return units_of(catalogue.select(ids, ()), ("nonstream", "stream"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_profiled_gateway_runs_the_scenarios_and_is_stopped_after() -> None:
    units = _units("text-basic", "mcp-call", "background-poll")
    options = TargetOptions(target=str(PROFILES / "reference-process.yaml"))
    with open_session(options, {"calc"}) as session:
        results = session.run(units, jobs=2)
    outcomes = {(r.scenario.id, r.mode): r.outcome for r in results}
    assert outcomes == {("text-basic", "nonstream"): "pass", ("text-basic", "stream"): "pass",
                        ("mcp-call", "nonstream"): "pass", ("mcp-call", "stream"): "pass",
                        ("background-poll", "nonstream"): "unsupported", ("background-poll", "stream"): "unsupported"}
    unsupported = next(r for r in results if r.scenario.id == "background-poll")
    assert "this test profile says so" in (unsupported.unsupported or "")


def test_the_gateway_process_is_gone_once_the_session_ends() -> None:
    options = TargetOptions(target=str(PROFILES / "reference-process.yaml"))
    with open_session(options, set()) as session:
        assert session.gateway is not None
        pid = session.gateway.process.pid
        assert _alive(pid)
        # It answers the readiness probe a moment before it says so in its log.
        deadline = time.monotonic() + DEADLINE_S
        while "reference gateway listening" not in session.gateway.log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "reference gateway listening" in session.gateway.log.read_text()
    assert not _alive(pid)


def test_two_runs_of_one_profile_at_once_each_have_a_folder_of_their_own() -> None:
    """Each start renders the profile's files (settings, stores, log) into a folder of its own,
    so a second run of the same profile does not overwrite the first's settings under it; the
    folders of ended processes go at the next start."""
    options = TargetOptions(target=str(PROFILES / "reference-process.yaml"))
    with open_session(options, set()) as first:
        assert first.gateway is not None
        runs = first.gateway.log.parent.parent
        ended = runs / "4194305-ended"  # above Linux's largest PID: no process has it
        ended.mkdir()
        with open_session(options, set()) as second:
            assert second.gateway is not None
            assert second.gateway.log.parent != first.gateway.log.parent
            assert not ended.exists()
            results = [*first.run(_units("text-basic"), jobs=1), *second.run(_units("text-basic"), jobs=1)]
    assert [result.outcome for result in results] == ["pass"] * 4


def test_a_gateway_that_exits_at_start_is_reported_with_its_log() -> None:
    with pytest.raises(HarnessError) as caught, open_session(TargetOptions(target=str(PROFILES / "exits-at-once.yaml")),
                                                             set()):
        pass
    message = str(caught.value)
    assert "exits-at-once exited (code 3) before it was ready" in message
    assert "fatal: unknown flag --frobnicate" in message
    assert "master_key=<redacted>" in message and "sk-parity-" not in message


def test_a_gateway_that_never_gets_ready_is_stopped_and_reported() -> None:
    with pytest.raises(HarnessError) as caught, open_session(TargetOptions(target=str(PROFILES / "never-ready.yaml")),
                                                             set()):
        pass
    message = str(caught.value)
    assert "never-ready was not ready within 5s" in message and "warming up forever" in message


def test_a_template_naming_an_unknown_variable_is_a_broken_profile() -> None:
    with pytest.raises(HarnessError, match=r"broken-template is broken: .*start.command.*no_such_variable"), \
            open_session(TargetOptions(target=str(PROFILES / "broken-template.yaml")), set()):
        pass


@pytest.mark.parametrize(("template", "message"), [
    ("{{ ''.__class__ }}", r"start.command: `.__class__`: a name starting with `_` is not allowed"),
    ("{{ 'x' * 10**9 }}", r"start.command: `\*` would build a string of 1000000000 characters"),
    ("{{ (harness_python.__class__.__mro__[1].__subclasses__() | first).__init__ }}",
     r"start.command: `.__init__`: a name starting with `_`"),
])
def test_a_hostile_template_is_a_broken_profile_and_nothing_starts(tmp_path: Path, template: str,
                                                                   message: str) -> None:
    marker = tmp_path / "started"
    profile = tmp_path / "hostile.yaml"
    profile.write_text(yaml.safe_dump({
        "name": "hostile", "title": "a profile whose template reaches for Python's internals",
        "start": {"command": ["{{ harness_python }}", "-c", f"open({str(marker)!r}, 'w')", template],
                  "ready": {"path": "/health", "timeout_s": 5}}}))
    with pytest.raises(HarnessError, match=rf"the profile hostile is broken: hostile: {message}"), \
            open_session(TargetOptions(target=str(profile)), set()):
        pass
    assert not marker.exists()


def test_a_failing_install_step_is_reported_with_the_install_log() -> None:
    with pytest.raises(HarnessError) as caught, \
            open_session(TargetOptions(target=str(PROFILES / "failing-install.yaml")), set()):
        pass
    message = str(caught.value)
    assert "install.steps[0] failed (exit 1)" in message and "no wheel for this platform" in message


def test_an_unknown_target_name_lists_the_profiles() -> None:
    with pytest.raises(HarnessError, match=r"unknown target 'smgg'.*smg"), \
            open_session(TargetOptions(target="smgg"), set()):
        pass


def test_a_log_tail_reads_only_the_end_of_a_log_of_any_size(tmp_path: Path) -> None:
    log = tmp_path / "gateway.log"
    with log.open("wb") as file:
        file.truncate(8 * 2**30)  # 8 GiB, sparse: read whole, the test would not end
        file.seek(0, 2)
        file.write(b"\n".join(f"line {n}".encode() for n in range(100)) + b"\n")
    assert log_tail(log).splitlines() == [f"    | line {n}" for n in range(75, 100)]


def test_a_gateway_is_ready_once_its_responses_api_serves_not_when_its_health_check_answers() -> None:
    with open_session(TargetOptions(target=str(PROFILES / "serves-late.yaml")), set()) as session:
        assert session.gateway is not None
        served = session.gateway.log.read_text().splitlines()
    assert served == ["GET /health 200", *["GET /v1/responses/resp_parity_readiness 500"] * 3,
                      "GET /v1/responses/resp_parity_readiness 404"]


def test_a_gateway_whose_responses_api_never_serves_is_a_start_up_failure(tmp_path: Path) -> None:
    profile = yaml.safe_load((PROFILES / "serves-late.yaml").read_text())
    profile["start"] |= {"env": {"NEVER": "1"}, "ready": {"path": "/health", "timeout_s": 2}}
    (tmp_path / "never-serves.yaml").write_text(yaml.safe_dump(profile | {"name": "never-serves"}))
    with pytest.raises(HarnessError) as caught, open_session(
            TargetOptions(target=str(tmp_path / "never-serves.yaml")), set()):
        pass
    message = str(caught.value)
    assert "never-serves answered its readiness check but not its Responses API within 2s" in message
    assert "GET /v1/responses/resp_parity_readiness 500" in message  # the end of its log
