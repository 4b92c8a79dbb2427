"""`python -m responses_parity.harness` is `parity`."""

from .cli import main

if __name__ == "__main__":  # not when a spawned process (the proxy's checker) imports it again
    main()
