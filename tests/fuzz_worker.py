"""A fuzzing worker: runs `qoslab` commands one after another in this process, as the installed
command runs them (`qoslab.cli.main`), and reports each one's exit status and output.

It reads one JSON case a line from the file descriptor given as its first argument and answers
one JSON line on the second: {"code": exit status, "stdout": ..., "stderr": ...}. Each case
runs in its own folder, with its own environment additions and temporary directory (where an
internal error's traceback file lands). The parent kills this process when a case outlasts its
time (a hang) and sees it die if a case brings it down (an abort, a signal).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import tempfile

# A case may ask for more than memory allows; that must be a clean error, and an allocation
# beyond this ends the worker (a signal), which the parent reports.
MEMORY_LIMIT = 6 << 30


def _run(case: dict) -> dict:
    from qoslab.cli import main

    saved_env = dict(os.environ)
    os.environ.update(case.get("env", {}))
    os.chdir(case["cwd"])
    tempfile.tempdir = case["cwd"]
    out = tempfile.TemporaryFile()  # noqa: SIM115 (closed below, after the case)
    err = tempfile.TemporaryFile()  # noqa: SIM115
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    try:
        try:
            main(case["argv"])
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except BaseException as escaped:  # main() lets nothing but SystemExit out
            code = -1000
            print(f"escaped main(): {type(escaped).__name__}: {escaped}", file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = None
    texts = []
    for f in (out, err):
        f.seek(0)
        texts.append(f.read().decode("utf-8", "replace"))
        f.close()
    # The whole of stderr is what is judged (fuzzing.classify); a long one travels cut.
    return {
        "code": code,
        "stdout": texts[0][:4000],
        "stderr": texts[1] if len(texts[1]) <= 20_000 else texts[1][:10_000] + texts[1][-10_000:],
        "error_lines": _error_lines(texts[1]),
    }


def _error_lines(stderr: str) -> list[str]:
    """The lines of stderr that are not warnings, each cut to 300 characters."""
    return [line[:300] for line in stderr.splitlines() if not line.startswith("qoslab: warning")]


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cases = os.fdopen(int(sys.argv[1]), "r")
    answers = os.fdopen(int(sys.argv[2]), "w")
    import qoslab.cli  # noqa: F401 (imported once, before the first case is timed)

    for line in cases:
        answer = _run(json.loads(line))
        with contextlib.suppress(BrokenPipeError):
            answers.write(json.dumps(answer) + "\n")
            answers.flush()


if __name__ == "__main__":
    main()
