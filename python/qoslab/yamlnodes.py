"""A YAML file as PyYAML's node tree (each node knows its line), for the readers that report a
field's line in their errors (the NVMe-lite run matrix, sweep specs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qoslab.errors import InputError


def compose_yaml(data: bytes, path: Path) -> Any:
    """The root node of `data` (None for an empty document); text that is not UTF-8 or not YAML
    is an `InputError` naming `path` and, where PyYAML knows it, the line."""
    import yaml  # only the commands that read YAML pay for importing it

    try:
        return yaml.compose(data.decode("utf-8"), Loader=yaml.SafeLoader)
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=path) from None
    except RecursionError:
        raise InputError("invalid YAML: nested too deeply", path=path) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(err, "problem", None) or str(err)
        raise InputError(f"invalid YAML: {problem}", path=path, line=line) from None
