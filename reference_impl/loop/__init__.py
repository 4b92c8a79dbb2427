"""The agent loop: actions, state, pure decisions, the driver, and the client-event emitter."""
