"""`qoslab plm ...`: the commands of the PLM study (study 2), above the sweep engine, whose
simulations run through it (the `plm` adapter, `qoslab.sweep.studies.plm`); what makes and runs
one simulation (the demand, the coordinator, the report) is `qoslab.plm`, below the sweep."""
