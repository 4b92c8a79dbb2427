"""The built-in scenario catalogue (YAML files, shipped as package data)."""
