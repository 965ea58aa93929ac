"""Runs a pickled callable in a job process: ``python -m fray._runner PAYLOAD RESULT``.

The payload is ``cloudpickle.dumps((fn, args, kwargs))``. The result file receives
``("ok", value)`` or ``("error", exception, traceback_text)`` (see
``fray.backend.call_outcome``).
"""

from __future__ import annotations

import os
import sys


def _write(path: str, record: object) -> None:
    import cloudpickle

    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(cloudpickle.dumps(record))
    os.replace(tmp, path)


def main() -> int:
    import cloudpickle

    from fray.backend import call_outcome, exit_code_of

    payload_path, result_path = sys.argv[1], sys.argv[2]
    with open(payload_path, "rb") as f:
        fn, args, kwargs = cloudpickle.loads(f.read())
    outcome = call_outcome(fn, args, kwargs)
    if outcome[0] == "error":
        sys.stderr.write(outcome[2])
    try:
        _write(result_path, outcome)
    except Exception as exc:
        message = f"the job's return value could not be pickled: {type(exc).__name__}: {exc}"
        sys.stderr.write(message + "\n")
        outcome = ("error", RuntimeError(message), message)
        _write(result_path, outcome)
    return exit_code_of(outcome)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
