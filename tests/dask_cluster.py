"""A dask.distributed LocalCluster of two worker processes, in a process of its own (so that
no test's event-loop state can reach it): prints the scheduler's address, runs until its
stdin closes, then prints the (task, worker) pairs the scheduler ran, as JSON."""

from __future__ import annotations

import json
import sys

if __name__ == "__main__":
    from dask.distributed import Client, LocalCluster, get_task_stream

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
        get_task_stream(client) as tasks,
    ):
        print(cluster.scheduler_address, flush=True)
        sys.stdin.read()
    print(json.dumps([[t["key"], t["worker"]] for t in tasks.data]), flush=True)
