"""``python -m fray.cli`` is the ``fray`` command."""

import sys

from fray.cli import main

if __name__ == "__main__":
    sys.exit(main())
