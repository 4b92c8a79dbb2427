"""Waiting for a condition instead of sleeping: a condition that never holds within its timeout
fails the step and says which part did not hold; one that holds lets the run go on at once."""

from __future__ import annotations

from typing import Any

import pytest

TEXT = """
id: waits
title: waits
evidence: {contract: "x", unrecorded: true}
mcp: [calc]
steps:
  - id: ask
    request: {model: "{{model}}", input: "Hi"}
    model: [{text: "Hello"}]
"""


def messages(result: Any) -> list[tuple[str, str]]:
    return [(finding.rule, finding.message) for _, finding in result.findings if finding.fails]


def test_a_wait_that_holds_goes_on_and_one_that_never_holds_fails_the_step(run_scenario: Any) -> None:
    held = run_scenario(TEXT + """
  - id: settled
    send: false
    wait: {until: {upstream: {model_calls: 1}, quiet: 0.2}, timeout: 10}
""")
    assert held.outcome == "pass", messages(held)
    never = run_scenario(TEXT + """
  - id: settled
    send: false
    wait: {until: {upstream: {model_calls: 2}}, timeout: 0.5}
""")
    assert messages(never) == [("wait.until", "waited 0.5s for `wait.until`, which never held: the gateway called the "
                                              "model 1 time(s), expected 2")]


def test_a_poll_sends_again_until_the_answer_matches_and_fails_when_it_never_does(run_scenario: Any) -> None:
    matched = run_scenario(TEXT + """
  - id: poll
    method: GET
    path: "{{responses_path}}/{{ask.response.id}}"
    poll: {until: {status: completed}, timeout: 5}
    expect: {status: completed}
""")
    assert matched.outcome == "pass", messages(matched)
    never = run_scenario(TEXT + """
  - id: poll
    method: GET
    path: "{{responses_path}}/{{ask.response.id}}"
    poll: {until: {status: cancelled}, timeout: 0.3, interval: 0.05}
""")
    assert messages(never) == [("poll.until", "polled for 0.3s and the answer never matched `poll.until`: status is "
                                              "'completed', expected 'cancelled'")]


def test_a_disconnect_whose_condition_never_held_is_reported(run_scenario: Any) -> None:
    result = run_scenario(TEXT.replace('''    model: [{text: "Hello"}]''', '''    model: [{text: "Hello"}]
    disconnect: {when: {upstream: {tool_runs: {add: 1}}}}'''))
    assert ("disconnect.when", "the answer was over before the client was to go away: `disconnect.when` never held "
                               "while it was in flight") in messages(result)


LATE_CONDITION = """
id: late-condition
title: the condition holds only once the model has thought for a while
evidence: {contract: "x", unrecorded: true}
mcp: [calc]
steps:
  - id: ask
    request:
      model: "{{model}}"
      input: "Think, then sleep."
      tools: [{type: mcp, server_label: calc, server_url: "{{mcp.calc.url}}", require_approval: never}]
    model:
      - {call: {tool: sleep, arguments: {seconds: 30}}, delay: 6}
      - text: "Slept."
    disconnect: {when: {upstream: {tool_runs: {sleep: 1}}}}
    expect:
      upstream: {model_calls: 1, tool_runs: {sleep: 1}}
"""


@pytest.mark.parametrize("mode", ["nonstream", "stream"])
def test_a_disconnect_whose_condition_holds_late_waits_for_it_within_the_targets_timeout(
        run_scenario: Any, mode: str) -> None:
    """Nothing comes from the gateway for six seconds (a loaded machine's first MCP session takes
    as long), more than an HTTP client waits by default: the wait is the target's timeout."""
    result = run_scenario(LATE_CONDITION, mode=mode)
    assert result.outcome == "pass", messages(result)
