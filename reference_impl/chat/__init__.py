"""`/v1/chat/completions` through the same agent loop as `/v1/responses`."""
