"""A scenario step that uploads: its `upload` is sent as `multipart/form-data` (placeholders
rendered, a part left out not sent), later steps reach the answer as `{{<step>.body...}}`, and
the exchange records the form without the file's bytes."""

from __future__ import annotations

from conftest import RunScenario

UPLOADS = """
id: uploads
title: uploads
evidence: {contract: "Files API", unrecorded: true}
modes: [nonstream]
steps:
  - id: put
    upload:
      file: {name: "notes-{{run.token}}.md", content: "Valve notes {{run.token}}"}
      purpose: assistants
      fields: {"expires_after[anchor]": created_at, "expires_after[seconds]": "3600"}
    expect: {http_status: 200, body: {object: file, purpose: assistants, filename: "notes-{{run.token}}.md"}}
  - id: store
    path: "{{vector_stores_path}}"
    request: {file_ids: ["{{put.body.id}}"]}
    expect: {http_status: 200, body: {file_counts: {completed: 1}}}
  - id: text
    method: GET
    path: "{{vector_stores_path}}/{{store.body.id}}/files/{{put.body.id}}/content"
    expect: {body: {data: [{type: text, text: "Valve notes {{run.token}}"}]}}
  - id: no_purpose
    upload: {file: {name: a.txt, content: "x"}}
    expect: {http_status: 400, error: {param: purpose, code: missing_required_parameter}}
"""


def test_an_upload_is_sent_as_a_form_and_later_steps_use_its_answer(run_scenario: RunScenario) -> None:
    result = run_scenario(UPLOADS)
    assert result.outcome == "pass", [(step.step_id, step.error, [str(f) for f in step.findings])
                                      for step in result.steps]
    put = result.steps[0].exchange
    assert put is not None and put.body["expires_at"] == put.body["created_at"] + 3600
    file_part = put.request_body.pop("file")
    assert put.request_body == {"expires_after[anchor]": "created_at", "expires_after[seconds]": "3600",
                                "purpose": "assistants"}
    assert file_part["filename"] == put.body["filename"] and file_part["bytes"] == put.body["bytes"]


def test_an_expectation_on_the_upload_can_fail(run_scenario: RunScenario) -> None:
    result = run_scenario(UPLOADS.replace("purpose: assistants\n      fields", "purpose: user_data\n      fields"))
    assert result.outcome == "fail"
    assert [step.step_id for step in result.steps if step.findings and step.outcome == "fail"] == ["put"]
