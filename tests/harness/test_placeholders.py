"""Placeholders take values from earlier steps, keep types for whole-value placeholders, and
fail with a message naming the place. Their language reaches dicts, lists and the harness's
views and nothing else: no `_` names, no calls, no operator but a bounded integer offset, and
a bound on what one field's placeholders produce."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_scenario
from parity_process import PARITY, running

from responses_parity.harness.errors import HarnessError
from responses_parity.harness.scenario.fixtures import McpFixture
from responses_parity.harness.scenario.placeholders import (MAX_RENDERED_CHARS, OutputView, PlaceholderError, Reference,
                                                            escaped, parse, render)

CONTEXT = {
    "model": "m",
    "ask": {"response": {"id": "resp_1", "max_output_tokens": 64},
            "output": OutputView([{"type": "mcp_list_tools", "id": "mcpl_1"},
                                  {"type": "function_call", "call_id": "call_9", "id": "fc_1"}]),
            "status": 200,
            "body": {"created_at": 1700000000, "data": [{"id": "a"}, {"id": "b"}], "odd-key": {"x": None},
                     "flag": True, "items": "the key, not a method"}},
    "mcp": {"calc": McpFixture("calc", "http://127.0.0.1:9", "r1")},
}


def test_a_whole_value_placeholder_keeps_its_type() -> None:
    assert render("{{ ask.response.max_output_tokens }}", CONTEXT, "x") == 64
    assert render("{{ask.output.function_call}}", CONTEXT, "x") == {"type": "function_call", "call_id": "call_9",
                                                                    "id": "fc_1"}
    assert render("  {{ask.body.flag}} ", CONTEXT, "x") is True
    assert render("{{ask.body.data}}", CONTEXT, "x") == [{"id": "a"}, {"id": "b"}]
    assert render('{{ask.body["odd-key"].x}}', CONTEXT, "x") is None
    assert render("{{ask.output}}", CONTEXT, "x") == [{"type": "mcp_list_tools", "id": "mcpl_1"},
                                                     {"type": "function_call", "call_id": "call_9", "id": "fc_1"}]


def test_text_with_placeholders_is_a_string() -> None:
    assert render("id={{ask.response.id}}, model={{model}}", CONTEXT, "x") == "id=resp_1, model=m"
    assert render("{{model}}/{{ask.response.id}}", CONTEXT, "x") == "m/resp_1"


def test_inside_text_a_value_that_is_no_string_is_written_as_json() -> None:
    assert render("status {{ask.status}}, flag {{ask.body.flag}}, x {{ask.body['odd-key']}}, {{ask.body.data[0]}}",
                  CONTEXT, "x") == 'status 200, flag true, x {"x":null}, {"id":"a"}'


@pytest.mark.parametrize(("text", "value"), [
    ("{{ask.body.data[1].id}}", "b"),
    ("{{ask.body.data[-1].id}}", "b"),
    ('{{ask.body["data"][0]["id"]}}', "a"),
    ("{{ask.body['odd-key']}}", {"x": None}),
    ("{{ask.output.function_call.call_id}}", "call_9"),
    ("{{ask.output['function_call'].id}}", "fc_1"),
    ("{{ask.output[0].id}}", "mcpl_1"),
    ("{{ask.body.items}}", "the key, not a method"),
    ("{{mcp.calc.url}}", "http://127.0.0.1:9/r/r1/mcp"),
    ("{{mcp.calc.sse_url}}", "http://127.0.0.1:9/r/r1/sse"),
    ("{{mcp.calc.failing_url[401]}}", "http://127.0.0.1:9/r/r1/status/401/mcp"),
])
def test_each_selector_reaches_dicts_lists_and_views(text: str, value: object) -> None:
    assert render(text, CONTEXT, "x") == value


def test_an_integer_offset_applies_to_integers_only() -> None:
    assert render("{{ask.body.created_at + 3600}}", CONTEXT, "x") == 1700003600
    assert render("{{ ask.status - 200 }}", CONTEXT, "x") == 0
    assert render("at {{ask.body.created_at + 1}}", CONTEXT, "x") == "at 1700000001"
    with pytest.raises(HarnessError, match=r"x: cannot resolve .*`\+ 1` applies to an integer, and ask.response.id "
                                           r"is a string"):
        render("{{ask.response.id + 1}}", CONTEXT, "x")
    with pytest.raises(HarnessError, match=r"ask\.body\.flag is a boolean"):
        render("{{ask.body.flag + 1}}", CONTEXT, "x")


def test_a_literal_opening_is_written_as_a_string() -> None:
    assert render('{{ "{{" }}model}}', CONTEXT, "x") == "{{model}}"
    assert render("{{ '{%' }} if x %}", CONTEXT, "x") == "{% if x %}"
    assert render('{{ "}}" }}', CONTEXT, "x") == "}}"


@pytest.mark.parametrize("text", ["{{model}}", "{{ ask.__class__ }}", "a {% for x in y %} {{{", "{{{{%%}}}}", "{",
                                  "{{ '{{' }}", "}} {{"])
def test_escaped_text_renders_to_itself(text: str) -> None:
    value = {"k{{": [text, {"nested": text}]}
    assert render(escaped(value), CONTEXT, "x") == value


@pytest.mark.parametrize(("text", "message"), [
    ("{{ ask.body.__class__.__mro__[1].__subclasses__() }}", "`__class__`: a name starting with `_` is not allowed"),
    ("{{ ask.body._private }}", "`_private`: a name starting with `_` is not allowed"),
    ("{{ cycler.__init__.__globals__.os.popen('id').read() }}", "`__init__`: a name starting with `_`"),
    ("{{ 9 ** 999999999 }}", r"`\*\*` \(a power\) is not allowed; only an integer offset is: `\+ N` or `- N`"),
    ("{{ 'x' * 200000000 }}", r"`\*` \(a product or a repetition\) is not allowed"),
    ("{{ ask.status / 2 }}", "`/` is not allowed"),
    ("{{ ask.status % 2 }}", "`%` is not allowed"),
    ("{{ model ~ model }}", r"`~` \(string concatenation\) is not allowed"),
    ("{{ model + 'x' }}", r"`\+ 'x'`: string concatenation is not allowed"),
    ("{{ 'a' + 'b' }}", r"`\+` after a string: string concatenation is not allowed"),
    ("{{ model + model }}", r"`\+` takes an integer literal, not `model`"),
    ("{{ mcp.calc.failing_url(401) }}", r"`mcp.calc.failing_url\(401\)`: a call is not allowed; write "
                                        r"`mcp.calc.failing_url\[401\]`"),
    ("{{ ask.body.keys() }}", r"`ask.body.keys\(...\)`: a call is not allowed"),
    ("{{ (model) }}", "parentheses are not allowed"),
    ("{{ model | upper }}", r"filters \(`\|`\) are not allowed"),
    ("{% for x in model %}{% endfor %}", r"`{%` starts a statement, and placeholders have none"),
    ("{{ ask.created_at + 1234567890123 }}", "the integer 123456789012... is longer than 12 digits"),
    ("{{ ask.body.data[99999999999999] }}", "longer than 12 digits"),
    ("{{ model", "the `{{` at character 0 is never closed by `}}`"),
    ("{{ 'open }}", "a string opened with ' is never closed"),
    ("{{ }}", "is empty"),
    ("{{ 3 }}", "a placeholder starts with a name"),
    ("{{ ask.body[model] }}", "`\\[` takes an integer or a quoted string, not `model`"),
    ("{{ ask. }}", "`.` is followed by a name"),
    ("{{ ask.body if x }}", "unexpected `if`"),
])
def test_what_is_outside_the_language_is_refused(text: str, message: str) -> None:
    with pytest.raises(PlaceholderError, match=message):
        parse(text)
    with pytest.raises(HarnessError, match=rf"^steps\[1\].request.input: cannot resolve .*{message}"):
        render(text, CONTEXT, "steps[1].request.input")


def test_parsing_gives_the_paths_a_string_names() -> None:
    template = parse('{{responses_path}}/{{ask.body.data[0]["id"]}}?after={{ ask.status - 1 }}')
    assert template.references == [Reference("responses_path"), Reference("ask", ("body", "data", 0, "id")),
                                   Reference("ask", ("status",), -1)]
    assert not template.whole and parse(" {{ask.status}} ").whole


def test_an_unresolvable_placeholder_names_the_place() -> None:
    with pytest.raises(HarnessError, match=r"steps\[1\].request.input: cannot resolve .*ask.output has no "
                                           r"mcp_call item \(it has: mcp_list_tools, function_call\)"):
        render("{{ask.output.mcp_call.id}}", CONTEXT, "steps[1].request.input")


def test_a_field_an_earlier_answer_lacked_is_unresolvable_at_once() -> None:
    """A gateway whose answer had no `id` must not leave an undefined value in the next request."""
    lacking = {"ask": {"response": {"object": "response"}}}
    with pytest.raises(HarnessError, match=r"steps\[1\].request.previous_response_id: cannot resolve "
                                           r"'{{ask.response.id}}': ask.response has no 'id'"):
        render({"previous_response_id": "{{ask.response.id}}"}, lacking, "steps[1].request")


@pytest.mark.parametrize(("text", "message"), [
    ("{{ask.body.data[2]}}", r"ask.body.data has 2 item\(s\): no \[2\]"),
    ("{{ask.body.data.id}}", "ask.body.data is a list: it has no 'id'"),
    ("{{ask.response.id.x}}", "ask.response.id is a string: it has no 'x'"),
    ("{{ask.body['odd-key'].x.y}}", "ask.body\\['odd-key'\\].x is null: it has no 'y'"),
    ("{{ask.output.select}}", "ask.output has no select item"),
    ("{{ask.output[5]}}", r"ask.output has 2 output item\(s\), no \[5\]"),
    ("{{mcp.calc.failing_url}}", r"mcp.calc.failing_url needs the HTTP status it answers with: failing_url\[401\]"),
    ("{{mcp.calc.failing_url[9]}}", r"is selected by an HTTP status \(100 to 599\), not \[9\]"),
    ("{{mcp.calc}}", "mcp.calc is an MCP fixture: name one of its URLs"),
    ("{{mcp.calc.base_url}}", "mcp.calc has no 'base_url'"),
    ("{{mcp}}", "holds more than data"),
    ("{{nobody.response}}", "'nobody' is neither an earlier step nor a built-in name"),
])
def test_a_path_looks_only_where_a_placeholder_may(text: str, message: str) -> None:
    """Views answer by their own lookup (never by attribute), dicts by key, lists by position."""
    with pytest.raises(HarnessError, match=message):
        render(text, CONTEXT, "x")


def test_what_one_field_s_placeholders_produce_is_bounded() -> None:
    big = {"big": "x" * (MAX_RENDERED_CHARS // 4), "model": "m"}
    assert len(render(["{{big}}"] * 3, big, "x")) == 3
    with pytest.raises(HarnessError, match=f"would produce more than {MAX_RENDERED_CHARS} characters"):
        render(["{{big}}"] * 4, big, "x")
    with pytest.raises(HarnessError, match=f"would produce more than {MAX_RENDERED_CHARS} characters"):
        render({"input": "{{big}}{{big}}{{big}}{{big}}"}, big, "x")
    assert render(["{{model}}"] * 100_000, big, "x") == ["m"] * 100_000  # texts already in the file are free


def test_a_placeholder_that_gives_a_value_of_the_wrong_type_could_not_run(run_scenario) -> None:  # type: ignore[no-untyped-def]
    result = run_scenario("""
id: wrong-type
title: a number where text is expected
evidence: {contract: "4.1", unrecorded: true}
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hi"}
    model: [{text: "Hello"}]
  - id: again
    method: GET
    path: "{{responses_path}}/resp_nope"
    expect: {error: {message_contains: "{{ask.status}}"}}
""")
    assert result.outcome == "could_not_run"
    assert "steps[1] (again).expect.error.message_contains: a placeholder gave 200" in result.steps[-1].error


GOOD = """
id: good
title: a literal opening and an offset pass through to the gateway
evidence: {contract: "4.1", unrecorded: true}
modes: [nonstream]
steps:
  - id: ask
    request: {model: "{{model}}", input: 'Say {{ "{{" }}name}}', max_output_tokens: 64}
    model: [{text: "Hello"}]
    expect: {status: completed}
  - id: again
    request: {model: "{{model}}", input: "Hi", previous_response_id: "{{ask.response.id}}",
              max_output_tokens: "{{ask.response.max_output_tokens + 16}}"}
    model: [{text: "Hello again"}]
    expect: {status: completed, response: {max_output_tokens: 80}}
"""
HOSTILE = {
    "mro.yaml": "{{ ask.body.__class__.__mro__[1].__subclasses__() }}",
    "popen.yaml": "{{ (ask.body.__class__.__mro__[1].__subclasses__() | selectattr('__name__', 'equalto', "
                  "'_wrap_close') | first).__init__.__globals__.popen('touch MARKER').read() }}",
    "power.yaml": "{{ 9 ** 999999999 }}",
    "repeat.yaml": "{{ 'x' * 200000000 }}",
}


def test_hostile_placeholders_are_one_line_each_and_the_good_scenario_runs(tmp_path: Path) -> None:
    """`parity validate` names each hostile file and field; `parity run` runs the good scenario
    alone, and the placeholder that would create a file under the old renderer creates none."""
    folder, marker = tmp_path / "scenarios", tmp_path / "created-by-a-placeholder"
    folder.mkdir()
    write_scenario(folder, GOOD, "good.yaml")
    for name, placeholder in HOSTILE.items():
        hostile = GOOD.replace("id: good", f"id: {name.removesuffix('.yaml')}").replace(
            'input: "Hi"', "input: " + '"' + placeholder.replace("MARKER", str(marker)) + '"')
        write_scenario(folder, hostile, name)
    with running(tmp_path) as start:
        validated = start([str(PARITY), "validate", str(folder)], "validate")
        assert validated.process.wait(timeout=120) == 2, validated.output()
        errors = sorted(line for line in validated.output().splitlines() if line.startswith("error"))
        assert [line.split(": ")[0:3] for line in errors] == [
            [f"error {folder / name}", f"scenario '{name.removesuffix('.yaml')}'", "steps[1].request.input"]
            for name in sorted(HOSTILE)], validated.output()
        assert "`__class__`: a name starting with `_` is not allowed" in errors[0]
        assert "`**` (a power) is not allowed" in errors[2]
        ran = start([str(PARITY), "run", str(folder), "--report-dir", str(tmp_path / "reports")], "run")
        assert ran.process.wait(timeout=300) == 2, ran.output()
    assert "1 passed, 0 failed, 0 could not run" in ran.output()
    assert not marker.exists()

