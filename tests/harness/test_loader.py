"""Scenario files: one-line errors naming file, scenario and field; broken files lose nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_scenario

from responses_parity.harness.scenario.loader import builtin_scenarios_dir, load

GOOD = """
id: good
title: good
evidence: {recordings: [stream-text__openllmetry__1]}
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hi"}
    model: [{text: "Hello"}]
    expect: {status: completed}
"""


def test_a_typo_in_a_field_name_is_one_line_naming_file_scenario_and_field(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD.replace("expect:", "expct:"), "typo.yaml")
    catalogue = load([tmp_path])
    assert [str(e) for e in catalogue.errors] == [
        f"{tmp_path / 'typo.yaml'}: scenario 'good': steps[0].expct: unknown field (did you mean 'expect'?)"
    ]


def test_a_nested_typo_suggests_the_field_of_that_level(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD.replace("{status: completed}", "{stauts: completed}"))
    assert catalogue_messages(tmp_path) == [
        "scenario 'good': steps[0].expect.stauts: unknown field (did you mean 'status'?)"]


def test_a_broken_file_does_not_stop_the_others(tmp_path: Path) -> None:
    write_scenario(tmp_path, "id: broken\nsteps: [\n", "broken.yaml")
    write_scenario(tmp_path, GOOD, "good.yaml")
    catalogue = load([tmp_path])
    assert [s.scenario.id for s in catalogue.scenarios] == ["good"]
    assert len(catalogue.errors) == 1 and "not valid YAML" in catalogue.errors[0].message


def test_a_placeholder_must_name_an_earlier_step(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD.replace('input: "Hi"', 'input: "{{later.response.id}}"'))
    assert catalogue_messages(tmp_path) == [
        "scenario 'good': steps[0].request.input: '{{later.response.id}}': 'later' is neither an earlier step nor a "
        "built-in name (known: chat_path, conversations_path, files_path, mcp, model, responses_path, run, "
        "vector_stores_path)"]


MCP = """
id: mcp
title: mcp
evidence: {contract: "5"}
mcp: [calc]
steps:
  - id: ask
    request:
      model: "{{model}}"
      input: "Add"
      tools: [{type: mcp, server_label: calc, server_url: "{{mcp.calc.url}}", require_approval: never}]
    model: [{call: {tool: add, arguments: {a: 1, b: 2}}}, {text: "3"}]
    expect:
      status: completed
      output: [mcp_list_tools, {type: mcp_call, name: add}, message]
      upstream: {tool_runs: {add: 1}, never_sent: [mcp_list_tools]}
  - id: again
    method: GET
    path: "{{responses_path}}/{{ask.response.id}}"
    expect: {http_status: 200}
"""


@pytest.mark.parametrize(("old", "new", "message"), [
    ("tool_runs: {add: 1}", "tool_runs: {ad: 0}",
     "steps[0].expect.upstream.tool_runs.ad: no MCP fixture of the scenario offers a tool 'ad', and no request "
     "declares one (did you mean 'add'?) (known: add, echo, fail, sleep)"),
    ("tool_runs: {add: 1}", "tool_runs: {calc.ad: 1}",
     "steps[0].expect.upstream.tool_runs.calc.ad: the MCP fixture 'calc' has no tool 'ad' (did you mean 'add'?)"),
    ("{call: {tool: add,", "{call: {tool: addd,",
     "steps[0].model[0].call.tool: no MCP fixture of the scenario offers a tool 'addd', and no request declares "
     "one (did you mean 'add'?) (known: add, echo, fail, sleep)"),
    ("never_sent: [mcp_list_tools]", "never_sent: [mcp_list_tool]",
     "steps[0].expect.upstream.never_sent[0]: 'mcp_list_tool' is not an item type (did you mean 'mcp_list_tools'?)"),
    ("output: [mcp_list_tools,", "output: [mcp_list_tool,",
     "steps[0].expect.output[0].type: 'mcp_list_tool' is not an output item type (did you mean 'mcp_list_tools'?)"),
    ("status: completed", "status: complete",
     "steps[0].expect.status: 'complete' is not a Response status (did you mean 'completed'?)"),
    ("{type: mcp_call, name: add}", "{type: mcp_call, name: add, role: assistant}",
     "steps[0].expect.output[1].role: a mcp_call item has no `role`"),
    ("{type: mcp_call, name: add}", "{type: mcp_call, name: add, status: done}",
     "steps[0].expect.output[1].status: 'done' is not a status of a mcp_call item"),
    ("{{ask.response.id}}", "{{ask.respones.id}}",
     "steps[1].path: '{{responses_path}}/{{ask.respones.id}}': ask.respones: a step gives response, output, status, "
     "body, completion (did you mean 'response'?)"),
    ("{{ask.response.id}}", "{{ask.output.mcp_call.idd}}",
     "steps[1].path: '{{responses_path}}/{{ask.output.mcp_call.idd}}': ask.output.mcp_call.idd: no such item field "
     "(did you mean 'id'?)"),
    ("{{mcp.calc.url}}", "{{mcp.calk.url}}",
     "steps[0].request.tools[0].server_url: '{{mcp.calk.url}}': mcp.calk: not an MCP fixture of the scenario (add it "
     "to `mcp`) (did you mean 'calc'?)"),
    ("  - id: again\n", '  - id: again\n    title: "{{model}}"\n',
     "steps[1].title: '{{model}}': this field is used as written, placeholders are not rendered here (they "
     "are in a step's path, request, upload, headers, model turns, expectations and poll.until)"),
    ('{text: "3"}', '{text: "{{again.response.id}}"}',
     "steps[0].model[1].text: '{{again.response.id}}': step 'again' comes later; a placeholder can only use earlier "
     "steps"),
    ("{call: {tool: add,", "{call: {tool: web_search,",
     "steps[0].model[0].call.tool: no MCP fixture of the scenario offers a tool 'web_search', and no request "
     "declares one (known: add, echo, fail, sleep)"),
    ("expect: {http_status: 200}", "expect: {http_status: 200, events: [response.completed]}",
     "steps[1].expect.events: is compared only on streamed answers, and this step never streams"),
    ("expect: {http_status: 200}", 'expect: {http_status: "200"}',
     "steps[1].expect.http_status: Input should be a valid integer (got '200')"),
    ("expect: {http_status: 200}", "expect: {http_status: 200, response: {backgroud: true}}",
     "steps[1].expect.response.backgroud: 'backgroud' is not a Response field (did you mean 'background'?)"),
    ("expect: {http_status: 200}", "per_mode: {stream: {http_status: 200}}\n    modes: [nonstream]",
     "steps[1].per_mode.stream: the step does not run in stream mode: never judged"),
    ("expect: {http_status: 200}", "new_connection: true",
     "steps[1].new_connection: the step never creates over a WebSocket, so it opens no connection"),
])
def test_validation_rejects_what_would_check_nothing(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in MCP
    write_scenario(tmp_path, MCP.replace(old, new))
    assert catalogue_messages(tmp_path) == [f"scenario 'mcp': {message}"]


@pytest.mark.parametrize(("placeholder", "message"), [
    ("{{ ask.body.__class__.__mro__[1].__subclasses__() }}", "`__class__`: a name starting with `_` is not allowed"),
    ("{{ ask.response.id.upper() }}", "`ask.response.id.upper(...)`: a call is not allowed"),
    ("{{ 9 ** 999999999 }}", "`**` (a power) is not allowed; only an integer offset is: `+ N` or `- N`"),
    ('{{ "x" * 200000000 }}', "`*` (a product or a repetition) is not allowed; only an integer offset is: `+ N` or "
                              "`- N`"),
    ('{{ ask.response.id + "x" }}', "`+ \"x\"`: string concatenation is not allowed; only an integer offset is: `+ N` "
                                    "or `- N`"),
    ('{{ ask.response.id ~ "x" }}', "`~` (string concatenation) is not allowed; only an integer offset is: `+ N` or "
                                    "`- N`"),
    ("{{ ask.response.id | upper }}", "filters (`|`) are not allowed"),
    ("{% if ask %}x{% endif %}", "`{%` starts a statement, and placeholders have none (a literal `{%` is written "
                                 "`{{ \"{%\" }}`)"),
    ("{{ mcp.calc.failing_url(401) }}", "`mcp.calc.failing_url(401)`: a call is not allowed; write "
                                        "`mcp.calc.failing_url[401]`"),
    ("{{ mcp.calc.failing_url }}", "mcp.calc.failing_url is selected by the HTTP status it answers with: "
                                   "mcp.calc.failing_url[401] (100 to 599)"),
    ("{{ mcp.calc.failing_url[600] }}", "mcp.calc.failing_url is selected by the HTTP status it answers with: "
                                        "mcp.calc.failing_url[401] (100 to 599)"),
    ("{{ mcp.calc }}", "mcp.calc: name one of its URLs (url, sse_url, failing_url[<status>])"),
    ("{{ mcp }}", "`mcp` holds the MCP fixtures: name one's URL (mcp.<fixture>.url; url, sse_url, "
                  "failing_url[<status>])"),
    ("{{ mcp.calc.url.x }}", "mcp.calc.url is text: it has no 'x'"),
    ("{{ ask }}", "`ask` is a step: name what of its answer (ask.response, ask.output, ask.status, ask.body, "
                  "ask.completion)"),
    ("{{ model + 1 }}", "model is text: an offset (`+ N`, `- N`) applies to an integer"),
    ("{{ run.token - 1 }}", "run.token is text: an offset (`+ N`, `- N`) applies to an integer"),
])
def test_a_placeholder_outside_the_language_is_one_line_naming_the_field(tmp_path: Path, placeholder: str,
                                                                        message: str) -> None:
    text = MCP.replace('"{{responses_path}}/{{ask.response.id}}"', f"'{{{{responses_path}}}}/{placeholder}'")
    assert catalogue_messages(tmp_path, text) == [
        f"scenario 'mcp': steps[1].path: '{{{{responses_path}}}}/{placeholder}': {message}"]


def test_a_literal_opening_and_an_offset_validate(tmp_path: Path) -> None:
    text = MCP.replace('"{{responses_path}}/{{ask.response.id}}"',
                       "'{{responses_path}}/{{ask.response.id}}?after={{ ask.status + 1 }}&q={{ \"{{\" }}'")
    assert catalogue_messages(tmp_path, text) == []


def test_a_long_hostile_placeholder_is_refused_and_shown_cut(tmp_path: Path) -> None:
    placeholder = "{{ ask.body" + ".x" * 100_000 + "() }}"
    messages = catalogue_messages(tmp_path, MCP.replace('"{{responses_path}}/{{ask.response.id}}"',
                                                        f"'{placeholder}'"))
    assert messages == [f"scenario 'mcp': steps[1].path: '{placeholder[:160]}'... ({len(placeholder)} characters): "
                        "the placeholder at character 0 is longer than 200 names, selectors and operators"]


UPLOAD = """
id: upload
title: upload
evidence: {contract: "Files API", unrecorded: true}
steps:
  - id: put
    upload: {file: {name: notes.txt, content: "Notes"}, purpose: assistants}
  - id: get
    method: GET
    path: "{{files_path}}/{{put.body.id}}"
"""


@pytest.mark.parametrize(("old", "new", "message"), [
    ("purpose: assistants}", "purpose: assistants}\n    request: {purpose: assistants}",
     "steps[0]: give a JSON `request` or a multipart `upload`, not both"),
    ("  - id: put\n", "  - id: put\n    method: DELETE\n", "steps[0]: an `upload` is a POST, not a DELETE"),
    ("{name: notes.txt, content: \"Notes\"}", "{name: notes.txt}", "steps[0].upload.file.content: Field required"),
    ("purpose: assistants}", "purpose: assistants, filename: x}",
     "steps[0].upload.filename: unknown field (did you mean 'file'?)"),
    ('content: "Notes"', 'content: "{{later.body.id}}"',
     "steps[0].upload.file.content: '{{later.body.id}}': step 'later' comes later; a placeholder can only use earlier "
     "steps"),
])
def test_an_upload_step_is_checked_naming_the_field(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in UPLOAD
    later = "  - id: later\n    method: GET\n    path: /v1/files\n" if "later" in new else ""
    text = UPLOAD.replace(old, new) + later
    assert catalogue_messages(tmp_path, text) == [f"scenario 'upload': {message}"]


def test_every_problem_is_reported_in_one_pass(tmp_path: Path) -> None:
    broken = (MCP.replace("status: completed", 'status: completed\n      usage: "yes"')
              .replace("never_sent: [mcp_list_tools]", "never_sent: [mcp_list_tool]")
              .replace("{{ask.response.id}}", "{{nosuch.response.id}}"))
    assert [message.split(": ", 2)[1] for message in catalogue_messages(tmp_path, broken)] == [
        "steps[0].expect.usage", "steps[0].expect.upstream.never_sent[0]", "steps[1].path"]


def test_an_unknown_mcp_fixture_is_named(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD + "mcp: [nosuch]\n")
    assert catalogue_messages(tmp_path) == [
        "scenario 'good': unknown MCP fixture 'nosuch' (known: calc, shoddy, strings)"
    ]


def test_duplicate_ids_across_files_are_reported(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD, "a.yaml")
    write_scenario(tmp_path, GOOD, "b.yaml")
    catalogue = load([tmp_path])
    assert len(catalogue.scenarios) == 1
    assert "id already used by" in catalogue.errors[0].message


def test_yaml_keys_like_on_stay_strings(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD.replace("{status: completed}", "{interrupt: {on: none}}"))
    catalogue = load([tmp_path])
    assert catalogue.errors == []
    assert catalogue.scenarios[0].scenario.steps[0].expect.interrupt.on == "none"


def test_every_built_in_scenario_loads() -> None:
    catalogue = load([builtin_scenarios_dir()])
    assert catalogue.errors == []
    assert len(catalogue.scenarios) >= 6


def test_selection_by_id_and_tag(tmp_path: Path) -> None:
    write_scenario(tmp_path, GOOD, "a.yaml")
    write_scenario(tmp_path, GOOD.replace("id: good", "id: other") + "tags: [x]\n", "b.yaml")
    catalogue = load([tmp_path])
    assert [s.scenario.id for s in catalogue.select(ids=["good"])] == ["good"]
    assert [s.scenario.id for s in catalogue.select(tags=["x"])] == ["other"]
    assert len(catalogue.select()) == 2


def catalogue_messages(directory: Path, text: str | None = None) -> list[str]:
    if text is not None:
        write_scenario(directory, text)
    return [error.message for error in load([directory]).errors]
