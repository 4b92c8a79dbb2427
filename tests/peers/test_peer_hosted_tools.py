"""What each peer's profile says it lacks among the hosted tools holds for the real gateway: each
peer, started from its profile against the scripted upstream on loopback, is asked for a
`web_search` and, after a file is uploaded and a vector store made through its own Files and
Vector Stores APIs (with the official `openai` SDK), for a `file_search` over that store. A
hosted tool runs when the answer has a completed call item that did the work: a
`web_search_call`, or a `file_search_call` whose results come from the uploaded file (its text
found: whether a result also names the file by its id is the file-search scenarios' to judge;
OGX 1.5.0 gives each chunked document a new id, file_processor/pypdf/pypdf.py:165). Opt in with
`pytest --peers tests/peers`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import openai
import pytest

from responses_parity.fixtures.upstream.script import RunScript, new_run_token, run_marker
from responses_parity.harness.engine.session import Session, open_session
from responses_parity.harness.options import TargetOptions

pytestmark = pytest.mark.peers
PEERS = ["smg", "llama-stack", "ogx", "open-responses-server", "litellm"]
DOCUMENT = b"The aurora borealis glows green over Tromso in winter. Forecast: strong activity tonight."
STORE_READY_S = 60.0


@dataclass
class Probe:
    session: Session
    http: httpx.Client
    sdk: openai.OpenAI

    def ask(self, tool: dict, call: dict, question: str, include: list[str] | None = None) -> dict | None:
        """The JSON answer to a non-streamed request offering `tool`, the scripted model calling
        `call` first; None when the gateway answers no response object."""
        run = new_run_token()
        script = RunScript.model_validate({"steps": [[{"call": call, "fallback_text": "no such tool offered"},
                                                      {"text": "done"}]]})
        upstream = self.session.stack.upstream_url
        assert httpx.put(f"{upstream}/__parity/runs/{run}", json=script.model_dump(mode="json")).status_code == 204
        target = self.session.target
        body = {"model": target.model, "tools": [tool], **({"include": include} if include else {}),
                "input": [{"type": "message", "role": "user", "content": f"{question} {run_marker(run, 0)}"}]}
        answer = self.http.post(target.responses_path, json=body)
        document = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else None
        return document if isinstance(document, dict) and isinstance(document.get("output"), list) else None

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
        with httpx.Client(base_url=target.base_url, headers=headers, timeout=90) as http, \
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
