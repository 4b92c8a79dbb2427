"""Reading a request's JSON body, refused the way OpenAI refuses a body it cannot parse."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from .errors import InvalidRequest


async def read_json(request: Request) -> Any:
    try:
        return json.loads(await request.body() or b"null")
    except ValueError as error:
        raise InvalidRequest("We could not parse the JSON body of your request. The OpenAI API expects a "
                             "JSON payload.") from error
