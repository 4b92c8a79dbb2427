"""Target profiles: the shipped ones load and render, broken ones are named precisely, and
what a profile says it lacks or rewrites reaches the scenarios it should."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest

from responses_parity.harness.engine.gateway_process import _FreePorts, installation_for
from responses_parity.harness.engine.profile import ProfileError, find_profile, load_profile, profile_paths, render
from responses_parity.harness.engine.rewrites import Rewrites
from responses_parity.harness.report.matrix import describe_target
from responses_parity.harness.scenario.capabilities import (HOSTED_TOOLS, MEANING, Capability, missing_capability,
                                                            required_capabilities)
from responses_parity.harness.scenario.fixtures import McpFixture
from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load
from responses_parity.harness.scenario.model import Scenario

SHIPPED = ["smg", "llama-stack", "ogx", "open-responses-server", "litellm"]
TEST_PROFILES = Path(__file__).parent / "profiles"


def _scenario(scenario_id: str):
    catalogue = load([builtin_scenarios_dir()])
    return next(s.scenario for s in catalogue.scenarios if s.scenario.id == scenario_id)


def test_every_peer_named_by_the_recipe_has_a_shipped_profile() -> None:
    assert set(SHIPPED) <= set(profile_paths())


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_profile_renders_every_template(name: str) -> None:
    """Every template resolves with what a start provides (a typo would only show at start)."""
    profile = find_profile(name)
    assert profile is not None and profile.name == name
    context = {"home": "/h", "venv": "/h/venv", "bin": "/h/venv/bin", "python": "/h/venv/bin/python",
               "python_version": "3.x", "harness_python": "/usr/bin/python3", "run_dir": "/run",
               "upstream": "http://127.0.0.1:9", "ports": _FreePorts(), "secret": "sk-parity-test",
               "model": "parity-model", "mcp": {"calc": {"base_url": "http://127.0.0.1:10"}}}
    if profile.start.upstream_tls:  # what the TLS front adds
        context |= {"upstream": "https://127.0.0.1:11", "upstream_ca": "/run/tls-cert.pem"}
    texts = [*profile.start.command, *profile.start.env.values(), *profile.start.files.values(),
             profile.target.base_url, profile.target.model, *profile.target.headers.values(),
             json.dumps(profile.start.ready.body)]
    for step in profile.install.steps if profile.install else []:
        texts += step
    rendered = [render(text, context, name) for text in texts]
    assert all("{{" not in text for text in rendered)
    assert all(port > 0 for port in context["ports"].values())


@pytest.mark.parametrize(("template", "message"), [
    ("{{ ''.__class__ }}", "`.__class__`: a name starting with `_` is not allowed"),
    ("{{ mcp.calc['__class__'] }}", "access to attribute '__class__' of 'dict' object is unsafe"),
    ("{{ 'x' * 10**9 }}", r"`\*` would build a string of 1000000000 characters; a profile template builds at "
                          "most 65536"),
    ("{{ 9 ** 999999999 }}", r"`9 \*\* 999999999` is larger than a profile template may compute"),
    ("{{ '%999999999s' % 1 }}", "`%` on str and int is not allowed in a profile template"),
    ("{{ 'x' | center(999999999) }}", "the filter `center` is not allowed"),
    ("{{ '{:>999999999}'.format(1) }}", r"a profile template calls only `.items\(\)`"),
    ("{{ lipsum(999999) }}", r"a profile template calls only `.items\(\)`"),
    ("{% set a = 'x' %}", r"`{% set %}` not allowed"),
    ("{{ 'a' ~ 'b' }}", "`~` not allowed"),
    ("{% macro m() %}{{ m() }}{{ m() }}{% endmacro %}", "macros not allowed"),
    ("{% for a in mcp.keys() %}{% for b in mcp.keys() %}{% endfor %}{% endfor %}", "a loop inside a loop"),
    ("{% for c in upstream %}{% endfor %}", r"loops only over a variable's `.items\(\)`"),
    ("{% for c in range(100000) %}{% endfor %}", r"loops only over a variable's `.items\(\)`"),
    ("{{ ['x'] }}", "list literals not allowed"),
    ("{{ ('x' * 60000) + ('x' * 60000) }}", r"`\+` would build a string of 120000 characters"),
    ("{{ 'x' * 60000 }}" * 20, "the rendered text would be longer than 1048576 characters"),
])
def test_a_template_that_reaches_for_internals_or_works_without_bound_is_refused(template: str,
                                                                                message: str) -> None:
    context = {"upstream": "http://127.0.0.1:9", "mcp": {"calc": {"base_url": "http://127.0.0.1:10"}}}
    with pytest.raises(ProfileError, match=f"^start.files\\[config.yaml\\]: .*{message}"):
        render(template, context, "start.files[config.yaml]")


def test_a_template_may_loop_over_the_fixtures_and_compute_a_little() -> None:
    context = {"ports": _FreePorts(), "mcp": {"calc": {"base_url": "http://a"}, "strings": {"base_url": "http://b"}}}
    template = ("{%- for name, fixture in mcp.items() %}{{ name | upper }}={{ fixture.base_url }}/mcp "
                "{% endfor %}\n{{ ports.http + 1 - ports.http }} {{ 'ab' * 2 }} {{ 2 ** 10 }}")
    assert render(template, context, "x") == "CALC=http://a/mcp STRINGS=http://b/mcp \n1 abab 1024"


def test_a_shipped_profile_pins_the_gateway_it_installs() -> None:
    for name in SHIPPED:
        profile = find_profile(name)
        assert profile is not None and profile.install is not None
        assert any("==" in package for package in profile.install.packages), name


def test_a_broken_profile_names_its_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntitle: t\nstart: {ready: {path: /h}}\nlacks: {teleportation: nope}\n")
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    message = str(caught.value)
    assert str(path) in message and "start.command" in message and "lacks.teleportation" in message


def test_a_profile_that_is_not_yaml_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(ProfileError, match="cannot read it as YAML"):
        load_profile(path)


def test_a_user_profile_folder_adds_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "smg.yaml").write_text((TEST_PROFILES / "exits-at-once.yaml").read_text())
    with pytest.raises(ProfileError, match="differs from the file's name"):
        find_profile("smg", [tmp_path])
    assert find_profile("https://gateway.example/v1") is None
    assert find_profile("reference-process", [TEST_PROFILES]) is not None
    with pytest.raises(ProfileError, match="no such profile file"):
        find_profile(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize(("scenario_id", "needs"), [
    ("text-basic", set()),
    ("mcp-call", {"request_mcp_tools"}),
    ("mcp-call-sse", {"request_mcp_tools", "mcp_sse_transport"}),
    ("conversations-crud", {"conversations"}),
    ("background-poll", {"background"}),
    ("chat-passthrough", {"chat_completions"}),
])
def test_what_a_scenario_needs_is_told_from_its_steps(scenario_id: str, needs: set[str]) -> None:
    assert required_capabilities(_scenario(scenario_id)) == needs


def _hosted_scenario(*steps: dict) -> Scenario:
    return Scenario.model_validate({"id": "hosted", "title": "t", "evidence": {"contract": "x", "unrecorded": True},
                                    "steps": [{"id": f"s{index}", **step} for index, step in enumerate(steps)]})


@pytest.mark.parametrize(("steps", "needs"), [
    ([{"request": {"input": "q", "tools": [{"type": "web_search"}]}}], {"web_search"}),
    ([{"request": {"input": "q", "tools": [{"type": "web_search_preview_2025_03_11"}]}}], {"web_search"}),
    ([{"request": {"input": "q", "tools": [{"type": "function", "name": "web_search"}]}}], set()),
    ([{"path": "/v1/files", "request": {"purpose": "assistants"}},
      {"path": "{{ vector_stores_path }}", "request": {"name": "docs"}},
      {"request": {"input": "q", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}}],
     {"files_api", "vector_stores", "file_search"}),
    ([{"method": "GET", "path": "{{files_path}}/file_1/content"}], {"files_api"}),
    ([{"method": "GET", "path": "/v1/vector_stores/vs_1/files"}], {"vector_stores"}),
    ([{"method": "GET", "path": "/v1/filesystem"}], set()),
    ([{"path": "{{responses_path}}/compact", "request": {"model": "m", "input": "q"}}], {"compaction"}),
    ([{"request": {"input": "q", "context_management": [{"type": "compaction"}]}}], {"compaction"}),
    ([{"request": {"input": [{"type": "compaction", "encrypted_content": "gAAAAA"}]}}], {"compaction"}),
    ([{"path": "/v1/responses/input_tokens", "request": {"input": "q"}}], {"input_tokens"}),
])
def test_hosted_tools_and_their_apis_are_told_from_tools_and_paths(steps: list[dict], needs: set[str]) -> None:
    assert required_capabilities(_hosted_scenario(*steps)) == needs


def test_every_capability_has_a_meaning_and_the_hosted_tools_are_capabilities() -> None:
    assert set(MEANING) == set(get_args(Capability))
    assert set(HOSTED_TOOLS) <= set(MEANING)


def test_a_gateway_lacking_file_search_has_the_scenario_unsupported_saying_why() -> None:
    scenario = _hosted_scenario({"request": {"input": "q", "tools": [{"type": "file_search", "vector_store_ids": []}]}})
    why = missing_capability(scenario, {"file_search": "no vector_io provider (doc URL)"})
    assert why is not None and "`file_search`" in why and "no vector_io provider (doc URL)" in why
    assert missing_capability(scenario, {"web_search": "no search provider"}) is None


def test_a_gateway_lacking_websocket_mode_is_spared_only_the_socket_runs() -> None:
    scenario = _hosted_scenario({"request": {"input": "q"}})
    lacks = {"websocket": "GET /v1/responses answers 405"}
    assert missing_capability(scenario, lacks, "stream") is None
    why = missing_capability(scenario, lacks, "websocket")
    assert why is not None and "WebSocket" in why and "405" in why


def test_rewrites_touch_only_what_they_name() -> None:
    fixtures = {"calc": McpFixture("calc", "http://127.0.0.1:7", "run1")}
    body = {"input": "hi", "tools": [
        {"type": "mcp", "server_label": "calc", "server_url": fixtures["calc"].url},
        {"type": "mcp", "server_label": "far", "server_url": "https://mcp.example.org/mcp"},
        {"type": "function", "name": "f"},
    ]}
    rewritten = Rewrites(mcp_server_url="litellm_proxy/mcp/{{ fixture }}", input_as_messages=True).apply(body, fixtures)
    assert rewritten["input"] == [{"type": "message", "role": "user", "content": "hi"}]
    assert [tool.get("server_url") for tool in rewritten["tools"]] == [
        "litellm_proxy/mcp/calc", "https://mcp.example.org/mcp", None]
    assert Rewrites().apply(body, fixtures) == body
    assert body["input"] == "hi"  # the scenario's own request is never changed in place


def test_a_profile_at_another_version_installs_beside_the_shipped_one() -> None:
    shipped, older = find_profile("smg"), find_profile("smg@1.12.0")
    assert shipped is not None and older is not None and shipped.version != "1.12.0"
    assert older.identity() == {"profile": "smg", "title": "SMG 1.12.0 (OpenAI backend)", "version": "1.12.0",
                                "packages": ["smg==1.12.0"]}
    assert shipped.identity()["packages"] == [f"smg=={shipped.version}"]
    assert installation_for(older).home != installation_for(shipped).home
    assert installation_for(older).context()["version"] == "1.12.0"
    both = [describe_target(target) for target in ("smg@1.12.0", "smg")]  # two columns of one matrix
    assert [(run.name, run.title) for run in both] == [("smg@1.12.0", "SMG 1.12.0 (OpenAI backend)"),
                                                       ("smg", shipped.title)]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_profile_can_be_recorded_at_another_version(name: str) -> None:
    profile = find_profile(f"{name}@9.9.9")
    assert profile is not None and profile.version == "9.9.9" and "9.9.9" in profile.title
    assert profile.install is not None and "{{" not in "".join(profile.install.packages)
    assert any(package.endswith("==9.9.9") for package in profile.install.packages)


def test_a_version_a_profile_cannot_take_is_named(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"smg@: write <profile>@<version>"):
        find_profile("smg@")
    with pytest.raises(ProfileError, match="nothing: no such profile; the profiles: "):
        find_profile("nothing@1.0")
    with pytest.raises(ProfileError, match=r"has no `version` to replace with '2.0'"):
        find_profile("reference-process@2.0", [TEST_PROFILES])
    with pytest.raises(ProfileError, match=r"version: String should match pattern"):
        find_profile("smg@1.0;rm")
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ntitle: mine {{ version }}\nstart: {command: [x], ready: {path: /h}}\n")
    with pytest.raises(ProfileError, match=rf"{path}: title: 'version' is undefined"):
        find_profile(str(path))
