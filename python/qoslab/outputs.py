"""Every output qoslab writes appears whole or not at all.

Files and directories are written under a hidden temporary name beside their target and
renamed into place only when complete, so an error or Ctrl-C never leaves a half-written
result and an earlier result survives a failed run. The temporary names carry the writer's
pid (`.NAME.tmp-PID-XXXX.tmp`, `.NAME.partial-PID-XXXX`, `.NAME.old-PID-XXXX`, and the Rust
core's `.NAME.tmp-PID-XXXX.tmp` for a time series): what a `kill -9` left behind, which no
clean-up removed, is reclaimed by the next write into the same folder once its writer is gone
(`reclaim`). `tempfile` creates its files 0600 and its
directories 0700; outputs get the permissions an ordinary `open`/`mkdir` would give (0666/0777
less the umask), so a report written by root or by a CI job stays readable by others.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from qoslab.errors import InputError


def _read_umask() -> int:
    # The umask can only be read by setting it; this runs once, at import.
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()
FILE_MODE = 0o666 & ~_UMASK
DIR_MODE = 0o777 & ~_UMASK


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


# A hidden temporary of qoslab's beside NAME, with its writer's pid (nested ones, such as the
# core's scratch file beside a temporary, start with more dots).
_TEMPORARY = re.compile(r"^\.+.+\.(?:tmp|partial|old)-(\d+)-[^/]*$")
_reclaimed: set[Path] = set()


def _prefix(name: str, kind: str) -> str:
    return f".{name}.{kind}-{os.getpid()}-"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def reclaim(folder: Path | str) -> list[Path]:
    """Removes the hidden temporaries in `folder` whose writer is gone (killed before it could
    clean up): partial output folders, half-written files, earlier outputs moved aside. Once
    per folder and process. Returns what it removed."""
    folder = Path(os.path.abspath(folder))
    if folder in _reclaimed:
        return []
    _reclaimed.add(folder)
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        m = _TEMPORARY.match(name)
        if m is None or int(m.group(1)) == os.getpid() or not _gone(int(m.group(1))):
            continue
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        removed.append(path)
    return removed


def write_files(files: dict[Path, bytes | str]) -> None:
    """Writes every file under a temporary name beside it, then renames them all; on any
    error none of them is left behind (earlier files of the same names stay as they were)."""
    staged: list[tuple[Path, Path]] = []
    try:
        for target, data in files.items():
            target, in_place = _destination(Path(target))
            if in_place:
                _write_in_place(target, data)
                continue
            reclaim(_folder(target))
            try:
                fd, tmp = tempfile.mkstemp(
                    prefix=_prefix(target.name, "tmp"), suffix=".tmp", dir=_folder(target)
                )
            except OSError as err:
                raise InputError(f"cannot write here: {err.strerror}", path=target) from None
            staged.append((Path(tmp), target))
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
                os.fchmod(f.fileno(), FILE_MODE)
        for tmp, target in staged:
            try:
                tmp.replace(target)
            except OSError as err:
                raise InputError(f"cannot write here: {err.strerror}", path=target) from None
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def _destination(path: Path) -> tuple[Path, bool]:
    """Where to write `path`, and whether in place. Renaming over /dev/null, a named pipe or
    a terminal would replace the node with a plain file, so those are written in place; a
    symbolic link (`/dev/stdout` redirected to a file, a user's link) is followed, so the file
    it names is replaced and the link stays."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return path, False
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return path, True
    if os.path.islink(path):
        return Path(os.path.realpath(path)), False
    return path, False


def _write_in_place(path: Path, data: bytes | str) -> None:
    try:
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
    except OSError as err:
        raise InputError(f"cannot write here: {err.strerror}", path=path) from None


def write_file(path: Path | str, data: bytes | str) -> Path:
    """Writes one file atomically; returns its path."""
    write_files({Path(path): data})
    return Path(path)


def splice_generated(path: Path, parts: dict[str, str]) -> bool:
    """Puts each generated part of the document `path` (the text between `<!-- NAME:begin -->`
    and `<!-- NAME:end -->`, for NAME in `parts`) in place; writes the file only if it changed
    and says whether it did."""
    text = path.read_text()
    new = text
    for name, body in parts.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        head, rest = new.split(begin, 1)
        _, tail = rest.split(end, 1)
        new = f"{head}{begin}\n{body}{end}{tail}"
    if new != text:
        write_file(path, new)
    return new != text


@contextlib.contextmanager
def staged_file(path: Path | str) -> Iterator[Path]:
    """Yields a temporary path for a library to write (`DataFrame.to_parquet`, ...); when the
    block ends without an error its content becomes `path`."""
    path, in_place = _destination(Path(path))
    if not in_place:
        reclaim(_folder(path))
    try:
        fd, name = tempfile.mkstemp(
            prefix=_prefix(path.name, "tmp"), suffix=".tmp", dir=None if in_place else _folder(path)
        )
    except OSError as err:
        raise InputError(f"cannot write here: {err.strerror}", path=path) from None
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if in_place:
            _write_in_place(path, tmp.read_bytes())
        else:
            tmp.chmod(FILE_MODE)
            tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def _make_parents(out: Path) -> list[Path]:
    """Creates the missing parents of `out`; returns those created, to undo on failure."""
    missing = []
    parent = out.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    created: list[Path] = []
    for p in reversed(missing):
        try:
            p.mkdir()
        except OSError as err:
            _remove_dirs(created)
            raise InputError(
                f"--out: cannot create the directory: {err.strerror}", path=p
            ) from None
        created.append(p)
    return created


def _remove_dirs(created: list[Path]) -> None:
    for p in reversed(created):
        with contextlib.suppress(OSError):
            p.rmdir()


def earlier_output(*names: str) -> Callable[[Path], bool]:
    """The one "earlier output" rule, for `staged_dir`: a directory is an earlier output of a
    command when it holds, as plain files, every one of `names` (files the command always
    writes). A user's folder that happens to hold one of them is still refused."""
    if not names:
        raise ValueError("earlier_output: name at least one file the command always writes")

    def holds(out: Path) -> bool:
        return all((out / name).is_file() for name in names)

    return holds


@contextlib.contextmanager
def staged_dir(
    out: Path | str, *, is_earlier_output: Callable[[Path], bool], refusal: str
) -> Iterator[Path]:
    """Yields an empty hidden directory beside `out`; when the block ends without an error it
    becomes `out`, replacing an earlier output. `out` is replaced only if it is empty or
    `is_earlier_output(out)` holds (`earlier_output(...)`, the rule every command uses):
    `--out ~` must never delete a home directory. Otherwise
    the command stops before any work with `refusal` as the error."""
    out = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        raise InputError("--out: exists and is not a directory", path=out)
    if out.is_dir() and any(out.iterdir()) and not is_earlier_output(out):
        raise InputError(f"--out: {refusal}", path=out)
    created = _make_parents(out)
    reclaim(out.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(out.name, "partial"), dir=out.parent))
        tmp.chmod(DIR_MODE)
    except OSError as err:
        _remove_dirs(created)
        raise InputError(f"--out: cannot write here: {err.strerror}", path=out) from None
    try:
        yield tmp
        _publish(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_dirs(created)
        raise


def _publish(tmp: Path, out: Path) -> None:
    """Renames the finished `tmp` to `out`, moving an earlier `out` aside until it succeeds."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=_prefix(out.name, "old"), dir=out.parent))
        out.rename(old / out.name)
    try:
        tmp.rename(out)
    except OSError:
        if old is not None:
            (old / out.name).rename(out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
