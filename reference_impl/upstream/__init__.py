"""Upstream adapters: the same model turn in OpenAI's Responses or Chat Completions wire
format, or in Anthropic's Messages format."""

from ..config import GatewayConfig
from .adapter import UpstreamAdapter
from .anthropic_messages import AnthropicMessagesAdapter
from .chat_completions import ChatCompletionsAdapter
from .http import UpstreamClient
from .responses_api import ResponsesAdapter


def make_adapter(config: GatewayConfig, client: UpstreamClient) -> UpstreamAdapter:
    """The adapter the configuration names."""
    if config.upstream_wire == "chat":
        return ChatCompletionsAdapter(client, config.upstream_url, config.upstream_api_key)
    if config.upstream_wire == "anthropic":
        return AnthropicMessagesAdapter(client, config.upstream_url, config.upstream_api_key)
    return ResponsesAdapter(client, config.upstream_url, config.upstream_api_key, config.upstream_chaining)


__all__ = ["AnthropicMessagesAdapter", "ChatCompletionsAdapter", "ResponsesAdapter", "UpstreamAdapter",
           "UpstreamClient", "make_adapter"]
