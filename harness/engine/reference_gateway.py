"""The reference gateway as a target: the one module of the harness that imports `reference_impl`
(the harness judges the gateway; what both take as given comes from `openai_contract`). The
runs' stack and `parity serve` build it from what is named here."""

from __future__ import annotations

from ...reference_impl import ConfigError, GatewayConfig, McpServerConfig, build_gateway_app
from ...reference_impl.config import WebSearchConfig

__all__ = ["GATEWAY_LOGGER", "ConfigError", "GatewayConfig", "McpServerConfig", "WebSearchConfig",
           "build_gateway_app"]
GATEWAY_LOGGER = "responses_parity.reference_impl"
"""The logger every module of the gateway logs under."""
