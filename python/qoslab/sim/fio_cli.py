"""fio's own command-line syntax for `qoslab sim`.

fio takes jobs on its command line as well as in files: every job option may be given as
`--option=value` or `--option value` (`--norandommap` alone), each `--name=NAME` starts a job
section named NAME, and options before the first `--name` are global. qoslab's own options mix
freely with them, as fio's do. Jobs come either from the command line or from a job file, so a
word after an option is always its value. The job options become the text of a job file,
parsed by the same parser as a file; `--showcmd` goes the other way, from a parsed job file
back to fio's command line.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from qoslab import _core
from qoslab.errors import InputError, did_you_mean

# The name job text made from the command line goes by in messages.
COMMAND_LINE = "<command line>"

# fio's own command-line options (fio 3.33's HOWTO, "Command line options") that mean nothing
# without fio's processes and a real device, each refused in one line saying why; the others
# are options of `qoslab sim`.
NOT_SIMULATED = {
    **dict.fromkeys(
        ("debug", "cpuclock-test", "crctest", "idle-prof"),
        "measures or traces fio's own process and CPU",
    ),
    **dict.fromkeys(
        ("alloc-size", "max-jobs"), "sizes fio's shared memory and processes; a simulation has none"
    ),
    **dict.fromkeys(
        ("server", "daemonize", "client", "remote-config"), "runs fio on other machines"
    ),
    **dict.fromkeys(
        ("trigger-file", "trigger-timeout", "trigger", "trigger-remote"),
        "runs a command at a wall-clock moment of a real run",
    ),
    "merge-blktrace-only": "merges blktrace files (qoslab sim replays them with --trace)",
    "inflate-log": "decompresses fio's compressed logs (qoslab writes none)",
    "aux-path": "places fio's state files (a simulation writes none)",
    "bandwidth-log": "writes fio's aggregate bandwidth logs (per job: write_bw_log)",
    "enghelp": "lists fio's engines (qoslab's: the engines table of docs/workload.md)",
}


@dataclass
class CommandLineJobs:
    """Job-file text made from fio options on the command line, with the argument that wrote
    each line (line numbers are 1-based)."""

    text: str = ""
    arguments: dict[int, str] = field(default_factory=dict)

    def where(self, line: int | None) -> str:
        return self.arguments.get(line or 0, "the command line")


def fio_option_names() -> list[str]:
    """Every fio option name and alias qoslab knows."""
    return [n for name, aliases, *_ in _core.fio_options() for n in (name, *aliases)]


def split_arguments(
    args: list[str], params: list
) -> tuple[list[str], list[tuple[str, str | None, str]]]:
    """Separates qoslab's own arguments from fio job options.

    Returns (own arguments in order, fio options as (name, value or None when it stands
    alone, the argument as written)). An option that is neither is an input error with the
    nearest name of either kind."""
    own_takes_value: dict[str, bool] = {}
    for p in params:
        if p.param_type_name == "option":
            for opt in (*p.opts, *p.secondary_opts):
                own_takes_value[opt] = not (p.is_flag or p.count)
    fio = set(fio_option_names())
    own: list[str] = []
    jobs: list[tuple[str, str | None, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            own += args[i - 1 :]
            break
        if not arg.startswith("--") or len(arg) == 2:
            own.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in own_takes_value:
            own.append(arg)
            if own_takes_value[name] and not eq and i < len(args):
                own.append(args[i])
                i += 1
            continue
        option = name[2:]
        if option in NOT_SIMULATED:
            raise InputError(f"{name}: fio's {name} {NOT_SIMULATED[option]}; not in qoslab sim")
        if option not in fio:
            # The closest of qoslab's own options and fio's.
            hint = did_you_mean(name, [*own_takes_value, *(f"--{n}" for n in sorted(fio))])
            raise InputError(f"no such option: {name}{hint}")
        if eq:
            jobs.append((option, value, arg))
        elif i < len(args) and not args[i].startswith("-"):
            jobs.append((option, args[i], f"{arg} {args[i]}"))
            i += 1
        else:
            jobs.append((option, None, arg))
    return own, jobs


def job_text(options: list[tuple[str, str | None, str]]) -> CommandLineJobs:
    """The job file fio's command line stands for: options before the first `--name` in
    `[global]`, then a section per `--name`."""
    jobs = CommandLineJobs()
    lines: list[str] = []

    def add(line: str, argument: str) -> None:
        lines.append(line)
        jobs.arguments[len(lines)] = argument

    for name, value, argument in options:
        if name == "name":
            add(f"[{value}]", argument)
        else:
            if not lines:
                add("[global]", argument)
            add(name if value is None else f"{name}={value}", argument)
    jobs.text = "".join(f"{line}\n" for line in lines)
    return jobs


def cmdhelp(name: str) -> str:
    """fio's `--cmdhelp`: a job option's help (its aliases, and whether the simulator ignores
    it), or every option's first line for `all`."""
    options = _core.fio_options()
    if name == "all":
        return "".join(f"{n:<24}: {help_text}\n" for n, _, _, _, help_text in options)
    for n, aliases, _, ignored, help_text in options:
        if name == n or name in aliases:
            lines = [(n, help_text)] + [("alias", a) for a in aliases]
            if ignored:
                lines.append(("qoslab", "accepted and ignored by the simulator"))
            return "".join(f"{key:>20}: {value}\n" for key, value in lines)
    names = [n for n, aliases, *_ in options for n in (n, *aliases)]
    raise InputError(f"--cmdhelp: no job option '{name}'{did_you_mean(name, names)}")


def _shell_word(name: str, value: str) -> str:
    """`--name=value` as one word of a shell command line. fio puts `description` in double
    quotes and nothing else (init.c, `dump_print_option`), so its line does not run again when
    another value has a space: qoslab quotes those too (`shlex.quote`), and escapes what a
    double quote would not keep (`"`, `$`, a backquote, a backslash)."""
    if name == "description":
        escaped = "".join(f"\\{c}" if c in '"$`\\' else c for c in value)
        return f'--{name}="{escaped}"'
    word = f"--{name}={value}"
    return word if shlex.quote(word) == word else f"--{name}={shlex.quote(value)}"


def showcmd(parsed: dict) -> str:
    """fio's `--showcmd`: the job file as one fio command line, section by section as written
    (a `[global]` section's options where it stands), each option under fio's own name and
    those fio reads first (`kb_base`) first in their section, ending with a space as fio's
    line does; a value the shell would split or expand is quoted (`_shell_word`), so the line
    runs again."""
    canonical: dict[str, str] = {}
    first: set[str] = set()
    for name, aliases, read_first, *_ in _core.fio_options():
        for n in (name, *aliases):
            canonical[n] = name
        if read_first:
            first.add(name)

    def options(pairs) -> list[str]:
        named = [(canonical.get(k, k), v) for k, v in pairs]
        named = [p for p in named if p[0] in first] + [p for p in named if p[0] not in first]
        return [f"--{k}" if v == "" else _shell_word(k, v) for k, v in named]

    globals_ = parsed["global_options"]
    words = ["fio"]
    done = 0
    for job in parsed["jobs"]:
        words += options(globals_[done : job["globals_before"]])
        done = max(done, job["globals_before"])
        words.append(_shell_word("name", job["section"]))
        words += options(job["options"])
    words += options(globals_[done:])
    return " ".join(words) + " \n"
