"""The base of every object of the scenario format: an unknown key is an error (a typo is never
a no-op), values are taken as written (never coerced) and a parsed scenario never changes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
