"""The scenario file format: a scenario is steps, each a request, a scripted model and an
expectation that states OpenAI's behaviour.

These models are the single source of the format: the loader validates with them, and the
JSON Schema shipped for editors (`scenarios/scenario.schema.json`) is generated from them
(`parity schema`). Every object forbids unknown keys, so a typo is an error, not a no-op.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ...fixtures.mcp import FIXTURE_SERVERS
from ...fixtures.search.pages import FoundPage
from ...fixtures.upstream.script import ModelTurn
from ..defaults import HTTP_MODES, MODES, Mode
from ..wire.redaction import SECRET_KEYS, tool_secrets
from .expectations import Expect, ModelDependent, UpstreamExpect
from .strict import Strict

FORMAT_VERSION = 1
Surface = Literal["responses", "chat"]
STEP_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class Evidence(Strict):
    """Where the expectation comes from. A scenario states OpenAI's behaviour as recorded
    traffic shows it; where nothing is recorded it says so (`unrecorded`) and names the
    contract notes it relies on."""

    recordings: list[str] = Field(default_factory=list,
                                  description="Recorded OpenAI exchanges that show this behaviour.")
    contract: str | None = Field(default=None, description="Section of OpenAI's contract notes relied on.")
    unrecorded: bool = Field(default=False, description="No recording shows this; the expectation is inferred.")
    note: str | None = None

    @model_validator(mode="after")
    def _has_a_source(self) -> Evidence:
        if not self.recordings and not self.contract:
            raise ValueError("name the recordings or the contract section the expectation comes from")
        if self.unrecorded and self.recordings:
            raise ValueError("an unrecorded expectation cannot name recordings")
        return self


class Until(Strict):
    """A condition on what the run's fixtures have seen so far, all steps together; the harness
    checks it every few milliseconds until it holds."""

    upstream: UpstreamExpect | None = Field(
        default=None, description="What the gateway has sent to the scripted model and the MCP fixtures so far "
                                  "(the same fields as `expect.upstream`).")
    quiet: float | None = Field(
        default=None, gt=0, le=30, description="Seconds during which nothing new reached the fixtures while no "
                                               "request to them was in flight: the gateway has settled.")

    @model_validator(mode="after")
    def _something(self) -> Until:
        if self.upstream is None and self.quiet is None:
            raise ValueError("say what to wait for: `upstream`, `quiet` or both")
        return self


class Wait(Strict):
    """Wait before sending until a condition holds; if it never does within `timeout`, the step
    fails saying which part did not hold."""

    until: Until
    timeout: float = Field(default=10, gt=0, le=120)


class Poll(Strict):
    """Send the request again until the answer matches `until`, as a client polls a background
    response; the last answer is the one judged. Never matching within `timeout` fails the step."""

    until: Expect
    timeout: float = Field(default=30, gt=0, le=120)
    interval: float = Field(default=0.1, gt=0, le=5)


class Disconnect(Strict):
    """The client goes away mid-response: after the first event of a type (streams), after some
    seconds, or as soon as a condition on the fixtures holds (e.g. a tool call reached them)."""

    after_event: str | None = None
    after_seconds: float | None = Field(default=None, gt=0, le=60)
    when: Until | None = None

    @model_validator(mode="after")
    def _one(self) -> Disconnect:
        if sum(value is not None for value in (self.after_event, self.after_seconds, self.when)) != 1:
            raise ValueError("give exactly one of `after_event`, `after_seconds` and `when`")
        return self


class UploadFile(Strict):
    """The file part of an upload."""

    name: str = Field(description="Its filename (file search judges a file's type by its extension).")
    content: str = Field(description="Its text, sent UTF-8 encoded; placeholders allowed.")


class Upload(Strict):
    """A `multipart/form-data` body, as `POST /v1/files` takes an upload: the `file` part and
    the form fields. A part left out is not sent (to see that it is required)."""

    file: UploadFile | None = None
    purpose: str | None = None
    fields: dict[str, str] = Field(default_factory=dict, description="Other form fields, as the form names them "
                                                                     "(`expires_after[seconds]`).")


class Step(Strict):
    id: str = Field(description="Lower-case identifier; later steps reach this step's results as {{id....}}.")
    title: str | None = None
    inferred: str | None = Field(
        default=None, description="What this step states beyond the scenario's recordings, and what it is "
                                  "inferred from (a scenario marked `unrecorded` is inferred throughout).")
    method: Literal["GET", "POST", "DELETE"] = "POST"
    path: str | None = Field(default=None, description="Request path, with placeholders (default: the "
                                                       "scenario's surface, {{responses_path}} or {{chat_path}}; "
                                                       "{{files_path}} for an `upload`).")
    request: dict[str, Any] | None = Field(default=None, description="JSON body, with placeholders.")
    upload: Upload | None = Field(default=None, description="A multipart upload sent instead of a JSON `request` "
                                                            "(a POST, by default to {{files_path}}).")
    stream: bool | None = Field(default=None, description="Default: follow the run's mode for POST to "
                                                         "the surface's path, never stream otherwise.")
    continues: str | None = Field(default=None, description="The step whose conversation this one continues "
                                                             "(normally inferred).")
    modes: list[Mode] | None = Field(default=None, description="Run this step only in these stream modes.")
    wait: Annotated[float, Field(ge=0, le=60)] | Wait = Field(
        default=0, description="Before sending: a pause in seconds, for where time itself is meant (a TTL to "
                               "pass), or `{until, timeout}` to wait for something to happen.")
    poll: Poll | None = None
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers for this step.")
    send: bool = Field(default=True, description="False: send nothing, only wait (`wait`), e.g. until what an "
                                                 "earlier step started has reached the model.")
    disconnect: Disconnect | None = None
    new_connection: bool = Field(default=False, description="In `websocket` mode, send this step's create over a "
                                                             "new connection (the last one closed, and what it kept "
                                                             "with it); no effect over HTTP.")
    model: list[ModelTurn] = Field(default_factory=list, description="The scripted model's turns in this step, "
                                                                      "with placeholders (e.g. an uploaded file's id "
                                                                      "for a file citation).")
    expect: Expect = Field(default_factory=Expect)
    per_mode: dict[Mode, Expect] = Field(
        default_factory=dict, description="Where OpenAI itself differs by stream mode: fields set here replace "
                                          "those of `expect` in that mode.")

    def expectation(self, mode: Mode) -> Expect:
        override = self.per_mode.get(mode)
        if override is None:
            return self.expect
        return self.expect.model_copy(update={name: getattr(override, name) for name in override.model_fields_set})

    @model_validator(mode="after")
    def _valid(self) -> Step:
        if not STEP_ID.match(self.id):
            raise ValueError(f"step id {self.id!r} must match {STEP_ID.pattern}")
        if not self.send:
            idle = sorted(self.model_fields_set & {"request", "upload", "path", "method", "stream", "headers",
                                                   "disconnect", "poll", "model", "expect", "per_mode"})
            if idle:
                raise ValueError(f"a step that sends nothing has nothing of its own to judge or send, so "
                                 f"{', '.join(idle)} would never be used: state what earlier steps caused in their "
                                 "own `expect.upstream` (judged once the run is over), and what to wait for in "
                                 "`wait`")
            if "wait" not in self.model_fields_set:
                raise ValueError("a step that sends nothing only waits: give it a `wait`")
        if self.upload is not None:
            if self.request is not None:
                raise ValueError("give a JSON `request` or a multipart `upload`, not both")
            if self.method != "POST":
                raise ValueError(f"an `upload` is a POST, not a {self.method}")
        return self


class ConfiguredServer(Strict):
    """An MCP fixture the gateway knows from its own configuration, not from the request."""

    label: str
    fixture: str
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    hidden: bool = False
    require_approval: Literal["always", "never"] = "never"


class GatewaySetup(Strict):
    """Gateway configuration a scenario needs. Only targets the harness configures itself
    (the reference gateway, peer profiles) can run such a scenario; others report it as
    unsupported. Fields left out keep the gateway's defaults; the harness allows its loopback
    fixtures in the outbound policy unless `outbound_allow` says otherwise."""

    mcp_servers: list[ConfiguredServer] = Field(default_factory=list)
    upstream_wire: Literal["responses", "chat", "anthropic"] | None = None
    outbound_allow: list[str] | None = None
    outbound_block: list[str] | None = None
    tool_cache_ttl_s: float | None = Field(default=None, ge=0)
    chat_max_rounds: int | None = Field(default=None, ge=1, le=50)
    chat_deadline_s: float | None = Field(default=None, gt=0)
    chat_stream_mode: Literal["final_only", "disabled"] | None = None
    max_concurrent_runs: int | None = Field(default=None, ge=1)

    def settings(self) -> dict[str, Any]:
        """The gateway settings this setup changes (MCP servers aside)."""
        return {name: tuple(value) if isinstance(value, list) else value
                for name, value in self.model_dump(exclude={"mcp_servers"}).items() if value is not None}


class SearchFinds(Strict):
    """What the search fixture answers to one query (the exact text the gateway searches for)."""

    query: str = Field(min_length=1)
    results: list[FoundPage] = Field(description="The pages found, best first (the fixture filters them by the "
                                                 "search's allowed_domains and cuts them to its max_results).")


class LiveSetup(Strict):
    """How the scenario runs against a live model (OpenAI itself), which cannot be scripted:
    what to add to each request to steer it, and which parts of the answer the model decides.
    A scenario without this section is reported as unsupported on a live target."""

    skip: str | None = Field(default=None, description="Why the scenario cannot run live (reported as "
                                                       "unsupported, with this reason).")
    steer: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Step id -> request fields merged into that step's request on a live "
                                          "target (tool_choice, a prompt that makes the model call the tool).")
    model_dependent: list[ModelDependent] = Field(
        default_factory=list, description="Expectations the live model decides: a difference there is a note.")
    retries: int = Field(default=0, ge=0, le=5, description="Extra attempts when a live run fails (the model is "
                                                             "not deterministic); the report names the attempt.")


class Scenario(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    tags: list[str] = Field(default_factory=list)
    evidence: Evidence
    surface: Surface = Field(default="responses", description="The endpoint the scenario's requests go to.")
    openai_counterpart: bool = Field(default=True, description="False for gateway-policy scenarios: OpenAI has "
                                                               "no such behaviour to compare with.")
    gateway: GatewaySetup | None = None
    live: LiveSetup | None = None
    modes: list[Mode] = Field(default_factory=lambda: list(MODES), min_length=1, description=(
        "The modes it runs in (left out: every one it can; not `websocket` on the chat surface or with a "
        "background response, which WebSocket mode has not)."))
    mcp: list[str] = Field(default_factory=list, description="MCP fixture servers the scenario uses.")
    search: list[SearchFinds] = Field(
        default_factory=list, description="What the search fixture finds for each query during the scenario's runs "
                                          "(any other query finds nothing). Another scenario may state the same "
                                          "query only with the same results.")
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _modes_it_can_run_in(cls, data: Any) -> Any:
        if isinstance(data, dict) and "modes" not in data:
            return data | {"modes": default_modes(data)}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.evidence.unrecorded and (marked := [s.id for s in self.steps if s.inferred is not None]):
            raise ValueError(f"the scenario is unrecorded throughout, so `inferred` on step(s) {', '.join(marked)} "
                             "says nothing more: say what is inferred in `evidence.note`")
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"step id {step.id!r} is used twice")
            if step.continues is not None and step.continues not in seen:
                raise ValueError(f"step {step.id!r} continues {step.continues!r}, which is not an earlier step")
            seen.add(step.id)
        if self.live is not None and (unknown := sorted(set(self.live.steer) - seen)):
            raise ValueError(f"live.steer names step(s) {', '.join(unknown)}, which the scenario does not have")
        queries = [entry.query for entry in self.search]
        if (repeated := next((query for query in queries if queries.count(query) > 1), None)) is not None:
            raise ValueError(f"search: the query {repeated!r} is stated twice")
        configured = [s.fixture for s in self.gateway.mcp_servers] if self.gateway else []
        for name in [*self.mcp, *configured]:
            if name not in FIXTURE_SERVERS:
                raise ValueError(f"unknown MCP fixture {name!r} (known: {', '.join(sorted(FIXTURE_SERVERS))})")
        return self

    def secrets(self) -> list[str]:
        """The values this scenario puts where secrets go, which a run removes from all it writes:
        its MCP tools' `authorization` and header values (wherever a request or a live steer holds
        one), its steps' credential headers (`Authorization`, `api-key`, ...) and the MCP
        authorization it expects upstream. A value elsewhere is never a secret by its key's name
        (`metadata: {api_key: completed}` would otherwise blank every `completed` of the run)."""
        headers = [value for step in self.steps for name, value in step.headers.items() if name.lower() in SECRET_KEYS]
        expected = [upstream.mcp_authorization for upstream in self._upstream_expectations()
                    if upstream.mcp_authorization is not None]
        return [*tool_secrets(self.model_dump(mode="json")), *headers, *expected]

    def _upstream_expectations(self) -> Iterator[UpstreamExpect]:
        def of(expect: Expect) -> Iterator[UpstreamExpect]:
            if expect.upstream is not None:
                yield expect.upstream
            for variant in expect.variants or ():
                yield from of(variant.expect)

        for step in self.steps:
            yield from of(step.expect)
            if isinstance(step.wait, Wait) and step.wait.until.upstream is not None:
                yield step.wait.until.upstream

    @property
    def fixtures(self) -> list[str]:
        """Every MCP fixture the scenario needs: named in requests or in the gateway setup."""
        configured = [s.fixture for s in self.gateway.mcp_servers] if self.gateway else []
        return sorted({*self.mcp, *configured})

    def search_catalogue(self) -> dict[str, list[dict[str, str]]]:
        """What the search fixture is to find, as it is registered: query -> pages, best first."""
        return {entry.query: [page.model_dump() for page in entry.results] for entry in self.search}

    def why_not_live(self, reachable_mcp: Collection[str]) -> str | None:
        """Why the scenario cannot run against a live model (OpenAI itself), or None when it can
        with the MCP fixtures in `reachable_mcp` served where that model reaches them."""
        if not self.openai_counterpart:
            return "a gateway-policy scenario: OpenAI has no such behaviour to run live"
        if self.gateway is not None:
            return "the scenario configures the gateway (its `gateway:` section), which a live model has none of"
        if self.live is None:
            return "the scenario scripts the model and has no `live:` section saying how to steer a live one"
        if self.live.skip:
            return self.live.skip
        if any(isinstance(step.wait, Wait) or (step.disconnect and step.disconnect.when) for step in self.steps):
            return "the scenario waits for what reaches the scripted model and the MCP fixtures, which a live run lacks"
        if missing := [name for name in self.fixtures if name not in reachable_mcp]:
            return (f"MCP fixture {', '.join(missing)} has no public URL a live model can reach "
                    f"(--public-mcp {missing[0]}=URL)")
        return None


def default_modes(raw: dict[str, Any]) -> list[Mode]:
    """The modes a scenario (its file's mapping) runs in when it names none: every one some step
    runs in, but a WebSocket for a scenario on the chat surface or one creating a background
    response."""
    steps = [step for step in raw.get("steps") or [] if isinstance(step, dict)] if isinstance(raw.get("steps"), list) \
        else []
    background = any(isinstance(step.get("request"), dict) and step["request"].get("background") is True
                     for step in steps)
    candidates = HTTP_MODES if raw.get("surface") == "chat" or background else MODES
    stepped = [mode for mode in candidates
               if any(not isinstance(step.get("modes"), list) or mode in step["modes"] for step in steps)]
    return stepped or list(candidates)


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files, as shipped for editors."""
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://responses-parity.dev/scenario.v{FORMAT_VERSION}.schema.json"
    return schema
