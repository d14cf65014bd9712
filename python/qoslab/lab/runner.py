"""Running fio: one job file per data point, json+ output, metadata, progress, Ctrl-C.

Each run leaves three files behind: `jobs/<run>.fio` (exactly what fio ran), `raw/<run>.json`
(fio's json+ output) and `raw/<run>.meta.json` (fio's version, the kernel, the target, its
queue settings and scheduler as they were when the run started). fio runs in its own session
so that a Ctrl-C reaches qoslab first; qoslab then stops fio with SIGINT, waits for it, and
lets the caller's clean-up run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from qoslab._core import __version__
from qoslab.errors import InputError
from qoslab.fio import FioOutput, read_fio_json
from qoslab.lab.journal import Journal
from qoslab.lab.queue import device_metadata

_POLL_S = 0.2


def find_fio() -> str:
    fio = shutil.which("fio")
    if fio is None:
        hint = (
            "run `make tools` or `apt-get install fio`"
            if os.geteuid() == 0
            else "install it as root: `sudo make tools` or `sudo apt-get install fio`"
        )
        raise InputError(f"fio is not installed: {hint}")
    return fio


def fio_version(fio: str) -> str:
    done = subprocess.run([fio, "--version"], capture_output=True, text=True)
    return done.stdout.strip()


@dataclass
class FioJob:
    """One `[section]` of a job file; a value of None writes a bare flag (`time_based`)."""

    name: str
    options: dict[str, object] = field(default_factory=dict)


def render_job_file(global_options: dict[str, object], jobs: list[FioJob], header: str) -> str:
    lines = [f"# {line}" for line in header.splitlines()]
    sections = [FioJob("global", global_options), *jobs]
    for job in sections:
        lines += ["", f"[{job.name}]"]
        for key, value in job.options.items():
            lines.append(key if value is None else f"{key}={value}")
    return "\n".join(lines) + "\n"


class Runner:
    """Runs fio job files into an output directory, advancing one progress bar: a task of its
    own of `total_s` seconds, or the caller's `task` of `progress` (a command whose runs each
    get a runner of their own, `qoslab.sweep.studies.lab`), from where that task stands."""

    def __init__(self, out_dir: Path, target, progress=None, total_s: float = 0.0, task=None):
        self.out_dir = out_dir
        self.target = target
        self.fio = find_fio()
        self.fio_version = fio_version(self.fio)
        self.progress = progress
        self.done_s = 0.0
        if progress is not None and task is None:
            task = progress.add_task("fio", total=max(total_s, 1e-9))
        elif progress is not None:
            self.done_s = next(t.completed for t in progress.tasks if t.id == task)
        self.task = task

    def run(
        self,
        run_id: str,
        jobs: list[FioJob],
        global_options: dict[str, object],
        expected_s: float,
        header: str = "",
    ) -> tuple[FioOutput, dict]:
        job_file = render_job_file(global_options, jobs, header or run_id)
        return self.run_job_file(run_id, job_file, expected_s)

    def run_job_file(self, run_id: str, job_file: str, expected_s: float) -> tuple[FioOutput, dict]:
        """Runs `job_file` (its text) as `jobs/<run_id>.fio`."""
        job_path = self.out_dir / "jobs" / f"{run_id}.fio"
        raw_path = self.out_dir / "raw" / f"{run_id}.json"
        log_dir = self.out_dir / "logs" / run_id
        for d in (job_path.parent, raw_path.parent, log_dir):
            d.mkdir(parents=True, exist_ok=True)
        job_path.write_text(job_file)
        meta = {
            "run": run_id,
            "qoslab_version": __version__,
            "fio_version": self.fio_version,
            "target": self.target.describe(),
            **device_metadata(self.target.disk),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        cmd = [self.fio, "--output-format=json+", f"--output={raw_path}", str(job_path)]
        meta["command"] = cmd
        stderr = self._execute(cmd, log_dir, expected_s, run_id)
        meta["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        if stderr.strip():
            (self.out_dir / "raw" / f"{run_id}.stderr").write_text(stderr)
        output = read_fio_json(raw_path)
        for job in output.jobs:
            if job.error:
                raise InputError(
                    f"fio job {job.name!r} failed with error {job.error} "
                    f"({os.strerror(job.error)}); see {raw_path}",
                    path=job_path,
                )
        (self.out_dir / "raw" / f"{run_id}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        logs_root = self.out_dir / "logs"
        while log_dir != logs_root.parent and not any(log_dir.iterdir()):
            log_dir.rmdir()  # runs without logs leave no empty directories behind
            log_dir = log_dir.parent
        return output, meta

    def _execute(self, cmd: list[str], cwd: Path, expected_s: float, run_id: str) -> str:
        if self.progress is not None:
            self.progress.update(self.task, description=run_id)
        started = time.monotonic()
        deadline = started + 3 * expected_s + 60  # a hung device must not hang the study
        # fio runs in a session of its own and would outlive a `kill -9` of qoslab: its job
        # file goes into the lab's journal first, for the next lab command to end it.
        with (
            open(cwd / ".fio-stderr", "w+") as err,
            Journal().change("fio", job_file=os.path.abspath(cmd[-1])),
        ):
            proc = subprocess.Popen(
                cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
            )
            try:
                while proc.poll() is None:
                    time.sleep(_POLL_S)
                    elapsed = time.monotonic() - started
                    if self.progress is not None:
                        done = self.done_s + min(elapsed, expected_s)
                        self.progress.update(self.task, completed=done)
                    if time.monotonic() > deadline:
                        raise InputError(
                            f"fio ran {elapsed:.0f} s for a {expected_s:.0f} s run; stopped it",
                            path=cmd[-1],
                        )
            finally:
                _stop(proc)
            err.seek(0)
            stderr = err.read()
        (cwd / ".fio-stderr").unlink()
        self.done_s += expected_s
        if self.progress is not None:
            self.progress.update(self.task, completed=self.done_s)
        if proc.returncode != 0:
            last = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise InputError(f"fio failed: {last}", path=cmd[-1])
        return stderr


def _stop(proc: subprocess.Popen) -> None:
    """Stops fio if it still runs: SIGINT (fio ends its jobs cleanly), then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGINT, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
