"""`python -m responses_parity.harness` is `parity`."""

from .cli import main

main()
