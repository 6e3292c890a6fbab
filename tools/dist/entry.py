"""Entry point of the single-file build (tools/dist/mysqlio.spec): the `mysqlio` command."""

import sys

from mysqlio.cli import main

if __name__ == "__main__":
    sys.exit(main())
