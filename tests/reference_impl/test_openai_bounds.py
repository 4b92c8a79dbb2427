"""OpenAI's documented bounds ship as data (`openai_bounds.json`): it matches the OpenAPI
description it was extracted from (when that file is on the machine), records where and when it
came from, and every bound in it reaches the request schema of its body."""

from __future__ import annotations

import os
import re
from datetime import date
from pathlib import Path

import pytest

from responses_parity.openai_contract import openai_bounds
from responses_parity.openai_contract.openai_bounds import BODIES, body_bounds, document, segments, shipped
from responses_parity.openai_contract.request_schema import (chat_schema, compact_schema, conversation_schemas,
                                                             input_tokens_schema, responses_schema,
                                                             vector_store_schemas)

OPENAPI = Path(os.environ.get("PARITY_OPENAI_OPENAPI",
                              Path(__file__).resolve().parents[2].parent / "shared" / "reference" /
                              "openai-openapi.yaml"))


def test_the_shipped_bounds_are_those_of_the_openapi_description() -> None:
    if not OPENAPI.is_file():
        pytest.skip(f"no OpenAPI description of OpenAI's API at {OPENAPI} (set PARITY_OPENAI_OPENAPI)")
    extracted = document(OPENAPI)
    regenerate = f"regenerate it: python -m {openai_bounds.__name__} {OPENAPI}"
    assert extracted["bodies"] == shipped()["bodies"], f"openai_bounds.json is not what {OPENAPI} states: {regenerate}"
    assert extracted["source"]["sha256"] == shipped()["source"]["sha256"], f"{OPENAPI} has changed: {regenerate}"


def test_the_shipped_file_says_where_and_when_it_came_from_and_covers_every_body() -> None:
    source = shipped()["source"]
    assert source["file"] == "openai-openapi.yaml" and source["version"]
    assert re.fullmatch(r"[0-9a-f]{64}", source["sha256"])
    assert date.fromisoformat(source["extracted_on"]) <= date.today()
    assert set(shipped()["bodies"]) == set(BODIES)
    bounds = shipped()["bodies"]
    assert bounds["responses"]["safety_identifier"] == {"maxLength": 64}
    assert bounds["responses"]["context_management"] == {"minItems": 1}
    assert bounds["chat"]["seed"]["maximum"] >= 2**63 - 1


def test_every_bound_reaches_the_request_schema_of_its_body() -> None:
    schemas = {"responses": responses_schema(), "responses.compact": compact_schema(),
               "responses.input_tokens": input_tokens_schema(), "chat": chat_schema(),
               **{f"conversations.{name}": schema for name, schema in conversation_schemas().items()},
               **vector_store_schemas()}
    assert set(schemas) == set(BODIES) - {"files.create"}  # a multipart form: files.py checks it by hand
    assert {name: schema.unapplied for name, schema in schemas.items() if schema.unapplied} == {}


def test_a_path_names_properties_items_union_members_and_map_keys_and_values() -> None:
    assert segments("tools[]{function}.name") == ["tools", "[]", "{function}", "name"]
    assert segments("metadata.<key>") == ["metadata", "<key>"]
    assert segments("attributes.*") == ["attributes", "*"]
    with pytest.raises(ValueError):
        segments("tools[0].name")


def test_the_walk_follows_refs_unions_and_maps_stops_at_recursion_and_keeps_the_loosest_bound() -> None:
    components = {
        "Tool": {"oneOf": [{"$ref": "#/components/schemas/Fn"}, {"$ref": "#/components/schemas/Web"}]},
        "Fn": {"type": "object", "properties": {"type": {"enum": ["function"]}, "name": {"maxLength": 64}}},
        "Web": {"type": "object", "properties": {"type": {"const": "web"}, "name": {"maxLength": 128}}},
        "Filter": {"type": "object", "properties": {"filters": {"type": "array", "minItems": 1, "items": {
            "$ref": "#/components/schemas/Filter"}}}},
        "Loose": {"type": "object", "properties": {"type": {"enum": ["a", "b"]}, "n": {"maximum": 9}}},
        "Tight": {"type": "object", "properties": {"type": {"enum": ["a", "b"]}, "n": {"maximum": 3}}},
    }
    body = {"type": "object", "properties": {
        "tools": {"type": "array", "maxItems": 8, "items": {"$ref": "#/components/schemas/Tool"}},
        "filter": {"$ref": "#/components/schemas/Filter"},
        "labels": {"type": "object", "maxProperties": 4, "additionalProperties": {"maxLength": 5},
                   "propertyNames": {"maxLength": 6}},
        "either": {"anyOf": [{"$ref": "#/components/schemas/Loose"}, {"$ref": "#/components/schemas/Tight"}]}}}
    spec = {"paths": {"/x": {"post": {"requestBody": {"content": {"application/json": {"schema": body}}}}}},
            "components": {"schemas": components}}
    assert body_bounds(spec, "post", "/x") == {
        "tools": {"maxItems": 8}, "tools[]{function}.name": {"maxLength": 64}, "tools[]{web}.name": {"maxLength": 128},
        "filter.filters": {"minItems": 1}, "labels": {"maxProperties": 4}, "labels.*": {"maxLength": 5},
        "labels.<key>": {"maxLength": 6}, "either.n": {"maximum": 9}}
