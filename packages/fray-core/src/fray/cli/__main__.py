"""``python -m fray.cli`` is the ``fray`` command."""

from fray.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
