"""The reference gateway: one agent loop behind `/v1/responses`, used as a target and as a spec.

The names below are imported when first used, so importing one small module of the gateway
(`json_body`, say) does not load the whole gateway and the SDKs behind it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["ConfigError", "GatewayConfig", "McpServerConfig", "build_gateway_app"]
_HOMES = {"ConfigError": ".config", "GatewayConfig": ".config", "McpServerConfig": ".config",
          "build_gateway_app": ".app"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOMES[name], __name__), name)
