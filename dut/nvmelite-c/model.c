/*
 * The NVMe-lite step loop (spec §3-§6): storage, PRNG, policies, faults and the run log.
 *
 * The NVMELITE_MUTANT_* macros compile deliberate faults into the mutant builds that the
 * differential tests make (tests/test_nvmelite_diff.py); a normal build defines none of them.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- PRNG (spec §4) ---------------------------------------------------------------------- */

uint64_t nl_splitmix64_next(nl_splitmix64 *g)
{
    g->state += 0x9E3779B97F4A7C15u;
    uint64_t z = g->state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* ---- policies (spec §5.4 step 4) -------------------------------------------------------- */

static size_t pick_oldest(size_t candidates, uint64_t draw)
{
    (void)candidates, (void)draw;
    return 0;
}

static size_t pick_newest(size_t candidates, uint64_t draw)
{
    (void)draw;
    return candidates - 1;
}

static size_t pick_drawn(size_t candidates, uint64_t draw) { return (size_t)(draw % candidates); }

const nl_policy_ops nl_policies[NL_POLICY_COUNT] = {
    [NL_FIFO] = {.name = "FIFO", .pick = pick_oldest},
    [NL_RANDOM] = {.name = "RANDOM", .draws_pick = true, .pick = pick_drawn},
    [NL_ADVERSARIAL] = {.name = "ADVERSARIAL", .pick = pick_newest},
    /* BATCHED picks like RANDOM; its bursts only change when completions happen. */
    [NL_BATCHED] = {.name = "BATCHED", .draws_pick = true, .burst_max = 4, .pick = pick_drawn},
};

/* ---- the seeded decider ------------------------------------------------------------------ */

static int rng_decide(nl_decider *d, int forced, bool in_burst, size_t pending, bool can_submit)
{
    (void)in_burst, (void)pending, (void)can_submit;
    if (forced >= 0)
        return forced;
#ifdef NVMELITE_MUTANT_DECISION_HIGH_BIT
    return (int)(nl_splitmix64_next(&((nl_rng_decider *)d)->rng) >> 63);
#else
    return (int)(nl_splitmix64_next(&((nl_rng_decider *)d)->rng) & 1);
#endif
}

static int rng_completion(nl_decider *d, enum nl_step_kind kind, bool needs_draw, uint64_t *draw)
{
    if (kind == NL_STEP_COMPLETE && needs_draw)
        *draw = nl_splitmix64_next(&((nl_rng_decider *)d)->rng);
    return 0;
}

static int rng_finish(nl_decider *d)
{
    (void)d;
    return 0;
}

void nl_rng_decider_init(nl_rng_decider *d, uint64_t seed, nl_error *err)
{
    d->base = (nl_decider){.decide = rng_decide,
                           .completion = rng_completion,
                           .finish = rng_finish,
                           .err = err};
    d->rng.state = seed;
}

/* ---- scratch state ------------------------------------------------------------------------ */

nl_ctx *nl_ctx_new(size_t n_cmds)
{
    nl_ctx *c = calloc(1, sizeof *c);
    size_t n = n_cmds ? n_cmds : 1;
    if (!c)
        return NULL;
    c->cap = n_cmds;
    c->pending = malloc(n * sizeof *c->pending);
    c->submit_ev = malloc(n * sizeof *c->submit_ev);
    c->complete_ev = malloc(n * sizeof *c->complete_ev);
    c->rank = malloc(n * sizeof *c->rank);
    c->order = malloc(n * sizeof *c->order);
    c->scratch = malloc((n + 1) * sizeof *c->scratch);
    c->fences = malloc(n * sizeof *c->fences);
    if (!c->pending || !c->submit_ev || !c->complete_ev || !c->rank || !c->order ||
        !c->scratch || !c->fences) {
        nl_ctx_free(c);
        return NULL;
    }
    return c;
}

void nl_ctx_free(nl_ctx *c)
{
    if (!c)
        return;
    free(c->pending);
    free(c->submit_ev);
    free(c->complete_ev);
    free(c->rank);
    free(c->order);
    free(c->scratch);
    free(c->fences);
    free(c);
}

static uint64_t pending_remove(nl_ctx *c, size_t j)
{
    uint64_t *p = c->pending + c->head;
    uint64_t id = p[j];
    if (j < c->count / 2) {
        memmove(p + 1, p, j * sizeof *p);
        c->head++;
    } else {
        memmove(p + j, p + j + 1, (c->count - j - 1) * sizeof *p);
    }
    c->count--;
    return id;
}

/* ---- storage (spec §3) -------------------------------------------------------------------- */

enum status { ST_OK, ST_ERR, ST_TIMEOUT };
static const char *const status_names[] = {"OK", "ERR", "TIMEOUT"};

static enum status execute(nl_ctx *c, const nl_cmd *cmd, uint32_t *out)
{
    *out = 0;
    if (cmd->type == NL_FENCE)
        return ST_OK;
    uint64_t end = cmd->lba + cmd->len; /* wraps mod 2^64 like the reference */
    if (end > NL_STORAGE_WORDS)
        return ST_ERR;
    for (uint64_t i = cmd->lba; i < end; i++) {
        switch (cmd->type) {
        case NL_WRITE:
            c->host[i] = cmd->pattern;
            break;
        case NL_WRITE_VISIBLE:
            c->dev[i] = c->host[i];
            break;
        case NL_READ:
#ifdef NVMELITE_MUTANT_READ_HOST
            *out = *out * 31u + c->host[i];
#else
            *out = *out * 31u + c->dev[i];
#endif
            break;
        case NL_FENCE:
            break;
        }
    }
    return ST_OK;
}

/* ---- the step loop (spec §5) ---------------------------------------------------------------- */

static void put_header(nl_buf *log, const nl_workload *w, const nl_params *p)
{
    nl_buf_puts(log, "RUN_HEADER(run_id=");
    nl_put_run_id(log, w, p);
    nl_buf_puts(log, ", seed_id=");
    nl_buf_put(log, w->seed_id, w->seed_id_len);
    nl_buf_puts(log, ", schedule_seed=");
    nl_buf_u64(log, p->schedule_seed);
    nl_buf_puts(log, ", policy=");
    nl_buf_puts(log, nl_policies[p->policy].name);
    nl_buf_puts(log, ", bound_k=");
    nl_put_bound(log, p->bound_inf, p->bound_k);
    nl_buf_puts(log, ", fault_mode=");
    nl_buf_puts(log, nl_fault_names[p->fault]);
    nl_buf_puts(log, ", n_cmds=");
    nl_buf_u64(log, w->n_cmds);
    nl_buf_puts(log, ", submit_window=");
    nl_put_bound(log, p->window_inf, p->submit_window);
    nl_buf_puts(log, ", scheduler_version=");
    nl_buf_put(log, p->scheduler_version.p, p->scheduler_version.len);
    nl_buf_puts(log, ", git_commit=");
    nl_buf_put(log, p->git_commit.p, p->git_commit.len);
    nl_buf_puts(log, ")\n");
}

static void put_complete(nl_buf *log, uint64_t id, enum status st, uint32_t out)
{
    nl_buf_puts(log, "COMPLETE(cmd_id=");
    nl_buf_u64(log, id);
    nl_buf_puts(log, ", status=");
    nl_buf_puts(log, status_names[st]);
    nl_buf_puts(log, ", out=");
    nl_buf_u64(log, out);
    nl_buf_puts(log, ")\n");
}

static void put_pick_comment(nl_buf *b, size_t j, size_t cands, uint64_t id)
{
    nl_buf_puts(b, " # pick ");
    nl_buf_u64(b, j);
    nl_buf_puts(b, " of ");
    nl_buf_u64(b, cands);
    nl_buf_puts(b, ": cmd ");
    nl_buf_u64(b, id);
    nl_buf_putc(b, '\n');
}

int nl_run(nl_ctx *c, const nl_workload *w, const nl_params *p, nl_decider *d, nl_run_out *o)
{
    const nl_policy_ops *ops = &nl_policies[p->policy];
    const size_t n = w->n_cmds;
    nl_tally t = {.n_cmds = n};
    nl_buf *log = &o->log;
    log->len = 0;
    memset(c->host, 0, sizeof c->host);
    memset(c->dev, 0, sizeof c->dev);
    c->head = c->count = 0;
    size_t record_steps = 0;

    put_header(log, w, p);
    if (o->sched) {
        o->sched->len = 0;
        nl_sched_put_header(o->sched, w, p);
    }
    if (o->record) {
        o->record->len = 0;
        nl_record_put_begin(o->record, w, p);
    }

    const uint64_t fault_step = n / 2;
    bool fault_injected = false, stop_submits = false;
    uint64_t step_count = 0, ev = 0, fence_counter = 0, queued = 0;
    unsigned burst = 0;
    size_t next_cmd = 0;

    for (;;) {
        const size_t m = c->count;
        bool can_submit = (p->window_inf || m < p->submit_window) && next_cmd < n && !stop_submits;
        bool can_complete = m > 0;
        if (!can_submit && !can_complete)
            break;
        bool in_burst = ops->burst_max > 0 && burst > 0;
        int forced = in_burst ? 1 : (can_submit && can_complete) ? -1 : can_complete ? 1 : 0;
        int complete = d->decide(d, forced, in_burst, m, can_submit);
        if (complete < 0)
            return -1;

        if (!complete) { /* submit (spec §5.3) */
            const size_t id = next_cmd++;
            const nl_cmd *cmd = &w->cmds[id];
            c->pending[c->head + c->count++] = id;
            c->submit_ev[id] = ev++;
            c->complete_ev[id] = NL_NONE_YET;
            nl_buf_puts(log, "SUBMIT(cmd_id=");
            nl_buf_u64(log, id);
            nl_buf_puts(log, ", cmd_type=");
            nl_buf_puts(log, nl_cmd_type_name(cmd->type));
            nl_buf_puts(log, ")\n");
            if (cmd->type == NL_FENCE) {
#ifndef NVMELITE_MUTANT_FENCE_IGNORED
                nl_buf_puts(log, "FENCE(fence_id=");
                nl_buf_u64(log, fence_counter);
                nl_buf_puts(log, ")\n");
                ev++;
#endif
                fence_counter++;
                c->fences[t.n_fences++] = id;
            } else {
                queued++;
                t.pending_area += queued;
            }
            if (c->count > t.pending_peak)
                t.pending_peak = c->count;
            if (o->sched)
                nl_buf_puts(o->sched, "submit\n");
            continue;
        }

        /* completion phase: the fault check first (spec §5.5) */
        if (p->fault != NL_NONE && !fault_injected && step_count >= fault_step) {
            enum nl_step_kind kind = p->fault == NL_TIMEOUT ? NL_STEP_TIMEOUT : NL_STEP_RESET;
            if (d->completion(d, kind, false, NULL) != 0)
                return -1;
            if (o->record)
                nl_record_put_fault(o->record, &record_steps, p->fault, step_count);
            if (p->fault == NL_RESET) {
                nl_buf_puts(log, "RESET(reason=INJECTED, pending_before=");
                nl_buf_u64(log, m);
                nl_buf_puts(log, ")\n");
                ev++;
                c->count = 0;
                if (o->sched) {
                    nl_buf_puts(o->sched, "reset # ");
                    nl_buf_u64(o->sched, m);
                    nl_buf_puts(o->sched, " pending discarded\n");
                }
                break;
            }
#ifdef NVMELITE_MUTANT_TIMEOUT_NEWEST
            const uint64_t victim = pending_remove(c, m - 1);
#else
            const uint64_t victim = pending_remove(c, 0);
#endif
            c->complete_ev[victim] = ev++;
            c->rank[victim] = t.completed;
            c->order[t.completed++] = victim;
            if (w->cmds[victim].type != NL_FENCE) {
                queued = queued ? queued - 1 : 0;
                t.pending_area += queued;
            }
            t.n_timeout++;
            put_complete(log, victim, ST_TIMEOUT, 0);
            if (o->sched) {
                nl_buf_puts(o->sched, "timeout # cmd ");
                nl_buf_u64(o->sched, victim);
                nl_buf_putc(o->sched, '\n');
            }
            fault_injected = stop_submits = true;
            step_count++;
            continue;
        }

        /* a normal completion (spec §5.4) */
        if (ops->burst_max > 0 && burst == 0)
            burst = m < ops->burst_max ? (unsigned)m : ops->burst_max;
        size_t cands = m;
        if (!p->bound_inf && (uint64_t)p->bound_k < m - 1)
            cands = (size_t)p->bound_k + 1;
#ifdef NVMELITE_MUTANT_WINDOW_K_PLUS_1
        if (!p->bound_inf && cands < m)
            cands++;
#endif
        uint64_t draw = 0;
        if (d->completion(d, NL_STEP_COMPLETE, ops->draws_pick, &draw) != 0)
            return -1;
        const size_t j = ops->pick(cands, draw);
        const uint64_t id = pending_remove(c, j);
        uint32_t out;
        enum status st = execute(c, &w->cmds[id], &out);
        c->complete_ev[id] = ev++;
        c->rank[id] = t.completed;
        c->order[t.completed++] = id;
        if (w->cmds[id].type != NL_FENCE) {
            queued = queued ? queued - 1 : 0;
            t.pending_area += queued;
        }
        if (st == ST_OK)
            t.n_ok++;
        else
            t.n_err++;
        put_complete(log, id, st, out);
        if (o->sched) {
            nl_buf_puts(o->sched, "complete");
            if (ops->draws_pick) {
                nl_buf_puts(o->sched, " draw=");
                nl_buf_u64(o->sched, draw);
            }
            put_pick_comment(o->sched, j, cands, id);
        }
        if (o->record)
            nl_record_put_pick(o->record, &record_steps, j);
        if (ops->burst_max > 0 && burst > 0)
            burst--;
        step_count++;
    }
    if (d->finish(d) != 0)
        return -1;

    nl_buf_puts(log, "RUN_END(pending_left=");
    nl_buf_u64(log, c->count);
    nl_buf_puts(log, ", pending_peak=");
    nl_buf_u64(log, t.pending_peak);
    nl_buf_puts(log, ")\n");
    if (o->sched)
        nl_sched_put_end(o->sched);
    if (o->record)
        nl_record_put_end(o->record, record_steps);

    t.submitted = next_cmd;
    nl_compute_metrics(c, w, &t, &o->metrics);
    return 0;
}
