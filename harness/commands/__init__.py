"""The `parity` commands, one module per group of them; `harness/cli.py` imports a module only
when one of its commands is invoked."""
