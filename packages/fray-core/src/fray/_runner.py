"""Runs a pickled callable in a job process: ``python -m fray._runner PAYLOAD RESULT``.

The payload is ``cloudpickle.dumps((fn, args, kwargs))``. The result file receives
``("ok", value)`` or ``("error", exception, traceback_text)``; an exception that cannot be
pickled is replaced by a ``RuntimeError`` carrying its type and text.
"""

from __future__ import annotations

import os
import sys
import traceback


def _write(path: str, record: object) -> None:
    import cloudpickle

    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(cloudpickle.dumps(record))
    os.replace(tmp, path)


def main() -> int:
    import cloudpickle

    payload_path, result_path = sys.argv[1], sys.argv[2]
    with open(payload_path, "rb") as f:
        fn, args, kwargs = cloudpickle.loads(f.read())
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:
        text = traceback.format_exc()
        sys.stderr.write(text)
        try:
            _write(result_path, ("error", exc, text))
        except Exception:
            _write(result_path, ("error", RuntimeError(f"{type(exc).__name__}: {exc}"), text))
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
        return code or 1
    try:
        _write(result_path, ("ok", value))
    except Exception as exc:
        message = f"the job's return value could not be pickled: {type(exc).__name__}: {exc}"
        sys.stderr.write(message + "\n")
        _write(result_path, ("error", RuntimeError(message), message))
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
