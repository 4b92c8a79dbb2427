"""The SDK's schemas are derived once and kept on disk: a warm cache gives what a cold one
gave, without deriving; a corrupt, truncated or foreign cache file is derived anew and
replaced, never an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from responses_parity.harness.judge import schemas
from responses_parity.harness.scenario import vocabulary


@pytest.fixture
def cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path))
    return schemas.sdk_schema_cache_file()


def test_the_cache_is_named_after_the_sdk_pydantic_and_the_deriving_code(cache_file: Path, tmp_path: Path) -> None:
    assert cache_file.parent == tmp_path / "sdk-schemas"
    assert cache_file.name.startswith("openai-") and "-pydantic-" in cache_file.name


def test_a_warm_cache_gives_the_schemas_a_cold_one_derived_without_deriving_them(
        cache_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold = schemas.sdk_schemas()
    assert cold == schemas.derive_sdk_schemas()
    assert json.loads(cache_file.read_text()) == cold

    def must_not_derive() -> None:
        raise AssertionError("derived although the cache holds the schemas")

    monkeypatch.setattr(schemas, "derive_sdk_schemas", must_not_derive)
    assert schemas.sdk_schemas() == cold


@pytest.mark.parametrize("content", ['{"response": {"ty', "not json at all", "[]", '{"response": {}}', "\udcff"])
def test_a_corrupt_cache_file_is_derived_anew_and_replaced(cache_file: Path, content: str) -> None:
    cache_file.parent.mkdir(parents=True)
    cache_file.write_bytes(content.encode("utf-8", "surrogateescape"))
    derived = schemas.sdk_schemas()
    assert derived == schemas.derive_sdk_schemas()
    assert json.loads(cache_file.read_text()) == derived
    assert [path.name for path in cache_file.parent.iterdir()] == [cache_file.name]  # no temporary file left


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file-not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("PARITY_CACHE_DIR", str(blocker))
    assert schemas.sdk_schemas() == schemas.derive_sdk_schemas()


def test_the_sdk_names_are_read_once_and_kept_as_the_schemas_are(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path))
    names = vocabulary.names_cache_file()
    assert names.parent == tmp_path / "sdk-names" and names.name.startswith("openai-")
    cold = vocabulary.derive_names()
    assert vocabulary.load_or_build(names, vocabulary.derive_names, vocabulary._complete) == cold
    assert json.loads(names.read_text()) == cold
    assert "message" in cold["output_item_types"] and "completed" in cold["response_statuses"]
    assert "call_id" in cold["item_fields"]["function_call"]
