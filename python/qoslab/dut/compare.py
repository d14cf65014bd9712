"""Comparing a DUT's output with the model's run log (docs/dut-protocol.md, "Comparison").

The output is consumed as it arrives, in chunks, so that a run costs at most the model's log
plus a bounded amount of memory, however much the DUT prints: lines are compared one by one,
at most `MAX_ROWS_PER_RUN` differences are kept, and reading stops at `OUTPUT_LIMIT_BYTES`.

Normalisation (the only differences that do not count):
- the values of `scheduler_version` and `git_commit` in the RUN_HEADER line (spec §2: they do
  not influence behaviour);
- a `\\r` before a line's `\\n`, and a missing `\\n` after the last line.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from dataclasses import dataclass, field

from qoslab.nvmelite import RUNS_CSV_HEADER

OUTPUT_LIMIT_BYTES = 100 * 1024 * 1024
MAX_ROWS_PER_RUN = 20
MAX_LINE_BYTES = 1 << 20  # a longer "line" is not a log line; its head is reported
SHOWN_CHARS = 300

END_OF_OUTPUT = "<end of output>"
END_OF_LOG = "<end of log>"

# Bytes that never occur in a run log of a workload whose seed_id is plain text.
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

RUNS_COLUMNS = tuple(RUNS_CSV_HEADER.split(","))

# Per-run outcomes, most severe first; `status_rank` orders them.
STATUSES = ("timeout", "output-limit", "crash", "exit", "error", "garbage", "diverged", "match")


def shown(data: bytes | str) -> str:
    """A line as divergences.csv shows it: text, invalid bytes escaped, long lines cut."""
    text = data if isinstance(data, str) else data.decode("utf-8", errors="backslashreplace")
    if len(text) > SHOWN_CHARS:
        return f"{text[:SHOWN_CHARS]}... ({len(text)} chars)"
    return text


def header_suffix(scheduler_version: str, git_commit: str) -> bytes:
    """The end of a RUN_HEADER line that the normalisation ignores."""
    return (
        b", scheduler_version="
        + scheduler_version.encode()
        + b", git_commit="
        + git_commit.encode()
        + b")"
    )


@dataclass
class Divergence:
    line: str  # 1-based log line number, `runs.csv:<column>`, or "" for a failed run
    expected: str
    got: str


@dataclass
class Comparison:
    """Streams one run's output against the model's log and metrics row."""

    expected: bytes
    suffix: bytes  # header_suffix() of the model's run
    keep: bool = False  # keep the output (up to kept_limit bytes) for a reproducer
    rows: list[Divergence] = field(default_factory=list)
    total: int = 0
    over_limit: bool = False
    not_text: str | None = None

    def __post_init__(self) -> None:
        self._exp_lines = self.expected.split(b"\n")
        if self._exp_lines and self._exp_lines[-1] == b"":
            self._exp_lines.pop()
        self._plain = _CONTROL.search(self.expected) is None
        if self._exp_lines and self._exp_lines[0].endswith(self.suffix):
            self._head_prefix = self._exp_lines[0][: -len(self.suffix)]
            self._exp_lines[0] = self._head_prefix + b", scheduler_version=*, git_commit=*)"
        else:
            self._head_prefix = None
        self._fast = bytearray()
        self._fast_limit = 2 * len(self.expected) + 65536
        self._buffering = True
        self._partial = bytearray()
        self._line_no = 0
        self._comparing = True
        self._sha = hashlib.sha256()
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self.kept_limit = 4 * len(self.expected) + 65536
        self._kept = bytearray()

    # ---- feeding --------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> bool:
        """Takes the next chunk of output; False once the output limit is reached."""
        room = OUTPUT_LIMIT_BYTES - self.total
        if len(chunk) > room:
            chunk = chunk[:room]
            self.over_limit = True
        self.total += len(chunk)
        self._sha.update(chunk)
        if self.keep and len(self._kept) < self.kept_limit:
            self._kept += chunk[: self.kept_limit - len(self._kept)]
        self._check_text(chunk)
        if self._buffering:
            self._fast += chunk
            if len(self._fast) > self._fast_limit:
                self._buffering = False
                data, self._fast = bytes(self._fast), bytearray()
                self._lines(data)
        else:
            self._lines(chunk)
        return not self.over_limit

    def _check_text(self, chunk: bytes) -> None:
        if self.not_text is not None:
            return
        start = self.total - len(chunk)
        try:
            self._utf8.decode(chunk)
        except UnicodeDecodeError as err:
            self.not_text = f"invalid UTF-8 at byte {start + err.start}"
            return
        if self._plain:
            m = _CONTROL.search(chunk)
            if m:
                self.not_text = f"control byte 0x{m.group()[0]:02x} at byte {start + m.start()}"

    def _lines(self, data: bytes) -> None:
        if not self._comparing:
            return
        pieces = data.split(b"\n")
        if self._partial:
            pieces[0] = bytes(self._partial) + pieces[0]
            self._partial = bytearray()
        for line in pieces[:-1]:
            self._line(line)
            if not self._comparing:
                return
        rest = pieces[-1]
        if len(rest) > MAX_LINE_BYTES:
            self._line(rest[:SHOWN_CHARS] + b"...")
            self._comparing = False
        else:
            self._partial += rest

    def _line(self, got: bytes) -> None:
        i = self._line_no
        self._line_no += 1
        if got.endswith(b"\r"):
            got = got[:-1]
        if i == 0 and self._head_prefix is not None:
            head = self._head_prefix + b", scheduler_version="
            if got.startswith(head) and got.endswith(b")") and b", git_commit=" in got[len(head) :]:
                got = self._head_prefix + b", scheduler_version=*, git_commit=*)"
        if i < len(self._exp_lines):
            if got != self._exp_lines[i]:
                self._add(str(i + 1), shown(self._exp_lines[i]), shown(got))
        else:
            self._add(str(i + 1), END_OF_LOG, shown(got))
            self._comparing = False  # everything after is surplus

    def _add(self, line: str, expected: str, got: str) -> None:
        self.rows.append(Divergence(line, expected, got))
        if len(self.rows) >= MAX_ROWS_PER_RUN:
            self._comparing = False

    # ---- the verdict -------------------------------------------------------------------------

    def finish(self) -> str:
        """After the last chunk: "match", "diverged", "garbage" or "output-limit"."""
        if self._buffering:
            if bytes(self._fast) == self.expected and not self.over_limit:
                return "match"
            self._buffering = False
            data, self._fast = bytes(self._fast), bytearray()
            self._lines(data)
        if self._comparing and self._partial:
            self._line(bytes(self._partial))  # a last line without its "\n" is tolerated
            self._partial = bytearray()
        if self._comparing and self._line_no < len(self._exp_lines) and not self.over_limit:
            self._add(str(self._line_no + 1), shown(self._exp_lines[self._line_no]), END_OF_OUTPUT)
        if self.over_limit:
            return "output-limit"
        if self.not_text is not None:
            return "garbage"
        return "diverged" if self.rows else "match"

    @property
    def kept(self) -> bytes:
        return bytes(self._kept)

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()


def split_row(row: str) -> list[str] | None:
    """A runs.csv row as its 13 fields (run_id may contain commas), or None."""
    fields = row.rstrip("\r\n").rsplit(",", len(RUNS_COLUMNS) - 1)
    return fields if len(fields) == len(RUNS_COLUMNS) else None


def compare_rows(expected_row: str, got_row: str, got_log_sha256: str) -> list[Divergence]:
    """Metrics reported by the DUT against the model's runs.csv row.

    `log_sha256` is checked against the hash of what the DUT printed (its own consistency);
    the log itself is compared line by line.
    """
    exp = split_row(expected_row)
    got = split_row(got_row)
    if exp is None:
        raise ValueError(f"not a runs.csv row: {expected_row!r}")
    if got is None:
        return [Divergence("runs.csv", shown(expected_row), shown(got_row.rstrip("\r\n")))]
    out = []
    for name, e, g in zip(RUNS_COLUMNS[:-1], exp[:-1], got[:-1], strict=True):
        if e != g:
            out.append(Divergence(f"runs.csv:{name}", shown(e), shown(g)))
    if got[-1] != got_log_sha256:
        out.append(Divergence("runs.csv:log_sha256", got_log_sha256, shown(got[-1])))
    return out
