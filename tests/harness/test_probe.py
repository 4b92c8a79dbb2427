"""`parity probe`: a fixed, seeded probe set against the reference gateway (every defect gets
OpenAI's 400 naming the field, or a 2xx where OpenAI's description accepts the value), a
gateway that answers defects with a 500, a 200 or a body that is not OpenAI's reported as
diverging and grouped, and recorded answers compared with later."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import yaml
from click.testing import CliRunner
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from responses_parity.fixtures.upstream.app import UpstreamState, build_upstream_app
from responses_parity.fixtures.upstream.script import AdHocScript
from responses_parity.harness.cli import main
from responses_parity.harness.defaults import DEFAULT_MODEL
from responses_parity.harness.engine.reference_gateway import reference_config
from responses_parity.harness.engine.server_thread import ServerThread
from responses_parity.harness.engine.stack import Stack
from responses_parity.harness.engine.targets import Target
from responses_parity.harness.options import TargetOptions
from responses_parity.harness.probe.generate import Probe, all_probes, select
from responses_parity.harness.probe.compare import Comparison
from responses_parity.harness.probe.run import DESCRIPTION_SOURCE, REFERENCE_SOURCE, run_probes
from responses_parity.harness.probe.send import BASE_INPUT, Outcome, send_probes
from responses_parity.harness.wire.redaction import Redactor
from responses_parity.reference_impl.app import build_gateway_app

SEED, SEEDED = 17, 300
GENERATED = all_probes(DEFAULT_MODEL, BASE_INPUT)
FIXED = [*select(tuple(p for p in GENERATED if p.defect not in ("conflict", "bad_id")), SEED, SEEDED),
         *(p for p in GENERATED if p.defect in ("conflict", "bad_id"))]
"""The seeded share of the body probes, and every conflict and bad id (they are few)."""
WITHOUT_PARAM = {404: "a stored object not found (contract notes §4.2: param null)",
                 "mutually_exclusive_parameters": "previous_response_id with conversation (§4.2: param null)",
                 "missing_required_parameter": "an empty input (§4.2: 'One of \"input\" or ...', param null)"}


def test_the_full_set_is_thousands_of_distinct_probes_each_with_one_defect_on_one_field() -> None:
    assert len(GENERATED) > 3000
    assert len({probe.id for probe in GENERATED}) == len(GENERATED)
    families = {probe.group for probe in GENERATED}
    assert {"responses.tools[i].*", "responses.input[i].*", "responses.text.*", "responses.reasoning.*",
            "responses.metadata", "GET /v1/responses/{id}", "DELETE /v1/conversations/{id}/items/{item}",
            "GET /v1/files/{id}", "GET /v1/vector_stores/{id}",
            "POST /v1/vector_stores/{id}/file_batches/{batch}/cancel", "chat.messages[i].*",
            "vector_stores.search.filters.*", "responses.stored.limit", "files.purpose", "files.expires_after.*",
            "vector_stores.file_batches.files[i].*", "conversations.items.include"} <= families
    assert {probe.surface for probe in GENERATED} == {
        "responses", "responses.stored", "chat", "conversations", "conversations.items", "files", "vector_stores",
        "vector_stores.files", "vector_stores.file_batches", "vector_stores.search"}
    by_id = {probe.id: probe for probe in GENERATED}
    assert by_id["responses.temperature.out_of_range.high"].body == {"model": DEFAULT_MODEL, "input": BASE_INPUT,
                                                                     "temperature": 3}
    assert by_id["responses.tools[i][function].name.missing_required"].body["tools"] == [{"type": "function"}]
    assert by_id["vector_stores.search.filters[gt].value.empty.array"].body["filters"] == {  # the member it names
        "type": "gt", "key": "parity", "value": []}


@pytest.mark.parametrize(("probe_id", "refused"), [
    ("responses.temperature.out_of_range.high", True), ("responses.safety_identifier.oversized.length", True),
    ("responses.context_management.empty.array", True), ("chat.seed.out_of_range.high", True),
    ("responses.input.empty.string", False),  # refused for the state it leaves (no input), not by the description
    ("responses.get.{id}.input_items.query.limit.out_of_range.high", True),
    ("responses.get.{id}.input_items.query.parity_probe_unknown.unknown_field", False),
    ("files.create.expires_after.seconds.oversized.digits", True), ("files.create.purpose.duplicate", False),
    ("vector_stores.search.filters[gt].value.wrong_type", True), ("vector_stores.get.{id}.bad_id.unknown", False),
    ("responses.conflict.previous_response_id+conversation", True),
])
def test_each_probe_states_whether_openais_description_refuses_it(probe_id: str, refused: bool) -> None:
    assert {probe.id: probe for probe in GENERATED}[probe_id].refused is refused


def test_a_seed_chooses_the_same_probes_every_time_and_another_seed_others() -> None:
    assert [p.id for p in select(GENERATED, SEED, 50)] == [p.id for p in select(GENERATED, SEED, 50)]
    assert [p.id for p in select(GENERATED, SEED, 50)] != [p.id for p in select(GENERATED, SEED + 1, 50)]


def _on_the_field(param: str, field: str) -> bool:
    """`param` names the field, an object holding it, a part of it, or the `type` of the
    object holding it (a type the gateway does not run)."""
    def under(inner: str, outer: str) -> bool:
        return inner == outer or inner.startswith((f"{outer}.", f"{outer}["))

    return under(field, param) or under(param, field) or \
        (param.endswith(".type") and under(field, param.removesuffix(".type")))


def _openai_answer_problem(probe: Probe, outcome: Outcome) -> str | None:
    """What is wrong with the reference gateway's answer to a probe, or None. A body the
    description accepts may still be refused, for what its stored state or this gateway's
    capabilities say (an approval of a request never made), naming another field."""
    if outcome.status is None or outcome.status >= 500:
        return f"answered {outcome.status} ({outcome.detail})"
    if outcome.status < 300:
        return "accepted a body OpenAI's description refuses" if probe.refused else None
    if outcome.body != "envelope":
        return f"a {outcome.status} that is not OpenAI's error envelope ({outcome.body})"
    if (outcome.type, outcome.status) not in (("invalid_request_error", 400), ("invalid_request_error", 404),
                                              ("external_connector_error", 424)):
        return f"a {outcome.status} of type {outcome.type}"
    if probe.field == "body":  # a form that is not one: what is named, if anything, is the gateway's reading
        return None
    if outcome.param is None:
        return None if outcome.status in WITHOUT_PARAM or outcome.code in WITHOUT_PARAM else "no param"
    if probe.defect != "bad_id" and probe.refused and not _on_the_field(outcome.param, probe.field):
        return f"param {outcome.param!r} does not name {probe.field!r}"
    return None


def test_every_probe_of_the_fixed_set_gets_openais_answer_from_the_reference_gateway(stack: Stack,
                                                                                   probed_gateway: str) -> None:
    target = Target("reference", probed_gateway, timeout_s=20)
    outcomes = asyncio.run(send_probes(target, [p.id for p in FIXED], upstream_url=stack.upstream_url, jobs=4))
    problems = {probe.id: problem for probe in FIXED
                if (problem := _openai_answer_problem(probe, outcomes[probe.id])) is not None}
    assert problems == {}
    statuses = {outcome.status for outcome in outcomes.values()}
    assert {200, 400, 404} <= statuses  # the set holds defects OpenAI accepts, refuses, and ids it does not know
    by_id = dict(outcomes)
    assert by_id["responses.conflict.previous_response_id+conversation"].code == "mutually_exclusive_parameters"
    assert by_id["responses.previous_response_id.bad_id.unknown"].code == "previous_response_not_found"


class FaultyGateway:
    """The reference gateway, except that a request setting `temperature` gets a 500 in plain
    text, one with `tools` a 200 (every defect accepted), one with `metadata` a 400 without an
    error envelope, and one with `top_logprobs` no answer at all (it hangs)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/responses" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        raw = await Request(scope, receive).body()
        body = json.loads(raw)
        if "top_logprobs" in body:
            await asyncio.Event().wait()  # until the server stops
        if "temperature" in body:
            answer = PlainTextResponse("Internal Server Error", status_code=500)
        elif "tools" in body:
            answer = JSONResponse({"id": "resp_faulty", "object": "response", "status": "completed", "output": []})
        elif "metadata" in body:
            answer = JSONResponse({"detail": "metadata is wrong"}, status_code=400)
        else:
            delivered = False

            async def replay() -> dict[str, object]:
                nonlocal delivered
                if delivered:
                    return await receive()
                delivered = True
                return {"type": "http.request", "body": raw, "more_body": False}

            await self.app(scope, replay, send)
            return
        await answer(scope, receive, send)


@pytest.fixture
def faulty_gateway(stack: Stack) -> Iterator[str]:
    app = build_gateway_app(reference_config(stack.upstream_url or ""))
    server = ServerThread(FaultyGateway(app)).start()
    yield server.url
    server.stop()


FAULTED = tuple(p for p in GENERATED if p.surface == "responses" and (
    p.field in ("temperature", "metadata", "model", "top_logprobs") or p.field.startswith("tools[0].name")))


def test_a_gateway_answering_defects_with_500_200_or_not_openais_envelope_is_reported_diverging_grouped(
        stack: Stack, faulty_gateway: str) -> None:
    answering = [p for p in FAULTED if p.field != "top_logprobs"]
    comparison = run_probes(TargetOptions(target=faulty_gateway, upstream=stack.upstream_url or "", timeout_s=60),
                            "reference", answering, jobs=8, redactor=Redactor())
    temperature = [g for g in comparison.groups if g.families == ["responses.temperature"]]
    assert sum(len(g.divergences) for g in temperature) == len([p for p in FAULTED if p.field == "temperature"])
    assert all(g.got == "500 (not JSON): “Internal Server Error”" and g.cost == 0 for g in temperature)
    assert all(g.expected.startswith("400 invalid_request_error") for g in temperature)
    assert "1 probe on responses.temperature: faulty answers 500 (not JSON): “Internal Server Error” where the " \
           "reference gateway answers 400 invalid_request_error (invalid_type)" in {g.sentence("faulty")
                                                                                     for g in temperature}
    refused = [p for p in FAULTED if p.field.startswith("tools[0].name")
               and comparison.expected[p.id].status_class == "4xx"]
    accepted = [g for g in comparison.groups if g.families == ["responses.tools[i].*"]]
    assert refused and all(g.got == "200" and g.cost == 1 for g in accepted)
    assert sum(len(g.divergences) for g in accepted) == len(refused)
    metadata = [g for g in comparison.groups if g.families == ["responses.metadata"]]
    assert metadata and all(g.got.startswith("400 without an error envelope") for g in metadata)
    assert [g.cost for g in comparison.groups] == sorted(g.cost for g in comparison.groups)  # costliest first
    assert not [d for d in comparison.divergences if d.probe.field == "model"]  # passed on, so answered alike
    assert all(d.source == REFERENCE_SOURCE for d in comparison.divergences)


def test_a_gateway_that_never_answers_is_reported_diverging_after_the_timeout(
        stack: Stack, faulty_gateway: str, tmp_path: Path) -> None:
    hanging = [p for p in FAULTED if p.field == "top_logprobs"]
    # The reference gateway's answers, recorded with a generous timeout: the short one below only
    # bounds the wait for the gateway that never answers, and is never what the reference is given.
    reference = tmp_path / "reference"
    run_probes(TargetOptions(timeout_s=60), "reference", hanging, jobs=8, redactor=Redactor(), record=reference)
    comparison = run_probes(TargetOptions(target=faulty_gateway, upstream=stack.upstream_url or "", timeout_s=1),
                            str(reference), hanging, jobs=8, redactor=Redactor())
    assert len(comparison.divergences) == len(hanging)
    assert all(d.got.body == "no answer" and "within 1s" in d.got.detail for d in comparison.divergences)
    assert {g.got for g in comparison.groups} == {"nothing (no answer)"}


def test_recorded_answers_are_compared_with_later_and_the_reference_answers_what_they_lack(
        stack: Stack, tmp_path: Path) -> None:
    probes = [p for p in GENERATED if p.field == "temperature"]
    recorded = tmp_path / "answers"
    reference = TargetOptions(timeout_s=20)
    first = run_probes(reference, "reference", probes[:2], jobs=2, redactor=Redactor(), record=recorded)
    assert not first.divergences
    later = run_probes(reference, str(recorded), probes, jobs=2, redactor=Redactor())
    assert later.source_counts() == {"reference (recorded)": 2, REFERENCE_SOURCE: len(probes) - 2}
    assert not later.divergences


def test_the_command_writes_a_report_and_json_secrets_removed_and_exits_by_divergence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = tmp_path / "probe.md"
    args = ["probe", "--field", "top_p", "--report", str(report), "--json", "--header", "X-Secret: hush-hush-123"]
    monkeypatch.setattr(sys, "argv", ["parity", *args])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["probes"] == len([p for p in GENERATED if p.field.startswith("top_p")])
    assert document["diverging"] == 0 and document["expected_from"] == {REFERENCE_SOURCE: document["probes"]}
    text = report.read_text()
    assert text.startswith("# Request probes: reference compared with the reference gateway")
    assert "Regenerate: `parity probe --field top_p" in text
    assert "hush-hush-123" not in text + result.stdout and "<redacted>" in text
    unknown = CliRunner().invoke(main, ["probe", "--field", "no_such_field"])
    assert unknown.exit_code == 2 and "no probe matches" in unknown.output


def test_a_folder_of_answers_that_is_missing_or_broken_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    empty = CliRunner().invoke(main, ["probe", "--field", "top_p", "--against", str(tmp_path)])
    assert empty.exit_code == 2 and "holds no recorded probe answers (probe-answers.json)" in empty.output
    (tmp_path / "probe-answers.json").write_text(json.dumps({"format": 1, "target": "openai", "answers": [1]}))
    broken = CliRunner().invoke(main, ["probe", "--field", "top_p", "--against", str(tmp_path)])
    assert broken.exit_code == 2 and f"{tmp_path / 'probe-answers.json'} is not a probe answers file" in broken.output


def test_probes_leave_a_script_loaded_for_unmarked_requests_alone() -> None:
    """A gateway on a `parity serve --script` upstream, passing on to the model requests a probe's
    defect left without the run's marker (an empty `messages`): the probes' run answers them, and
    the loaded script is never used, so no probe gets its `script_exhausted`."""
    state = UpstreamState(adhoc=AdHocScript.model_validate({"turns": [{"text": "loaded"}]}))
    upstream = ServerThread(build_upstream_app(state)).start()
    gateway = ServerThread(build_gateway_app(reference_config(upstream.url))).start()
    chat = [p for p in GENERATED if p.surface == "chat" and p.field.startswith("messages")][:40]
    try:
        outcomes = asyncio.run(send_probes(Target("gw", gateway.url, timeout_s=30), [p.id for p in chat],
                                           upstream_url=upstream.url, jobs=4))
    finally:
        gateway.stop()
        upstream.stop()
    unmarked = [p for p in chat if BASE_INPUT not in json.dumps(p.body) and outcomes[p.id].status == 200]
    assert unmarked, "no probe without the marker reached the model: the test shows nothing"
    assert state.adhoc_answered == 0 and not state.unmatched
    assert not [o for o in outcomes.values() if o.code == "script_exhausted"]


def test_probing_the_reference_against_itself_warns_that_it_compares_it_with_itself() -> None:
    result = CliRunner().invoke(main, ["probe", "--count", "2"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "warning --target reference compared with --against reference compares the reference gateway with " \
           "itself" in " ".join(result.output.split())


def test_where_the_reference_refuses_for_a_limit_of_its_own_openais_description_is_the_expectation(
        stack: Stack, faulty_gateway: str) -> None:
    """The reference gateway does not accept input items of type `additional_tools`; OpenAI's
    description does, so the reference's refusal is no expectation: a gateway that accepts the
    item agrees with OpenAI, and the expectation names the description."""
    probes = [p for p in GENERATED if p.id.startswith("responses.input[i][additional_tools].")
              and p.defect == "empty" and not p.refused][:3]
    assert probes, "no probe the description accepts on this field: the test shows nothing"
    comparison = run_probes(TargetOptions(target=faulty_gateway, upstream=stack.upstream_url or "", timeout_s=60),
                            "reference", probes, jobs=3, redactor=Redactor())
    assert set(comparison.sources.values()) == {DESCRIPTION_SOURCE}
    assert all(comparison.expected[p.id].status_class == "2xx" for p in probes)


def test_probes_of_what_a_profile_says_its_gateway_lacks_are_not_sent(stack: Stack, tmp_path: Path) -> None:
    profile = yaml.safe_load((Path(__file__).parent / "profiles" / "reference-process.yaml").read_text())
    profile["lacks"] = {"files_api": "this test profile says so"}
    (tmp_path / "no-files.yaml").write_text(yaml.safe_dump(profile | {"name": "no-files"}))
    probes = [p for p in GENERATED if p.endpoint == "files"][:2] + [p for p in GENERATED if p.field == "temperature"]
    comparison = run_probes(TargetOptions(target=str(tmp_path / "no-files.yaml"), timeout_s=60), "reference", probes,
                            jobs=4, redactor=Redactor())
    assert comparison.skipped == {p.id: "the probe uploads or reads files through the Files API (/v1/files); the "
                                        "target lacks that" for p in probes[:2]}
    assert [p.id for p in comparison.probes] == [p.id for p in probes[2:]]


def test_divergences_are_grouped_by_the_targets_answer_across_fields_and_the_costliest_come_first() -> None:
    """Two fields answered with the same message but for the column it names are one cause."""
    probes = {p.field: p for p in GENERATED if p.surface == "responses" and p.defect == "wrong_type"}
    first, second, third = probes["temperature"], probes["top_p"], probes["metadata"]
    parse_error = [Outcome(400, "envelope", "invalid_request_error", "invalid_type", "input",
                           detail=f"Failed to deserialize the JSON body at line 1 column {n}") for n in (12, 97)]
    expected = Outcome(400, "envelope", "invalid_request_error", "invalid_type", "x", detail="Invalid type")
    comparison = Comparison("gw", "reference", [first, second, third],
                            {first.id: parse_error[0], second.id: parse_error[1], third.id: Outcome(500, "not json")},
                            dict.fromkeys([first.id, second.id, third.id], expected),
                            dict.fromkeys([first.id, second.id, third.id], "the reference gateway"))
    worst, cause = comparison.groups
    assert (worst.cost, [d.probe.id for d in worst.divergences]) == (0, [third.id])
    assert cause.got == "400 invalid_request_error (invalid_type): “Failed to deserialize the JSON body at line … " \
                        "column …”" and len(cause.divergences) == 2
    assert cause.sentence("gw").startswith("2 probes on 2 field families (responses.temperature, responses.top_p)")


def test_a_broken_upload_the_probes_send_leaves_no_log_line(caplog: pytest.LogCaptureFixture) -> None:
    with Stack(with_reference=True) as stack:
        answer = httpx2.post(f"{stack.reference_url}/v1/files", content=bytes(range(256)) * 8,
                             headers={"content-type": "multipart/form-data; boundary=parity-probe-boundary"})
    assert answer.status_code == 400
    assert [record.getMessage() for record in caplog.records] == []
