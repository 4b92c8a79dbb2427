"""The harness: runs YAML scenarios against targets and diffs them at the contract level."""
