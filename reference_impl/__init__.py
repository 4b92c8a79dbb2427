"""The reference gateway: one agent loop behind `/v1/responses`, used as a target and as a spec."""

from .app import build_gateway_app
from .config import ConfigError, GatewayConfig, McpServerConfig

__all__ = ["ConfigError", "GatewayConfig", "McpServerConfig", "build_gateway_app"]
