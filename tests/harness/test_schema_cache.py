"""The SDK's schemas, names and request descriptions are derived once and kept on disk: a warm
cache gives what a cold one gave, without deriving; a corrupt, truncated or foreign cache file
is derived anew and replaced, never an error. They are kept where `PARITY_CACHE_DIR` says, else
in the user's cache folder as the platform names it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from responses_parity.harness.judge import schemas
from responses_parity.harness.scenario import vocabulary
from responses_parity.openai_contract import request_schema
from responses_parity.openai_contract.json_cache import cache_dir


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


@pytest.mark.skipif(sys.platform != "linux", reason="XDG_CACHE_HOME names the cache folder on Linux only")
def test_without_parity_cache_dir_the_cache_is_where_xdg_cache_home_says(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARITY_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "responses-parity"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "responses-parity"
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"


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


def test_the_request_descriptions_are_derived_once_and_kept_as_the_schemas_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARITY_CACHE_DIR", str(tmp_path))
    kept = request_schema.sdk_descriptions_file()
    assert kept.parent == tmp_path / "sdk-requests" and kept.name.startswith("openai-")
    cold = request_schema.derive_sdk_descriptions()
    assert request_schema.load_or_build(kept, request_schema.derive_sdk_descriptions,
                                        request_schema._complete) == cold
    assert json.loads(kept.read_text()) == cold
    assert set(cold["bodies"]) == set(request_schema.SDK_BODIES)
    assert "reasoning.encrypted_content" in cold["literals"]["ResponseIncludable"]
    assert "assistants" in cold["literals"]["FilePurpose"]

    def must_not_derive() -> None:
        raise AssertionError("derived although the cache holds the descriptions")

    monkeypatch.setattr(request_schema, "derive_sdk_descriptions", must_not_derive)
    assert request_schema.load_or_build(kept, request_schema.derive_sdk_descriptions,
                                        request_schema._complete) == cold
    incomplete = cold | {"literals": {"ResponseIncludable": ["file_search_call.results"]}}
    kept.write_text(json.dumps(incomplete))
    with pytest.raises(AssertionError, match="derived although"):  # not accepted: derived anew
        request_schema.load_or_build(kept, request_schema.derive_sdk_descriptions, request_schema._complete)


def test_with_a_warm_cache_the_gateway_checks_requests_without_importing_the_sdks(tmp_path: Path) -> None:
    """What start-up saves: a warm cache spares the gateway importing openai (its request
    descriptions) and mcp (until a request names an MCP server)."""
    script = (
        "import asyncio, sys\n"
        "import httpx2\n"
        "from responses_parity.reference_impl import GatewayConfig, build_gateway_app\n"
        "app = build_gateway_app(GatewayConfig(upstream_url='http://127.0.0.1:9/v1', store_path=':memory:'))\n"
        "async def main():\n"
        "    async with app.router.lifespan_context(app), httpx2.AsyncClient(\n"
        "            transport=httpx2.ASGITransport(app=app), base_url='http://gateway') as client:\n"
        "        answer = await client.post('/v1/responses', json={'model': 'm', 'input': 'hi', 'temperature': 9})\n"
        "        assert answer.status_code == 400, answer.text\n"
        "        assert answer.json()['error']['param'] == 'temperature', answer.text\n"
        "        assert (await client.get('/v1/responses/resp_1?include=nope')).status_code == 400\n"
        "asyncio.run(main())\n"
        "print(sorted({name.split('.')[0] for name in sys.modules} & {'openai', 'mcp', 'pydantic'}))\n")
    env = {**os.environ, "PARITY_CACHE_DIR": str(tmp_path)}
    cold = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert cold.returncode == 0, cold.stderr
    assert "openai" in cold.stdout  # the first start derives the descriptions
    warm = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert warm.returncode == 0, warm.stderr
    assert "openai" not in warm.stdout and "mcp" not in warm.stdout, warm.stdout
