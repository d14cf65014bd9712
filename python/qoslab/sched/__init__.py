"""The scheduler study in the simulator (`qoslab sched study`): the block layer's I/O schedulers
under the two-job workload of `qoslab lab sched`, beside the real kernel's results."""
