"""Reading NVMe-lite inputs: workload JSON files and the run-matrix YAML (spec section 11).

Every problem becomes an `InputError` naming the file, the line where known and the field.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from qoslab._core import nvmelite as _core
from qoslab.errors import InputError
from qoslab.limits import MAX_INT
from qoslab.yamlnodes import compose_yaml

REQUIRED_KEYS = ("seeds", "policies", "bounds", "faults", "schedule_seeds", "scheduler_version")
LIST_KEYS = ("seeds", "policies", "bounds", "faults")


def read_input(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise InputError(f"cannot read the file: {err.strerror}", path=path) from None


def load_workload(path: str | Path) -> _core.Workload:
    """A workload file, parsed as strictly as the spec's reference (section 1.2)."""
    data = read_input(Path(path))
    try:
        return _core.Workload.from_json(data)
    except _core.WorkloadError as err:
        message, field, line = err.args
        text = f"{field}: {message}" if field else message
        raise InputError(text, path=path, line=line) from None


def project_commit() -> str:
    """The commit of the qoslab checkout this package is imported from, or "" when the
    package does not live in a git checkout of qoslab (e.g. an installed wheel)."""
    package = Path(__file__).resolve().parent.parent

    try:
        # One git process for both answers: each costs the command's start-up some 10 ms.
        done = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 2:
        return ""
    top, head = lines
    # A wheel installed into a virtualenv inside some other repository is not a checkout.
    if (Path(top) / "python" / "qoslab").resolve() != package:
        return ""
    return head


@dataclass(frozen=True)
class _Scalar:
    text: str
    line: int


def _compose(path: Path):
    return compose_yaml(read_input(path), path)


def _config_values(path: Path) -> dict[str, _Scalar | list[_Scalar]]:
    import yaml

    root = _compose(path)
    if not isinstance(root, yaml.MappingNode):
        line = root.start_mark.line + 1 if root is not None else None
        raise InputError("expected a mapping of matrix keys", path=path, line=line)
    values: dict[str, _Scalar | list[_Scalar]] = {}
    for key_node, value_node in root.value:
        key = key_node.value
        line = key_node.start_mark.line + 1
        if key in values:
            raise InputError(f"{key}: duplicated key", path=path, line=line)
        if key in LIST_KEYS:
            if not isinstance(value_node, yaml.SequenceNode):
                raise InputError(f"{key}: expected a list", path=path, line=line)
            items = []
            for i, item in enumerate(value_node.value):
                if not isinstance(item, yaml.ScalarNode):
                    raise InputError(
                        f"{key}[{i}]: expected a single value",
                        path=path,
                        line=item.start_mark.line + 1,
                    )
                items.append(_Scalar(item.value, item.start_mark.line + 1))
            if not items:
                raise InputError(f"{key}: expected at least one entry", path=path, line=line)
            values[key] = items
        elif key in ("schedule_seeds", "scheduler_version", "git_commit"):
            if not isinstance(value_node, yaml.ScalarNode):
                raise InputError(f"{key}: expected a single value", path=path, line=line)
            # The scalar's literal text, as the reference's YAML reader takes it (`~` is `~`).
            values[key] = _Scalar(value_node.value, value_node.start_mark.line + 1)
        else:
            values[key] = _Scalar("", line)  # unknown keys are ignored
    for key in REQUIRED_KEYS:
        if key not in values:
            raise InputError(f"missing required key '{key}'", path=path)
    return values


def _workload_paths(path: Path, values) -> list[tuple[Path, int]]:
    found = []
    for entry in values["seeds"]:
        wpath = path.parent / entry.text
        try:
            found_file = wpath.is_file()
        except OSError as err:  # a name too long for the file system, ...
            raise InputError(
                f"seeds: cannot read workload file '{entry.text}' ({err.strerror})",
                path=path,
                line=entry.line,
            ) from None
        if not found_file:
            raise InputError(
                f"seeds: workload file '{entry.text}' not found (looked for {wpath})",
                path=path,
                line=entry.line,
            )
        found.append((wpath, entry.line))
    return found


def workload_paths(config: str | Path) -> list[tuple[Path, int]]:
    """The config's workload files, resolved against its folder, each with its line in the
    config (for errors that point at it)."""
    path = Path(config)
    return _workload_paths(path, _config_values(path))


def load_matrix(config: str | Path, submit_window: str = "inf") -> _core.Matrix:
    """The run matrix of a config file; workload paths are relative to the config's folder.

    Everything is validated before anything runs: a bad entry anywhere is an `InputError`.
    """
    path = Path(config)
    values = _config_values(path)
    workloads = [load_workload(wpath) for wpath, _ in _workload_paths(path, values)]
    git_commit = values.get("git_commit")
    commit = git_commit.text if isinstance(git_commit, _Scalar) else ""
    if commit == "auto":
        commit = project_commit()
    try:
        matrix = _core.Matrix(
            workloads,
            [s.text for s in values["policies"]],
            [s.text for s in values["bounds"]],
            [s.text for s in values["faults"]],
            values["schedule_seeds"].text,
            submit_window,
            values["scheduler_version"].text,
            commit,
        )
    except _core.ParamsError as err:
        message, field, index = err.args
        if field == "submit-window":
            raise InputError(f"--submit-window: {message}") from None
        node = values[field]
        if index is not None:
            node = node[index]
            field = f"{field}[{index}]"
        raise InputError(f"{field}: {message}", path=path, line=node.line) from None
    if matrix.runs > MAX_INT:
        raise InputError(
            f"schedule_seeds: the matrix would hold {matrix.runs} runs (workloads x policies x "
            f"bounds x faults x seeds), more than {MAX_INT}",
            path=path,
            line=values["schedule_seeds"].line,
        )
    return matrix
