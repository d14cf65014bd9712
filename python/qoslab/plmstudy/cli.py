"""`qoslab plm`: Predictable Latency Mode studies."""

from __future__ import annotations

from pathlib import Path

import typer

from qoslab.options import store_option

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
    datasets: str | None = typer.Option(
        None,
        "--datasets",
        help="Table I's datasets the generator draws.",
        show_default="DS1,DS2,DS3,DS4",
    ),
    configs: str = typer.Option("1,2,3,4", "--configs", help="Table II's configs."),
    policies: str = typer.Option("sp,fr", "--policies", help="sp, fr or both."),
    duration: str | None = typer.Option(
        None,
        "--duration",
        help="Simulated time of each run (a --trace longer than this is cut).",
        show_default="15m, the document's",
    ),
    quick: bool = typer.Option(
        False, "--quick", help="2 s of simulated time per run: a check that it all runs."
    ),
    seed: int = typer.Option(
        1, "--seed", help="Seed of the first repetition's demand generator and runs."
    ),
    seeds: int = typer.Option(
        3,
        "--seeds",
        min=1,
        max=1000,
        help="Repetitions of every run, seeds --seed, --seed + 1, ... (each its own demand); "
        "the report gives means and 95 % intervals over them, and a verdict only from 3 or more.",
    ),
    trace: list[Path] | None = typer.Option(
        None,
        "--trace",
        help="SYSTOR '17 CSV of the high, medium and low host (give it three times), "
        "replayed instead of the generator.",
        show_default="the generator",
    ),
    writes: str = typer.Option(
        "0",
        "--writes",
        help="Share of the generator's requests that are writes, on top of Table I's reads "
        "(the document's scope is reads).",
    ),
    write_sensitivity: str = typer.Option(
        "0.1",
        "--write-sensitivity",
        help="Write shares also run on the first dataset (its shared baseline and CoD sp on "
        "Configs 2 and 4); empty: none.",
    ),
    sizes: str = typer.Option(
        "4k:1",
        "--sizes",
        help="Request sizes and weights, e.g. 4k:0.7,16k:0.2,64k:0.1 (Table I counts 4 KiB "
        "units, so larger requests are fewer).",
    ),
    burst_sigma: float | None = typer.Option(
        None,
        "--burst-sigma",
        help="Sigma of the lognormal factor the hosts share per 100 ms.",
        show_default="0.30, fitted to Fig. 6 (qoslab plm fit)",
    ),
    workers: int = typer.Option(0, "--workers", help="Simulations at once (0: up to 2)."),
    set_: list[str] | None = typer.Option(
        None,
        "--set",
        help="KEY=VALUE of the device or path, added to every run (e.g. "
        "media.cache.dram_rate_mts=2400; host.plm.* and media.gc.plm.* keys to the PLM runs "
        "only); give it once per key.",
        show_default="the study's device",
    ),
    slow_reads: int = typer.Option(
        0,
        "--slow-reads",
        help="Split each run's N slowest reads by what they waited for and where "
        "(media.diag.slow_reads) into slow_reads.csv.",
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar and no closing line."),
    store: Path | None = store_option(),
) -> None:
    """The document's evaluation: baselines, HoD and CoD, sp and fr, on each dataset and config."""
    from qoslab.plmstudy.run_study import main

    main(
        out=out,
        datasets=datasets,
        configs=configs,
        policies=policies,
        duration=duration,
        quick=quick,
        seed=seed,
        seeds=seeds,
        traces=trace or None,
        workers=workers,
        writes=writes,
        write_sensitivity=write_sensitivity,
        sizes=sizes,
        burst_sigma=burst_sigma,
        sets=set_ or None,
        slow_reads=slow_reads,
        quiet=quiet,
        store=store,
    )


@app.command("report")
def report_cmd(
    folder: Path = typer.Argument(..., help="A `qoslab plm study` output folder."),
) -> None:
    """Write a study's report again from its tables (nothing is simulated)."""
    from qoslab.plmstudy.run_study import rewrite

    rewrite(folder)


@app.command("fit")
def fit_cmd(
    out: Path = typer.Option(..., "--out", help="CSV of sigma,objective,fitted to write."),
) -> None:
    """Fit the generator's burstiness to the document's Fig. 6 (the coordinator alone over
    15 minutes of DS1 demand per grid point and seed; the least squared error wins)."""
    from qoslab.outputs import write_file
    from qoslab.plm import fit
    from qoslab.sim.api import check_writable

    check_writable(out, "--out")
    best, text = fit.record()
    write_file(out, text)
    print(f"wrote {out}: sigma {best:.2f} fits Fig. 6 best")
