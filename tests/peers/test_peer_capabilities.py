"""What each peer's profile says it lacks, and so what it claims, holds for the real gateway:
each peer, started from its profile against the scripted upstream on loopback, is asked for a
`web_search` and, after a file is uploaded and a vector store made through its own Files and
Vector Stores APIs (with the official `openai` SDK), for a `file_search` over that store; and
for a response over a WebSocket (WebSocket mode), a compaction (`/v1/responses/compact`) and a
token count (`/v1/responses/input_tokens`). A hosted tool runs when the answer has a
completed call item that did the work: a `web_search_call`, or a `file_search_call` whose
results come from the uploaded file (its text found: whether a result also names the file by
its id is the file-search scenarios' to judge; OGX 1.5.0 gives each chunked document a new id,
file_processor/pypdf/pypdf.py:165). WebSocket mode works when a `response.create` frame gets
the response's frames up to `response.completed`. Opt in with `pytest --peers tests/peers`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx2
import openai
import pytest
import websockets
from websockets.sync.client import connect

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.session import Session, open_session
from responses_parity.harness.engine.socket import socket_url
from responses_parity.harness.options import TargetOptions
from responses_parity.harness.wire.websocket import ended

pytestmark = pytest.mark.peers
PEERS = ["smg", "llama-stack", "ogx", "open-responses-server", "litellm"]
DOCUMENT = b"The aurora borealis glows green over Tromso in winter. Forecast: strong activity tonight."
STORE_READY_S = 60.0


@dataclass
class Probe:
    session: Session
    http: httpx2.Client
    sdk: openai.OpenAI

    def ask(self, tool: dict, call: dict, question: str, include: list[str] | None = None) -> dict | None:
        """The JSON answer to a non-streamed request offering `tool`, the scripted model calling
        `call` first; None when the gateway answers no response object."""
        run = self.scripted([{"call": call, "fallback_text": "no such tool offered"}, {"text": "done"}])
        target = self.session.target
        body = {"model": target.model, "tools": [tool], **({"include": include} if include else {}),
                "input": [{"type": "message", "role": "user", "content": f"{question} {run_marker(run, 0)}"}]}
        answer = self.http.post(target.responses_path, json=body)
        document = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else None
        return document if isinstance(document, dict) and isinstance(document.get("output"), list) else None

    def scripted(self, turns: list[dict]) -> str:
        """A run whose one step the scripted model plays as `turns`; its token."""
        run = new_run_token()
        script = RunScript.model_validate({"steps": [turns]})
        upstream = self.session.stack.upstream_url
        assert httpx2.put(f"{upstream}/__parity/runs/{run}", json=script.model_dump(mode="json")).status_code == 204
        return run

    def store_with_document(self) -> tuple[str, str] | None:
        """A vector store holding the document, made through the gateway's own APIs and ready
        to search, and the document's file id; None when the gateway cannot make one."""
        try:
            uploaded = self.sdk.files.create(file=("aurora.txt", DOCUMENT, "text/plain"), purpose="assistants")
            store = self.sdk.vector_stores.create(name="docs", file_ids=[uploaded.id])
            deadline = time.monotonic() + STORE_READY_S
            while store.file_counts.in_progress and time.monotonic() < deadline:
                time.sleep(0.2)
                store = self.sdk.vector_stores.retrieve(store.id)
        except (openai.APIError, ValueError):  # ValueError: an answer the SDK cannot read
            return None
        return (store.id, uploaded.id) if store.file_counts.completed == 1 else None


@pytest.fixture(scope="module", params=PEERS)
def probe(request: pytest.FixtureRequest) -> Iterator[Probe]:
    with open_session(TargetOptions(target=request.param, timeout_s=60), []) as session:
        target = session.target
        headers = dict(target.headers)
        api_base = target.base_url.rstrip("/") + target.responses_path.rsplit("/", 1)[0]
        with httpx2.Client(base_url=target.base_url, headers=headers, timeout=90) as http, \
                openai.OpenAI(base_url=api_base, api_key=headers.get("Authorization", "Bearer none").split()[-1],
                              default_headers=headers, max_retries=0, timeout=60) as sdk:
            yield Probe(session, http, sdk)


def _items(answer: dict | None, kind: str) -> list[dict]:
    return [item for item in (answer or {}).get("output", []) if item.get("type") == kind]


def test_web_search_runs_unless_the_profile_says_it_lacks_it(probe: Probe) -> None:
    answer = probe.ask({"type": "web_search"}, {"tool": "web_search", "arguments": {"query": "aurora forecast"}},
                       "Search the web for the aurora forecast.")
    calls = [item for item in _items(answer, "web_search_call") if item.get("status") == "completed"]
    lacks = "web_search" in probe.session.target.lacks
    assert bool(calls) is not lacks, json.dumps(answer)[:2000]


def test_file_search_finds_the_uploaded_file_unless_the_profile_says_it_lacks_it(probe: Probe) -> None:
    lacks = probe.session.target.lacks
    made = probe.store_with_document()
    assert (made is None) is ("files_api" in lacks or "vector_stores" in lacks)
    store, file_id = made or ("vs_none", "file_none")
    answer = probe.ask({"type": "file_search", "vector_store_ids": [store]},
                       {"tool": "file_search", "arguments": {"query": "aurora Tromso"}},
                       "What do my files say about the aurora?", include=["file_search_call.results"])
    found = [item for item in _items(answer, "file_search_call") if item.get("status") == "completed"
             and any(result.get("file_id") == file_id or "Tromso" in str(result.get("text"))
                     for result in item.get("results") or [])]
    assert bool(found) is ("file_search" not in lacks), json.dumps(answer)[:2000]


def test_websocket_mode_answers_unless_the_profile_says_it_lacks_it(probe: Probe) -> None:
    target = probe.session.target
    frames: list[dict] = []
    try:
        with connect(socket_url(target), additional_headers=dict(target.headers), open_timeout=30) as socket:
            socket.send(json.dumps({"type": "response.create", "model": target.model,
                                    "input": f"Say something. {run_marker(probe.scripted([{'text': 'Hi.'}]), 0)}"}))
            while not ended(frames):
                frames.append(json.loads(socket.recv(timeout=60)))
    except (OSError, TimeoutError, websockets.WebSocketException) as refused:
        frames.append({"refused": str(refused)})
    completed = frames[-1].get("type") == "response.completed"
    assert completed is ("websocket" not in target.lacks), json.dumps(frames)[:2000]


@pytest.mark.parametrize(("capability", "endpoint", "answer_object"), [
    ("compaction", "compact", "response.compaction"), ("input_tokens", "input_tokens", "response.input_tokens")])
def test_a_responses_endpoint_answers_unless_the_profile_says_it_lacks_it(probe: Probe, capability: str,
                                                                          endpoint: str, answer_object: str) -> None:
    target = probe.session.target
    marker = run_marker(probe.scripted([{"text": "They said hello."}]), 0)
    answer = probe.http.post(f"{target.responses_path}/{endpoint}",
                             json={"model": target.model, "input": [{"role": "user", "content": f"Hello {marker}"}]})
    document = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else None
    answered = answer.status_code == 200 and isinstance(document, dict) and document.get("object") == answer_object
    assert answered is (capability not in target.lacks), f"{answer.status_code} {answer.text[:2000]}"
