/* Per-run metrics (spec §9) and the runs.csv row (spec §10.1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char nl_runs_csv_header[] =
    "run_id,p95_latency_step,mean_latency_step,max_latency_step,RD,FE,pending_peak,"
    "pending_area,n_ok,n_err,n_timeout,completion_rate,log_sha256";

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Fenwick tree over positions 0..n-1 in tree[1..n]: counts, prefix sums. */
static void fenwick_clear(uint64_t *tree, size_t n) { memset(tree, 0, (n + 1) * sizeof *tree); }

static void fenwick_add(uint64_t *tree, size_t n, size_t pos)
{
    for (size_t i = pos + 1; i <= n; i += i & (~i + 1))
        tree[i]++;
}

/* number of inserted positions < pos */
static uint64_t fenwick_below(const uint64_t *tree, size_t pos)
{
    uint64_t s = 0;
    for (size_t i = pos; i > 0; i -= i & (~i + 1))
        s += tree[i];
    return s;
}

void nl_compute_metrics(nl_ctx *c, const nl_workload *w, const nl_tally *t, nl_metrics *m)
{
    memset(m, 0, sizeof *m);
    const nl_cmd *cmds = w->cmds;

    /* step latency (spec §9.2): non-FENCE commands with a COMPLETE line, any status */
    size_t n_lat = 0;
    uint64_t lat_sum = 0;
    for (size_t id = 0; id < t->submitted; id++)
        if (cmds[id].type != NL_FENCE && c->complete_ev[id] != NL_NONE_YET) {
            uint64_t lat = c->complete_ev[id] - c->submit_ev[id];
            c->scratch[n_lat++] = lat;
            lat_sum += lat;
        }
    if (n_lat > 0) {
        qsort(c->scratch, n_lat, sizeof *c->scratch, cmp_u64);
        /* nearest rank from below, the product taken in double precision */
        size_t idx = (size_t)(0.95 * (double)(n_lat - 1));
#ifdef NVMELITE_MUTANT_P95_OFF_BY_ONE
        if (idx + 1 < n_lat)
            idx++;
#endif
        m->p95_latency_step = (double)c->scratch[idx];
        m->mean_latency_step = (double)lat_sum / (double)n_lat;
        m->max_latency_step = (double)c->scratch[n_lat - 1];
    }

    /* RD (spec §9.3): inversions of the completion order, FENCEs and TIMEOUT victims included */
    const size_t done = t->completed;
    if (done >= 2) {
        fenwick_clear(c->scratch, t->n_cmds);
        uint64_t inversions = 0;
        for (size_t i = 0; i < done; i++) {
            inversions += i - fenwick_below(c->scratch, (size_t)c->order[i]);
            fenwick_add(c->scratch, t->n_cmds, (size_t)c->order[i]);
        }
        m->rd = (double)inversions / ((double)done * (double)(done - 1) / 2.0);
    }

    /* FE (spec §9.5): pooled over fences; pairs of submitted non-FENCE commands around it */
    uint64_t pairs = 0, satisfied = 0;
    for (size_t k = 0; k < t->n_fences; k++) {
        const size_t f = (size_t)c->fences[k];
        uint64_t n_before = 0, n_after = 0, after_open = 0, after_done = 0;
        for (size_t x = 0; x < f; x++)
            n_before += cmds[x].type != NL_FENCE;
        fenwick_clear(c->scratch, done);
        for (size_t y = f + 1; y < t->submitted; y++) {
            if (cmds[y].type == NL_FENCE)
                continue;
            n_after++;
            if (c->complete_ev[y] == NL_NONE_YET) {
                after_open++;
            } else {
                after_done++;
                fenwick_add(c->scratch, done, (size_t)c->rank[y]);
            }
        }
        if (n_before * n_after == 0)
            continue;
        pairs += n_before * n_after;
        for (size_t x = 0; x < f; x++) {
            if (cmds[x].type == NL_FENCE || c->complete_ev[x] == NL_NONE_YET)
                continue;
            uint64_t completed_earlier = fenwick_below(c->scratch, (size_t)c->rank[x]);
            satisfied += after_open + (after_done - completed_earlier);
        }
    }
    m->fe = pairs ? (double)satisfied / (double)pairs : 1.0;

    m->pending_peak = t->pending_peak;
    m->pending_area = t->pending_area;
    m->n_ok = t->n_ok;
    m->n_err = t->n_err;
    m->n_timeout = t->n_timeout;
    m->completion_rate = t->n_cmds ? (double)t->n_ok / (double)t->n_cmds : 1.0;
}

void nl_put_runs_row(nl_buf *b, const nl_workload *w, const nl_params *p, const nl_metrics *m,
                     const char sha_hex[65])
{
    char tmp[512];
    /* the run id is quoted the way Python's csv module quotes (spec §10.1): only when it
     * holds a comma, a quote or a line break, with quotes doubled */
    nl_buf id = {0};
    nl_put_run_id(&id, w, p);
    bool quote = false;
    for (size_t i = 0; i < id.len; i++)
        quote |= id.data[i] == ',' || id.data[i] == '"' || id.data[i] == '\r' || id.data[i] == '\n';
    if (quote) {
        nl_buf_putc(b, '"');
        for (size_t i = 0; i < id.len; i++) {
            if (id.data[i] == '"')
                nl_buf_putc(b, '"');
            nl_buf_putc(b, id.data[i]);
        }
        nl_buf_putc(b, '"');
    } else {
        nl_buf_put(b, id.data, id.len);
    }
    nl_buf_free(&id);
    int n = snprintf(tmp, sizeof tmp, ",%.6f,%.6f,%.6f,%.6f,%.6f,", m->p95_latency_step,
                     m->mean_latency_step, m->max_latency_step, m->rd, m->fe);
    nl_buf_put(b, tmp, (size_t)n);
    nl_buf_u64(b, m->pending_peak);
    nl_buf_putc(b, ',');
    nl_buf_u64(b, m->pending_area);
    nl_buf_putc(b, ',');
    nl_buf_u64(b, m->n_ok);
    nl_buf_putc(b, ',');
    nl_buf_u64(b, m->n_err);
    nl_buf_putc(b, ',');
    nl_buf_u64(b, m->n_timeout);
    n = snprintf(tmp, sizeof tmp, ",%.6f,", m->completion_rate);
    nl_buf_put(b, tmp, (size_t)n);
    nl_buf_put(b, sha_hex, 64);
}
