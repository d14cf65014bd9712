"""Differential testing of NVMe-lite implementations ("devices under test").

`qoslab nvmelite diff` runs a matrix in qoslab's model, replays every run's schedule on a DUT
(any executable speaking the protocol of docs/dut-protocol.md), compares the logs after the
protocol's normalisation and minimises each divergent run to a small reproducer.

- `compare`: log normalisation and the streaming comparison of one run's output
- `runner`: starting DUTs (single-run and batch mode), time limits and output caps
- `minimize`: delta debugging over a divergent run's commands and schedule steps
- `harness`: the whole `diff` command; `options`, `results`: its options and per-run reports;
  `cli`: its command line

`spec §N` is section N of the NVMe-lite specification, docs/nvme-lite-spec.md.
"""
