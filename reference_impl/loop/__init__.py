"""The agent loop: actions and endings, state, pure decisions, the driver, the events it emits
to a surface's sink, and the run lifecycle both surfaces share."""
