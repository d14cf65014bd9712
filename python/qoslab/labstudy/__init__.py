"""The real-device lab's commands (`qoslab lab ...`): the characterisation studies (`study.py`),
the kernel-scheduler runs (`sched.py`) and the command line (`cli.py`).

They sit above the sweep engine and run their fio runs through it (the `lab run` adapter,
`qoslab.sweep.studies.lab`); what runs one fio run (targets, the runner, the journal, plans,
analysis, figures) is `qoslab.lab`, below the sweep, which the adapter uses.
"""
