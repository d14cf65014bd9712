/*
 * nvmelite-c: an independent C11 implementation of the NVMe-lite step model.
 *
 * Written only from the behavioural specification (docs/nvme-lite-spec.md, cited as "spec §N")
 * and qoslab's schedule file format (docs/nvmelite-schedule.md). It deliberately shares no
 * code with, and was written without reading, qoslab's Rust model (crates/nvmelite): its
 * whole purpose is to be a second, independent code base that a differential test can hold
 * against the model (docs/dut-protocol.md). libc only.
 */
#ifndef NVMELITE_H
#define NVMELITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NL_STORAGE_WORDS 1024u

/* ---- growable byte buffer ------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} nl_buf;

void nl_buf_reserve(nl_buf *b, size_t extra);
void nl_buf_put(nl_buf *b, const void *p, size_t n);
void nl_buf_puts(nl_buf *b, const char *s);
void nl_buf_putc(nl_buf *b, char c);
void nl_buf_u64(nl_buf *b, uint64_t v);
void nl_buf_free(nl_buf *b);

/* Input errors carry the 1-based line they were found on (0 = no line). */
typedef struct {
    size_t line;
    char msg[480];
} nl_error;

void nl_error_set(nl_error *err, size_t line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- workload (spec §1) ------------------------------------------------------------------ */

enum nl_cmd_type { NL_WRITE, NL_WRITE_VISIBLE, NL_READ, NL_FENCE };

typedef struct {
    enum nl_cmd_type type;
    uint64_t lba;
    uint32_t len;
    uint32_t pattern;
} nl_cmd;

typedef struct {
    char *seed_id; /* decoded JSON string; may contain any byte but NUL-terminated too */
    size_t seed_id_len;
    nl_cmd *cmds;
    size_t n_cmds;
} nl_workload;

const char *nl_cmd_type_name(enum nl_cmd_type t);
int nl_workload_parse(const char *text, size_t len, nl_workload *w, nl_error *err);
int nl_workload_load(const char *path, nl_workload *w, nl_error *err);
void nl_workload_free(nl_workload *w);

/* Reads a whole file; returns NULL (errno set) on failure. The buffer is NUL-terminated. */
char *nl_read_file(const char *path, size_t *len);

/* ---- run parameters (spec §2) ------------------------------------------------------------ */

enum nl_policy { NL_FIFO, NL_RANDOM, NL_ADVERSARIAL, NL_BATCHED, NL_POLICY_COUNT };
enum nl_fault { NL_NONE, NL_TIMEOUT, NL_RESET, NL_FAULT_COUNT };

typedef struct {
    const char *p;
    size_t len;
} nl_str;

typedef struct {
    enum nl_policy policy;
    bool bound_inf;
    uint32_t bound_k;
    enum nl_fault fault;
    bool window_inf;
    uint64_t submit_window;
    uint64_t schedule_seed;
    nl_str scheduler_version; /* header-only strings: copied into the log, no effect */
    nl_str git_commit;
} nl_params;

/*
 * A policy is a small table of hooks over the canonical pending list: how many index draws a
 * normal completion consumes, how the candidate index is chosen, and how long a burst of
 * forced completions it opens (0 = none).
 */
typedef struct {
    const char *name;
    bool draws_pick;
    unsigned burst_max;
    size_t (*pick)(size_t candidates, uint64_t draw);
} nl_policy_ops;

extern const nl_policy_ops nl_policies[NL_POLICY_COUNT];
extern const char *const nl_fault_names[NL_FAULT_COUNT];

int nl_parse_policy(const char *s, size_t len, enum nl_policy *out);
int nl_parse_fault(const char *s, size_t len, enum nl_fault *out);
/* `inf` (any case) or a decimal with an optional `+` and leading zeros, at most `max`. */
int nl_parse_bound(const char *s, size_t len, uint64_t max, bool *inf, uint64_t *out);
/* plain decimal u64, no sign */
int nl_parse_u64(const char *s, size_t len, uint64_t *out);

void nl_put_bound(nl_buf *b, bool inf, uint64_t v);
void nl_put_run_id(nl_buf *b, const nl_workload *w, const nl_params *p);

/* ---- PRNG (spec §4) ------------------------------------------------------------------------ */

typedef struct {
    uint64_t state;
} nl_splitmix64;

uint64_t nl_splitmix64_next(nl_splitmix64 *g);

/* ---- decisions: where a run's freedom comes from ------------------------------------------ */

/*
 * The step loop asks a decider for every choice it has to make. Two deciders exist: the
 * seeded splitmix64 generator (a fresh run) and a schedule file (a replay, schedule.c).
 */
enum nl_step_kind { NL_STEP_SUBMIT, NL_STEP_COMPLETE, NL_STEP_TIMEOUT, NL_STEP_RESET };

typedef struct nl_decider nl_decider;
struct nl_decider {
    /* forced: -1 = free choice (a decision bit), 0 = submit forced, 1 = completion forced.
     * `in_burst` says a forced completion comes from a running BATCHED burst.
     * Returns 1 (complete), 0 (submit) or -1 (error set). */
    int (*decide)(nl_decider *d, int forced, bool in_burst, size_t pending, bool can_submit);
    /* The completion iteration just decided is `kind` (COMPLETE, TIMEOUT or RESET); for a
     * COMPLETE of a drawing policy, *draw receives the pick draw. Returns 0 or -1. */
    int (*completion)(nl_decider *d, enum nl_step_kind kind, bool needs_draw, uint64_t *draw);
    /* The loop ended. Returns 0 or -1. */
    int (*finish)(nl_decider *d);
    nl_error *err;
};

typedef struct {
    nl_decider base;
    nl_splitmix64 rng;
} nl_rng_decider;

void nl_rng_decider_init(nl_rng_decider *d, uint64_t seed, nl_error *err);

/* ---- metrics (spec §9) --------------------------------------------------------------------- */

typedef struct {
    double p95_latency_step, mean_latency_step, max_latency_step;
    double rd, fe, completion_rate;
    uint64_t pending_peak, pending_area, n_ok, n_err, n_timeout;
} nl_metrics;

/* ---- one run -------------------------------------------------------------------------------- */

/* Scratch state sized for a workload; reused across the runs of a matrix. */
typedef struct nl_ctx nl_ctx;

nl_ctx *nl_ctx_new(size_t n_cmds);
void nl_ctx_free(nl_ctx *c);

typedef struct {
    nl_buf log;      /* the run log (spec §6) */
    nl_buf *sched;   /* if set: the qoslab .sched text of this run */
    nl_buf *record;  /* if set: the reference JSON schedule record (spec §8) */
    nl_metrics metrics;
} nl_run_out;

/* Runs one workload; returns 0, or -1 with d->err set (only a replay can fail). */
int nl_run(nl_ctx *c, const nl_workload *w, const nl_params *p, nl_decider *d, nl_run_out *o);

/* A runs.csv row (spec §10.1) without its line ending. */
void nl_put_runs_row(nl_buf *b, const nl_workload *w, const nl_params *p, const nl_metrics *m,
                     const char sha_hex[65]);
extern const char nl_runs_csv_header[];

/* ---- schedule files (docs/nvmelite-schedule.md) ---------------------------------------------- */

typedef struct {
    nl_decider base;
    const char *text;
    size_t len, pos, line;   /* cursor and the 1-based line of the last step read */
    enum nl_step_kind kind;  /* the step read by the last decide() */
    bool has_draw;
    uint64_t draw;
    enum nl_policy policy;
    nl_buf values[4];        /* unescaped seed_id, scheduler_version, git_commit; scratch */
} nl_sched_decider;

/* Parses the header of a .sched file into *p and *seed_id (their strings live in the decider
 * until nl_sched_close) and prepares a decider that reads the steps. */
int nl_sched_open(nl_sched_decider *d, const char *text, size_t len, nl_params *p,
                  nl_str *seed_id, nl_error *err);
void nl_sched_close(nl_sched_decider *d);

/* ---- SHA-256 ----------------------------------------------------------------------------------- */

void nl_sha256_hex(const void *data, size_t len, char out[65]);

#endif
