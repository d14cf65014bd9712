/* Definitions shared by the model, its metrics and the schedule writers (not a public API). */
#ifndef NVMELITE_INTERNAL_H
#define NVMELITE_INTERNAL_H

#include "nvmelite.h"

#define NL_NONE_YET UINT64_MAX

struct nl_ctx {
    size_t cap;
    /* The canonical pending list: ids in pending[head, head + count), ascending. Submissions
     * append the largest id; removal closes the gap from the shorter side. */
    uint64_t *pending;
    size_t head, count;
    /* Per command: event index of its SUBMIT and COMPLETE lines, completion rank. */
    uint64_t *submit_ev, *complete_ev, *rank;
    uint64_t *order;   /* cmd ids in COMPLETE-line order */
    uint64_t *scratch; /* latencies, then a Fenwick tree for RD and FE */
    uint64_t *fences;  /* cmd ids of the submitted FENCE commands */
    uint32_t host[NL_STORAGE_WORDS], dev[NL_STORAGE_WORDS];
};

/* What one run did, as the metrics need it (spec §9). */
typedef struct {
    size_t n_cmds, submitted, completed, n_fences;
    uint64_t pending_peak, pending_area, n_ok, n_err, n_timeout;
} nl_tally;

void nl_compute_metrics(nl_ctx *c, const nl_workload *w, const nl_tally *t, nl_metrics *m);

/* .sched and JSON schedule record writers (schedule.c). */
void nl_sched_put_header(nl_buf *b, const nl_workload *w, const nl_params *p);
void nl_sched_put_end(nl_buf *b);
void nl_record_put_begin(nl_buf *b, const nl_workload *w, const nl_params *p);
void nl_record_put_pick(nl_buf *b, size_t *n_steps, size_t pick_index);
void nl_record_put_fault(nl_buf *b, size_t *n_steps, enum nl_fault f, uint64_t at_step);
void nl_record_put_end(nl_buf *b, size_t n_steps);

#endif
