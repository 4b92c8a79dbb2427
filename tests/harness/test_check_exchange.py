"""`parity check-exchange`: real-OpenAI-shaped exchanges (written from the facts of recorded
traffic, see each file's `description`) pass without a single error or warning; a broken
answer is an error (exit 1); an unreadable file is named and the others are still checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from responses_parity.harness.cli import main
from responses_parity.harness.judge.checks import no_reference_findings
from responses_parity.harness.model.findings import Severity
from responses_parity.harness.wire.exchange import Exchange
from responses_parity.harness.wire.websocket import connection_exchanges

EXCHANGES = sorted((Path(__file__).parent / "exchanges").glob("*.json"))


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output.replace("\n", " ")


@pytest.mark.parametrize("path", EXCHANGES, ids=lambda p: p.stem)
def test_openai_shaped_exchanges_have_no_error_or_warning(path: Path) -> None:
    findings = no_reference_findings(Exchange.from_file(json.loads(path.read_text())))
    assert [f.message for f in findings if f.severity >= Severity.WARNING] == []


def test_the_quirks_of_real_openai_traffic_are_notes() -> None:
    rules = {f.rule for path in EXCHANGES
             for f in no_reference_findings(Exchange.from_file(json.loads(path.read_text())))}
    assert {"grammar.sequence_numbers", "schema.drift", "schema.nested_error_event", "schema.open_enum",
            "exchange.incomplete_capture"} <= rules
    two_servers = json.loads((EXCHANGES[0].parent / "stream-mcp-two-servers.json").read_text())
    notes = [f.message for f in no_reference_findings(Exchange.from_file(two_servers))]
    assert any("OpenAI closes only the last of several" in note for note in notes)


def test_the_command_passes_real_shaped_files_and_groups_repeated_notes() -> None:
    code, output = invoke("check-exchange", *map(str, EXCHANGES))
    assert code == 0
    assert f"{len(EXCHANGES)} file(s) checked: 0 error(s), 0 warning(s)" in output
    assert "(x" in output and "event (response.output_text.delta): `logprobs` is absent" in output


def test_a_broken_answer_fails_and_an_unreadable_file_is_named(tmp_path: Path) -> None:
    exchange = json.loads((EXCHANGES[0].parent / "stream-text-obfuscation.json").read_text())
    exchange["response"]["sse"] = exchange["response"]["sse"].replace('"sequence_number":3', '"sequence_number":7')
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([exchange, exchange]))
    (tmp_path / "garbage.json").write_text("{not json")
    code, output = invoke("check-exchange", str(broken))
    assert code == 1
    assert f"{broken}[0]: error" in output and f"{broken}[1]: error" in output
    assert "has sequence_number 7, expected 3" in output
    code, output = invoke("check-exchange", str(tmp_path / "garbage.json"), str(broken))
    assert code == 2
    assert f"{tmp_path / 'garbage.json'}: cannot read it as JSON" in output
    assert "2 file(s) checked (1 unreadable): 3 error(s)" in output  # one per broken exchange, and the garbage
    assert f"{broken}[0]: error" in output
    code, output = invoke("check-exchange", str(tmp_path))  # a folder: its *.json files, in name order
    assert code == 2 and output.index(f"{broken}[0]: error") < output.index(f"{tmp_path / 'garbage.json'}: cannot")
    (tmp_path / "empty").mkdir()
    code, output = invoke("check-exchange", str(tmp_path / "empty"))
    assert code == 2 and "no exchange files in" in output


def test_an_error_answer_without_the_envelope_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad-error.json"
    path.write_text(json.dumps({"request": {"method": "POST", "url": "http://gw/v1/responses", "body": None},
                                "response": {"status": 400, "headers": None, "body": {"detail": "bad"},
                                             "sse": None}}))
    code, output = invoke("check-exchange", str(path))
    assert code == 1 and "without the" in output


def test_the_reference_gateways_own_recorded_exchanges_have_no_warning(tmp_path: Path) -> None:
    """Recorded now, as a golden set of every built-in scenario, and checked as answers of today."""
    code, output = invoke("record", "--name", "reference", "--golden-dir", str(tmp_path / "goldens"),
                          "--report-dir", str(tmp_path / "report"))
    assert code == 0, output
    units = sorted(map(str, (tmp_path / "goldens" / "reference").glob("*/*.json")))
    code, output = invoke("check-exchange", "--current", *units)
    assert code == 0 and f"{len(units)} file(s) checked: 0 error(s), 0 warning(s)" in output, output


def _connection(*messages: tuple[str, dict]) -> dict:
    return {"transport": "websocket", "request": {"url": "wss://gw/v1/responses", "headers": None},
            "messages": [{"direction": direction, "data": data} for direction, data in messages], "close": None}


def _response_frames(response_id: str, first: int) -> list[tuple[str, dict]]:
    response = {"id": response_id, "object": "response", "status": "in_progress", "output": []}
    return [("received", {"type": "response.created", "sequence_number": first, "response": response}),
            ("received", {"type": "response.completed", "sequence_number": first + 1,
                          "response": response | {"status": "completed"}})]


def test_a_websocket_connection_file_is_one_exchange_per_create_each_numbered_from_zero(tmp_path: Path) -> None:
    create = ("sent", {"type": "response.create", "model": "m", "input": "hi"})
    path = tmp_path / "connection.json"
    path.write_text(json.dumps(_connection(create, *_response_frames("resp_1", 0), create,
                                           *_response_frames("resp_2", 2))))
    code, output = invoke("check-exchange", str(path))
    assert code == 1 and f"{path}[0]" in output and f"{path}[1]: error" in output
    assert "event 0 (response.created) has sequence_number 2, expected 0" in output


def test_what_a_connection_file_holds_out_of_place_is_named() -> None:
    create = ("sent", {"type": "response.create", "model": "m", "input": "hi"})
    late = ("received", {"type": "response.output_text.delta", "delta": "x"})
    [exchange] = connection_exchanges(_connection(create, *_response_frames("resp_1", 0), late,
                                                  ("received", "[DONE]")))
    assert exchange.request_body == {"model": "m", "input": "hi"} and exchange.meta["transport"] == "websocket"
    assert [defect.message for defect in exchange.defects] == [
        "frame 2 (response.output_text.delta) comes after the create's answer ended",
        "frame 3 is a text frame that is not a JSON object (every frame of WebSocket mode is one JSON object)"]
    with pytest.raises(ValueError, match=r"messages\[0\]: the server sent a frame before any create"):
        connection_exchanges(_connection(late))
    [cut] = connection_exchanges(_connection(create, _response_frames("resp_1", 0)[0]))
    assert cut.transport_error == "the connection ended before the answer did"


def _compaction_answer(output: list[dict]) -> dict:
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    body = {"id": "resp_1", "object": "response.compaction", "created_at": 1, "output": output, "usage": usage}
    return {"request": {"method": "POST", "url": "http://gw/v1/responses/compact", "body": {"model": "m"}},
            "response": {"status": 200, "headers": None, "body": body, "sse": None}}


def test_a_compacted_window_is_user_messages_then_one_compaction_item(tmp_path: Path) -> None:
    user = {"id": "msg_1", "type": "message", "status": "completed", "role": "user",
            "content": [{"type": "input_text", "text": "Hi"}]}
    item = {"id": "cmp_1", "type": "compaction", "encrypted_content": "gAAAAA"}
    assistant = {"id": "msg_2", "type": "message", "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Hello", "annotations": []}]}
    findings = no_reference_findings(Exchange.from_file(_compaction_answer([user, item])))
    assert [f.message for f in findings if f.severity >= Severity.WARNING] == []
    rules = {f.rule: f.message for f in no_reference_findings(Exchange.from_file(_compaction_answer(
        [user, assistant, item, item])))}
    assert "output[1] is message (assistant); output[2] is compaction" in rules["schema.compaction_window"]
