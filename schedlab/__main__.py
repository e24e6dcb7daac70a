"""``python -m schedlab``: the same command line as ``schedlab``."""

import sys

from schedlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
