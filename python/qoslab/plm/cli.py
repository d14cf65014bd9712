"""`qoslab plm`: Predictable Latency Mode studies."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(
    name="plm",
    help="Predictable Latency Mode: NVM sets' deterministic windows and the PLM coordinator.",
    no_args_is_help=True,
)


@app.command("coordinate")
def coordinate_cmd(
    demands: Path = typer.Argument(
        ...,
        help="CSV of window,host,class,demand rows (class high, medium or low).",
        show_default=False,
    ),
    capacity: int = typer.Option(
        ...,
        "--capacity",
        help="Deterministic-window counts (DC) of a window, C.",
        show_default=False,
    ),
    predictor: str = typer.Option(
        "ewma", "--predictor", help="exact (host-directed) or ewma (coordinator-directed)."
    ),
    zeta: float = typer.Option(0.5, "--zeta", help="ewma: P(n+1) = zeta D(n) + (1 - zeta) P(n)."),
    policy: str = typer.Option(
        "sp", "--policy", help="Splits the residual: sp, fr, proportional or maxmin."
    ),
    ratios: str = typer.Option(
        "0.5,0.3,0.2", "--ratios", help="fr: the shares of the high, medium and low classes."
    ),
    min_share: float = typer.Option(
        0.5, "--min-share", help="Each host's minimum is min(R, floor(C x S / hosts))."
    ),
    initial: float | None = typer.Option(
        None, "--initial", help="ewma: P(0).", show_default="C / hosts"
    ),
    out: Path = typer.Option(..., "--out", help="ALLOC.csv to write.", show_default=False),
) -> None:
    """Allocate each window's counts among the hosts, and write what each host got and used."""
    from qoslab.plm.coordinate import coordinate, parse_ratios, write_alloc

    rows = coordinate(
        demands,
        capacity=capacity,
        predictor=predictor,
        zeta=zeta,
        policy=policy,
        ratios=parse_ratios(ratios),
        min_share=min_share,
        initial=initial,
    )
    write_alloc(rows, out)


@app.command("study")
def study_cmd(
    out: Path = typer.Option(..., "--out", help="Folder to write the report and tables into."),
    datasets: str = typer.Option("DS1,DS2,DS3,DS4", "--datasets", help="Table I's datasets."),
    configs: str = typer.Option("1,2,3,4", "--configs", help="Table II's configs."),
    policies: str = typer.Option("sp,fr", "--policies", help="sp, fr or both."),
    duration: str = typer.Option("30s", "--duration", help="Simulated time of each run."),
    seed: int = typer.Option(1, "--seed", help="Seed of the demand generator and the runs."),
    trace: list[Path] | None = typer.Option(
        None,
        "--trace",
        help="SYSTOR '17 CSV of the high, medium and low host (give it three times), "
        "replayed instead of the generator.",
        show_default="the generator",
    ),
    workers: int = typer.Option(0, "--workers", help="Simulations at once (0: up to 2)."),
    set_: list[str] | None = typer.Option(
        None,
        "--set",
        help="KEY=VALUE of the device or path, added to every run (e.g. "
        "media.cache.dram_rate_mts=2400); give it once per key.",
        show_default="the study's device",
    ),
    slow_reads: int = typer.Option(
        0,
        "--slow-reads",
        help="Split each run's N slowest reads by what they waited for and where "
        "(media.diag.slow_reads) into slow_reads.csv.",
    ),
) -> None:
    """The document's evaluation: baselines, HoD and CoD, sp and fr, on each dataset and config."""
    from qoslab.plm.run_study import main

    main(
        out=out,
        datasets=datasets,
        configs=configs,
        policies=policies,
        duration=duration,
        seed=seed,
        traces=trace or None,
        workers=workers,
        sets=set_ or None,
        slow_reads=slow_reads,
    )
