"""Running a device under test: single-run mode and batch mode (docs/dut-protocol.md).

A DUT is an untrusted executable: it may hang, crash, print binary junk or never stop
printing. Every run therefore gets a deadline, its output is consumed as it arrives and cut at
`OUTPUT_LIMIT_BYTES`, and a DUT that misbehaves is killed with its whole process group (it
runs in a session of its own) and reported for that run only; the next run starts afresh.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from qoslab._core import nvmelite as _core
from qoslab.dut.compare import (
    OUTPUT_LIMIT_BYTES,
    Comparison,
    Divergence,
    compare_rows,
    header_suffix,
    shown,
)

BATCH_ARG = "--batch"
METRICS_ENV = "QOSLAB_DUT_METRICS"
_MAX_HEADER_BYTES = 4096
_MAX_ROW_BYTES = 65536
_STDERR_KEEP = 4096
_READ_CHUNK = 1 << 20
_RESPONSE = re.compile(rb"(ok) (\d{1,20})(?: (\d{1,20}))?|(error) (\d{1,20})")


@dataclass
class Task:
    """One run to replay on the DUT, with the model's answer."""

    run_id: str
    workload_path: str
    schedule: bytes
    expected_log: bytes
    expected_row: str
    suffix: bytes  # compare.header_suffix() of the run


def make_task(run_id: str, workload_path: str, result) -> Task:
    """The task of a model run (`RunResult` with its schedule file and log)."""
    head, _ = _core.schedule_split(result.schedule)
    return Task(
        run_id=run_id,
        workload_path=workload_path,
        schedule=result.schedule.encode(),
        expected_log=result.log,
        expected_row=result.row,
        suffix=header_suffix(head["scheduler_version"], head["git_commit"]),
    )


@dataclass
class Outcome:
    status: str  # one of compare.STATUSES
    detail: str = ""
    rows: list[Divergence] = field(default_factory=list)
    output: bytes | None = None  # the DUT's log, when asked for (minimal reproducers)
    metrics: bool = False  # the DUT reported a runs.csv row


class _Abort(Exception):
    def __init__(self, status: str, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _describe_exit(returncode: int) -> tuple[str, str]:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return "crash", f"killed by {name}"
    return "exit", f"exited with status {returncode}"


class _Process:
    """A DUT process in its own session, its pipes read through one selector."""

    def __init__(self, argv: list[str], *, stdin: bool, env: dict[str, str] | None = None):
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
                bufsize=0,
            )
        except OSError as err:
            raise DutStartError(f"cannot run {argv[0]!r}: {err.strerror}") from None
        self.sel = selectors.DefaultSelector()
        self.stdout = self.proc.stdout.fileno()
        self.stderr = self.proc.stderr.fileno()
        self.sel.register(self.stdout, selectors.EVENT_READ)
        self.sel.register(self.stderr, selectors.EVENT_READ)
        self.stdin = None
        if stdin:
            self.stdin = self.proc.stdin.fileno()
            os.set_blocking(self.stdin, False)
        self.stderr_head = bytearray()
        self.stdout_open = True

    def exchange(self, send: bytes, on_out, deadline: float) -> str:
        """Writes `send`, hands stdout data to `on_out` until it returns True ("done"),
        stdout ends ("eof") or the deadline passes ("timeout")."""
        pending = memoryview(send)
        if pending and self.stdin is not None:
            self.sel.register(self.stdin, selectors.EVENT_WRITE)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return "timeout"
                for key, _ in self.sel.select(remaining):
                    fd = key.fd
                    if fd == self.stdin:
                        try:
                            n = os.write(fd, pending)
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:
                            n = len(pending)  # the DUT is gone; its exit status tells why
                        pending = pending[n:]
                        if not pending:
                            self.sel.unregister(fd)
                        continue
                    data = os.read(fd, _READ_CHUNK)
                    if fd == self.stderr:
                        if not data:
                            self.sel.unregister(fd)
                        elif len(self.stderr_head) < _STDERR_KEEP:
                            self.stderr_head += data[: _STDERR_KEEP - len(self.stderr_head)]
                        continue
                    if not data:
                        self.sel.unregister(fd)
                        self.stdout_open = False
                        return "eof"
                    if on_out(data):
                        return "done"
        finally:
            if pending and self.stdin is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self.sel.unregister(self.stdin)

    def wait(self, deadline: float) -> int | None:
        try:
            return self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None

    def drain_stderr(self) -> None:
        """Reads what the exited DUT left on stderr, without waiting for more."""
        with contextlib.suppress(KeyError, ValueError, OSError):
            while len(self.stderr_head) < _STDERR_KEEP:
                ready = [k.fd for k, _ in self.sel.select(0)]
                if self.stderr not in ready:
                    return
                data = os.read(self.stderr, _READ_CHUNK)
                if not data:
                    self.sel.unregister(self.stderr)
                    return
                self.stderr_head += data[: _STDERR_KEEP - len(self.stderr_head)]

    def stderr_line(self) -> str:
        self.drain_stderr()
        text = self.stderr_head.decode("utf-8", errors="backslashreplace").strip()
        return shown(text.splitlines()[-1]) if text else ""

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.close()

    def close(self) -> None:
        self.sel.close()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class DutStartError(Exception):
    """The DUT command cannot be executed at all (a usage error, not a per-run failure)."""


def _with_stderr(detail: str, proc: _Process) -> str:
    line = proc.stderr_line()
    return f"{detail}; stderr: {line}" if line else detail


def _finish(cmp: Comparison, task: Task, row: str | None, keep_output: bool) -> Outcome:
    status = cmp.finish()
    rows = list(cmp.rows)
    detail = ""
    if status == "garbage":
        detail = f"output is not a run log ({cmp.not_text})"
    if row is not None and status in ("match", "diverged"):
        metric_rows = compare_rows(task.expected_row, row, cmp.sha256)
        if metric_rows:
            rows += metric_rows
            status = "diverged"
    return Outcome(status, detail, rows, cmp.kept if keep_output else None, row is not None)


class SingleRunner:
    """Single-run mode: one process per run, `DUT WORKLOAD SCHEDULE`, the log on stdout."""

    def __init__(self, argv: list[str], timeout_s: float, workdir: Path):
        self.argv = argv
        self.timeout_s = timeout_s
        fd, name = tempfile.mkstemp(suffix=".sched", dir=workdir)
        os.close(fd)
        self.sched_path = Path(name)
        self.metrics_path = self.sched_path.with_suffix(".row")
        self.env = dict(os.environ, **{METRICS_ENV: str(self.metrics_path)})

    def run(self, task: Task, keep_output: bool = False) -> Outcome:
        self.sched_path.write_bytes(task.schedule)
        self.metrics_path.unlink(missing_ok=True)
        cmp = Comparison(task.expected_log, task.suffix, keep=keep_output)
        deadline = time.monotonic() + self.timeout_s
        proc = _Process(
            [*self.argv, task.workload_path, str(self.sched_path)], stdin=False, env=self.env
        )
        try:
            state = proc.exchange(b"", lambda data: not cmp.feed(data), deadline)
            if state == "done":
                proc.kill()
                return Outcome("output-limit", f"more than {OUTPUT_LIMIT_BYTES} bytes of output")
            code = proc.wait(deadline) if state == "eof" else None
            if code is None:
                proc.kill()
                return Outcome("timeout", f"no exit within {self.timeout_s:g} s")
            if code != 0:
                status, detail = _describe_exit(code)
                return Outcome(status, _with_stderr(detail, proc))
        finally:
            proc.kill()  # also whatever the DUT left running in its session
        row = None
        with contextlib.suppress(OSError):
            text = self.metrics_path.read_bytes()[:_MAX_ROW_BYTES]
            row = text.decode("utf-8", errors="backslashreplace").strip("\r\n") or None
        return _finish(cmp, task, row, keep_output)

    def close(self) -> None:
        self.sched_path.unlink(missing_ok=True)
        self.metrics_path.unlink(missing_ok=True)


class BatchRunner:
    """Batch mode: one long-lived `DUT --batch` answering framed requests in order."""

    def __init__(self, argv: list[str], timeout_s: float):
        self.argv = [*argv, BATCH_ARG]
        self.timeout_s = timeout_s
        self.proc: _Process | None = None

    def _restart(self) -> None:
        if self.proc is not None:
            self.proc.kill()
        self.proc = None

    def run(self, task: Task, keep_output: bool = False) -> Outcome:
        if self.proc is None:
            self.proc = _Process(self.argv, stdin=True)
        proc = self.proc
        cmp = Comparison(task.expected_log, task.suffix, keep=keep_output)
        request = b"run %d %s\n" % (len(task.schedule), task.workload_path.encode()) + task.schedule
        reader = _ResponseReader(cmp)
        deadline = time.monotonic() + self.timeout_s
        try:
            state = proc.exchange(request, reader.feed, deadline)
        except _Abort as abort:
            self._restart()
            return Outcome(abort.status, abort.detail)
        if state == "timeout":
            self._restart()
            return Outcome("timeout", f"no response within {self.timeout_s:g} s")
        if state == "eof":
            code = proc.wait(time.monotonic() + 1.0)
            self._restart()
            if code is None or code == 0:
                detail = "closed its output in the middle of a response"
                return Outcome("garbage" if reader.started else "exit", _with_stderr(detail, proc))
            status, detail = _describe_exit(code)
            return Outcome(status, _with_stderr(detail, proc))
        if reader.error is not None:
            return Outcome("error", f"DUT reported an error: {reader.error}")
        return _finish(cmp, task, reader.row, keep_output)

    def close(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            with contextlib.suppress(OSError):
                proc.proc.stdin.close()  # end of requests: a well-behaved DUT exits 0
            if proc.wait(time.monotonic() + 2.0) is None:
                proc.kill()
            else:
                proc.close()


class _ResponseReader:
    """Parses one batch response: `ok LOG [ROW]\\n<log><row>` or `error MSG\\n<msg>`."""

    def __init__(self, cmp: Comparison):
        self.cmp = cmp
        self.header = bytearray()
        self.started = False
        self.phase = "header"
        self.need = 0
        self.row_len = 0
        self.tail = bytearray()
        self.row: str | None = None
        self.error: str | None = None

    def feed(self, data: bytes) -> bool:
        self.started = True
        view = memoryview(data)
        while view:
            if self.phase == "header":
                nl = bytes(view[: _MAX_HEADER_BYTES + 1]).find(b"\n")
                if nl < 0:
                    self.header += view
                    if len(self.header) > _MAX_HEADER_BYTES:
                        raise _Abort("garbage", "not a batch response header")
                    return False
                self.header += view[:nl]
                view = view[nl + 1 :]
                self._parse_header()
            elif self.phase == "log":
                take = view[: self.need]
                self.need -= len(take)
                view = view[len(take) :]
                if not self.cmp.feed(bytes(take)):
                    raise _Abort("output-limit", f"more than {OUTPUT_LIMIT_BYTES} bytes of log")
                if self.need == 0:
                    self.phase, self.need = "row", self.row_len
            else:  # row or error message
                take = view[: self.need]
                self.tail += take
                self.need -= len(take)
                view = view[len(take) :]
            if self.phase in ("row", "error") and self.need == 0:
                if view:
                    raise _Abort("garbage", "output after the end of a batch response")
                text = self.tail.decode("utf-8", errors="backslashreplace").strip("\r\n")
                if self.phase == "error":
                    self.error = shown(text)
                else:
                    self.row = text if self.row_len else None
                return True
        return False

    def _parse_header(self) -> None:
        m = _RESPONSE.fullmatch(bytes(self.header).rstrip(b"\r"))
        if m is None:
            raise _Abort("garbage", f"not a batch response header: {shown(bytes(self.header))}")
        if m.group(1):
            log_len = int(m.group(2))
            self.row_len = int(m.group(3) or 0)
            if self.row_len > _MAX_ROW_BYTES:
                raise _Abort("garbage", f"metrics row of {self.row_len} bytes")
            if log_len > OUTPUT_LIMIT_BYTES:
                raise _Abort("output-limit", f"announced a log of {log_len} bytes")
            self.phase, self.need = "log", log_len
            if log_len == 0:
                self.phase, self.need = "row", self.row_len
        else:
            self.phase, self.need = "error", min(int(m.group(5)), _MAX_ROW_BYTES)
