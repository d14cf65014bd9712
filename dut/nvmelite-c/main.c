/*
 * nvmelite-c: command line of the independent C implementation of NVMe-lite.
 *
 *   nvmelite-c WORKLOAD.json SCHEDULE.sched     replay a schedule, the run log on stdout
 *   nvmelite-c replay WORKLOAD.json SCHEDULE.sched [--log F] [--metrics-out F]
 *                                               [--reference-schedule F]
 *   nvmelite-c run WORKLOAD.json --policy P --bound K --fault F --seed S [--submit-window W]
 *              [--scheduler-version V] [--git-commit G] [--log F] [--metrics-out F]
 *              [--schedule-out F] [--reference-schedule F]
 *   nvmelite-c matrix --out DIR [--policies L] [--bounds L] [--faults L] [--seeds A-B]
 *              [--submit-window W] [--scheduler-version V] [--git-commit G] [--no-logs]
 *              [--schedules] WORKLOAD.json...
 *   nvmelite-c --batch                          serve the DUT batch protocol on stdin/stdout
 *
 * This program is the project's device under test `builtin:c` (docs/dut-protocol.md). It was
 * written from the specification alone, without reading qoslab's Rust model.
 *
 * Exit status: 0 success, 2 bad input (one line on stderr naming the file, line or field),
 * 1 an I/O failure.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvmelite.h"

#define EXIT_BAD_INPUT 2

static const char usage[] =
    "usage: nvmelite-c WORKLOAD.json SCHEDULE.sched\n"
    "       nvmelite-c replay WORKLOAD.json SCHEDULE.sched [--log F] [--metrics-out F]\n"
    "                  [--reference-schedule F]\n"
    "       nvmelite-c run WORKLOAD.json --policy P --bound K --fault F --seed S\n"
    "                  [--submit-window W] [--scheduler-version V] [--git-commit G]\n"
    "                  [--log F] [--metrics-out F] [--schedule-out F] [--reference-schedule F]\n"
    "       nvmelite-c matrix --out DIR [--policies L] [--bounds L] [--faults L] [--seeds A-B]\n"
    "                  [--submit-window W] [--scheduler-version V] [--git-commit G]\n"
    "                  [--no-logs] [--schedules] WORKLOAD.json...\n"
    "       nvmelite-c --batch\n"
    "Runs the NVMe-lite step model (independent C implementation). Lists are comma-separated;\n"
    "matrix defaults: all policies, bounds 0,1,2,3,5,10,inf, all faults, seeds 0-99, window\n"
    "inf, scheduler version v1.0, empty git commit. A `--metrics-out -` row goes to stderr.\n";

static int bad_input(const char *file, size_t line, const char *msg)
{
    if (file && line)
        fprintf(stderr, "nvmelite-c: error: %s:%zu: %s\n", file, line, msg);
    else if (file)
        fprintf(stderr, "nvmelite-c: error: %s: %s\n", file, msg);
    else
        fprintf(stderr, "nvmelite-c: error: %s\n", msg);
    return EXIT_BAD_INPUT;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "nvmelite-c: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see nvmelite-c --help)\n");
    return EXIT_BAD_INPUT;
}

/* Writes a file through a temporary name, so a reader never sees half of it. */
static int write_file_atomic(const char *path, const void *data, size_t len)
{
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int rc = -1;
    if (f) {
        bool ok = fwrite(data, 1, len, f) == len;
        ok = (fclose(f) == 0) && ok;
        if (ok && rename(tmp, path) == 0)
            rc = 0;
        else
            remove(tmp);
    }
    if (rc != 0)
        fprintf(stderr, "nvmelite-c: error: cannot write %s: %s\n", path, strerror(errno));
    free(tmp);
    return rc;
}

/* `-` means stderr (metrics rows), anything else a file written atomically. */
static int write_output(const char *path, const void *data, size_t len)
{
    if (strcmp(path, "-") == 0) {
        fwrite(data, 1, len, stderr);
        return 0;
    }
    return write_file_atomic(path, data, len);
}

typedef struct {
    const char *log_path, *metrics_path, *sched_path, *record_path;
} outputs;

/* Runs one workload with a decider and writes what was asked for. */
static int run_and_write(const nl_workload *w, const nl_params *p, nl_decider *d,
                         const outputs *out, const char *err_file)
{
    nl_ctx *ctx = nl_ctx_new(w->n_cmds);
    if (!ctx)
        return bad_input(NULL, 0, "out of memory");
    nl_buf sched = {0}, record = {0};
    nl_run_out o = {.sched = out->sched_path ? &sched : NULL,
                    .record = out->record_path ? &record : NULL};
    int rc = 0;
    if (nl_run(ctx, w, p, d, &o) != 0) {
        rc = bad_input(err_file, d->err->line, d->err->msg);
        goto done;
    }
    if (out->log_path) {
        if (write_output(out->log_path, o.log.data, o.log.len) != 0)
            rc = 1;
    } else if (fwrite(o.log.data, 1, o.log.len, stdout) != o.log.len || fflush(stdout) != 0) {
        rc = 1;
    }
    if (rc == 0 && out->metrics_path) {
        char sha[65];
        nl_buf row = {0};
        nl_sha256_hex(o.log.data, o.log.len, sha);
        nl_put_runs_row(&row, w, p, &o.metrics, sha);
        nl_buf_put(&row, "\r\n", 2);
        if (write_output(out->metrics_path, row.data, row.len) != 0)
            rc = 1;
        nl_buf_free(&row);
    }
    if (rc == 0 && out->sched_path && write_output(out->sched_path, sched.data, sched.len) != 0)
        rc = 1;
    if (rc == 0 && out->record_path && write_output(out->record_path, record.data, record.len) != 0)
        rc = 1;
done:
    nl_buf_free(&o.log);
    nl_buf_free(&sched);
    nl_buf_free(&record);
    nl_ctx_free(ctx);
    return rc;
}

static int load_workload(const char *path, nl_workload *w)
{
    nl_error err = {0};
    if (nl_workload_load(path, w, &err) != 0)
        return bad_input(path, err.line, err.msg);
    return 0;
}

/* Binds the schedule's header to the workload: the seed ids must agree. */
static int open_schedule(const char *text, size_t len, const nl_workload *w,
                         nl_sched_decider *d, nl_params *p, nl_error *err)
{
    nl_str seed_id;
    if (nl_sched_open(d, text, len, p, &seed_id, err) != 0)
        return -1;
    if (seed_id.len != w->seed_id_len || memcmp(seed_id.p, w->seed_id, seed_id.len) != 0) {
        nl_error_set(err, 2, "the schedule's seed_id '%.*s' is not the workload's '%.*s'",
                     (int)(seed_id.len > 60 ? 60 : seed_id.len), seed_id.p,
                     (int)(w->seed_id_len > 60 ? 60 : w->seed_id_len), w->seed_id);
        return -1;
    }
    return 0;
}

static int cmd_replay(const char *wl_path, const char *sched_path, const outputs *out)
{
    nl_workload w;
    int rc = load_workload(wl_path, &w);
    if (rc)
        return rc;
    size_t len;
    char *text = nl_read_file(sched_path, &len);
    if (!text) {
        nl_workload_free(&w);
        char msg[256];
        snprintf(msg, sizeof msg, "cannot read the schedule: %s", strerror(errno));
        return bad_input(sched_path, 0, msg);
    }
    nl_error err = {0};
    nl_sched_decider d;
    nl_params p;
    if (open_schedule(text, len, &w, &d, &p, &err) != 0)
        rc = bad_input(sched_path, err.line, err.msg);
    else
        rc = run_and_write(&w, &p, &d.base, out, sched_path);
    nl_sched_close(&d);
    free(text);
    nl_workload_free(&w);
    return rc;
}

/* ---- argument helpers ------------------------------------------------------------------- */

static const char *opt_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static int parse_seed_range(const char *s, uint64_t *lo, uint64_t *hi)
{
    const char *dash = strchr(s, '-');
    if (!dash)
        return nl_parse_u64(s, strlen(s), lo) == 0 && (*hi = *lo, 1) ? 0 : -1;
    if (nl_parse_u64(s, (size_t)(dash - s), lo) != 0 ||
        nl_parse_u64(dash + 1, strlen(dash + 1), hi) != 0)
        return -1;
    return 0;
}

static int set_param(nl_params *p, const char *opt, const char *v)
{
    bool inf;
    uint64_t u;
    if (strcmp(opt, "--policy") == 0)
        return nl_parse_policy(v, strlen(v), &p->policy);
    if (strcmp(opt, "--fault") == 0)
        return nl_parse_fault(v, strlen(v), &p->fault);
    if (strcmp(opt, "--bound") == 0) {
        if (nl_parse_bound(v, strlen(v), UINT32_MAX, &inf, &u) != 0)
            return -1;
        p->bound_inf = inf, p->bound_k = (uint32_t)u;
        return 0;
    }
    if (strcmp(opt, "--submit-window") == 0)
        return nl_parse_bound(v, strlen(v), UINT64_MAX, &p->window_inf, &p->submit_window);
    if (strcmp(opt, "--seed") == 0)
        return nl_parse_u64(v, strlen(v), &p->schedule_seed);
    if (strcmp(opt, "--scheduler-version") == 0) {
        p->scheduler_version = (nl_str){v, strlen(v)};
        return 0;
    }
    if (strcmp(opt, "--git-commit") == 0) {
        p->git_commit = (nl_str){v, strlen(v)};
        return 0;
    }
    return 1; /* not a parameter option */
}

static int set_output(outputs *out, const char *opt, const char *v)
{
    if (strcmp(opt, "--log") == 0)
        out->log_path = v;
    else if (strcmp(opt, "--metrics-out") == 0)
        out->metrics_path = v;
    else if (strcmp(opt, "--schedule-out") == 0)
        out->sched_path = v;
    else if (strcmp(opt, "--reference-schedule") == 0)
        out->record_path = v;
    else
        return 1;
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    const char *wl_path = NULL;
    nl_params p = {.scheduler_version = {"v1.0", 4}, .git_commit = {"", 0}, .window_inf = true};
    outputs out = {0};
    bool seen_policy = false, seen_bound = false, seen_seed = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            if (wl_path)
                return usage_error("unexpected argument '%s'", a);
            wl_path = a;
            continue;
        }
        const char *v = opt_value(argc, argv, &i);
        if (!v)
            return usage_error("option %s needs a value", a);
        int rc = set_param(&p, a, v);
        if (rc < 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s: invalid value '%.200s'", a, v);
            return bad_input(NULL, 0, msg);
        }
        if (rc == 0) {
            seen_policy |= strcmp(a, "--policy") == 0;
            seen_bound |= strcmp(a, "--bound") == 0;
            seen_seed |= strcmp(a, "--seed") == 0;
            continue;
        }
        if (set_output(&out, a, v) != 0)
            return usage_error("unknown option '%s'", a);
    }
    if (!wl_path)
        return usage_error("%s", "run: missing WORKLOAD.json");
    if (!seen_policy || !seen_bound || !seen_seed)
        return usage_error("%s", "run: --policy, --bound and --seed are required");
    nl_workload w;
    int rc = load_workload(wl_path, &w);
    if (rc)
        return rc;
    nl_error err = {0};
    nl_rng_decider d;
    nl_rng_decider_init(&d, p.schedule_seed, &err);
    rc = run_and_write(&w, &p, &d.base, &out, wl_path);
    nl_workload_free(&w);
    return rc;
}

static int cmd_replay_args(int argc, char **argv)
{
    const char *pos[2] = {0};
    int n_pos = 0;
    outputs out = {0};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (n_pos == 2)
                return usage_error("unexpected argument '%s'", a);
            pos[n_pos++] = a;
            continue;
        }
        const char *v = opt_value(argc, argv, &i);
        if (!v)
            return usage_error("option %s needs a value", a);
        if (set_output(&out, a, v) != 0 || out.sched_path)
            return usage_error("unknown option '%s'", a);
    }
    if (n_pos != 2)
        return usage_error("%s", "replay: expected WORKLOAD.json SCHEDULE.sched");
    return cmd_replay(pos[0], pos[1], &out);
}

/* ---- matrix ------------------------------------------------------------------------------- */

typedef struct {
    char *run_id;
    size_t run_id_len, seq;
    char *row;
    size_t row_len;
} row_entry;

static int cmp_rows(const void *a, const void *b)
{
    const row_entry *x = a, *y = b;
    size_t n = x->run_id_len < y->run_id_len ? x->run_id_len : y->run_id_len;
    int c = memcmp(x->run_id, y->run_id, n);
    if (c)
        return c;
    if (x->run_id_len != y->run_id_len)
        return x->run_id_len < y->run_id_len ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Splits a comma-separated list and parses every item with `parse`; -1 names the bad item. */
typedef int (*item_parser)(const char *s, size_t len, uint64_t *out, bool *inf);

static int parse_policy_item(const char *s, size_t len, uint64_t *out, bool *inf)
{
    enum nl_policy p;
    (void)inf;
    if (nl_parse_policy(s, len, &p) != 0)
        return -1;
    *out = (uint64_t)p;
    return 0;
}

static int parse_fault_item(const char *s, size_t len, uint64_t *out, bool *inf)
{
    enum nl_fault f;
    (void)inf;
    if (nl_parse_fault(s, len, &f) != 0)
        return -1;
    *out = (uint64_t)f;
    return 0;
}

static int parse_bound_item(const char *s, size_t len, uint64_t *out, bool *inf)
{
    return nl_parse_bound(s, len, UINT32_MAX, inf, out);
}

typedef struct {
    uint64_t v[64];
    bool inf[64];
    size_t n;
} item_list;

static int parse_list(const char *opt, const char *s, item_parser parse, item_list *out)
{
    out->n = 0;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (out->n == 64 || parse(s, len, &out->v[out->n], &out->inf[out->n]) != 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s: invalid list item '%.*s'", opt, (int)(len > 60 ? 60 : len), s);
            return bad_input(NULL, 0, msg);
        }
        out->n++;
        if (!comma)
            return 0;
        s = comma + 1;
    }
}

static int make_dir(const char *path)
{
    if (mkdir(path, 0777) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "nvmelite-c: error: cannot create %s: %s\n", path, strerror(errno));
    return -1;
}

static int cmd_matrix(int argc, char **argv)
{
    const char *out_dir = NULL;
    bool write_logs = true, write_scheds = false;
    item_list policies = {.v = {NL_FIFO, NL_RANDOM, NL_ADVERSARIAL, NL_BATCHED}, .n = 4};
    item_list bounds = {.v = {0, 1, 2, 3, 5, 10, 0}, .inf = {[6] = true}, .n = 7};
    item_list faults = {.v = {NL_NONE, NL_TIMEOUT, NL_RESET}, .n = 3};
    uint64_t seed_lo = 0, seed_hi = 99;
    nl_params base = {.scheduler_version = {"v1.0", 4}, .git_commit = {"", 0}, .window_inf = true};
    const char **wl_paths = calloc((size_t)argc, sizeof *wl_paths);
    size_t n_wl = 0;
    int rc = 0;
    if (!wl_paths)
        return 1;
    for (int i = 2; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            wl_paths[n_wl++] = a;
            continue;
        }
        if (strcmp(a, "--no-logs") == 0) {
            write_logs = false;
            continue;
        }
        if (strcmp(a, "--schedules") == 0) {
            write_scheds = true;
            continue;
        }
        const char *v = opt_value(argc, argv, &i);
        if (!v) {
            rc = usage_error("option %s needs a value", a);
        } else if (strcmp(a, "--out") == 0) {
            out_dir = v;
        } else if (strcmp(a, "--policies") == 0) {
            rc = parse_list(a, v, parse_policy_item, &policies);
        } else if (strcmp(a, "--bounds") == 0) {
            rc = parse_list(a, v, parse_bound_item, &bounds);
        } else if (strcmp(a, "--faults") == 0) {
            rc = parse_list(a, v, parse_fault_item, &faults);
        } else if (strcmp(a, "--seeds") == 0) {
            if (parse_seed_range(v, &seed_lo, &seed_hi) != 0 || seed_lo > seed_hi) {
                char msg[300];
                snprintf(msg, sizeof msg, "--seeds: expected A-B with A <= B (plain decimals), got '%.200s'", v);
                rc = bad_input(NULL, 0, msg);
            }
        } else if (strcmp(a, "--submit-window") == 0 || strcmp(a, "--scheduler-version") == 0 ||
                   strcmp(a, "--git-commit") == 0) {
            if (set_param(&base, a, v) != 0) {
                char msg[300];
                snprintf(msg, sizeof msg, "%s: invalid value '%.200s'", a, v);
                rc = bad_input(NULL, 0, msg);
            }
        } else {
            rc = usage_error("unknown option '%s'", a);
        }
    }
    if (rc == 0 && !out_dir)
        rc = usage_error("%s", "matrix: --out DIR is required");
    if (rc == 0 && n_wl == 0)
        rc = usage_error("%s", "matrix: at least one WORKLOAD.json is required");
    if (rc) {
        free(wl_paths);
        return rc;
    }

    /* Every workload is checked before anything runs. */
    nl_workload *wls = calloc(n_wl, sizeof *wls);
    size_t loaded = 0;
    for (; loaded < n_wl && rc == 0; loaded++) {
        rc = load_workload(wl_paths[loaded], &wls[loaded]);
        if (rc == 0 && (memchr(wls[loaded].seed_id, '/', wls[loaded].seed_id_len) ||
                        strlen(wls[loaded].seed_id) != wls[loaded].seed_id_len))
            rc = bad_input(wl_paths[loaded], 0, "seed_id cannot be part of a file name");
    }

    nl_buf path = {0};
    if (rc == 0 && (make_dir(out_dir) != 0 ||
                    (write_logs && (nl_buf_puts(&path, out_dir), nl_buf_puts(&path, "/logs"),
                                    make_dir(path.data) != 0)) ||
                    (write_scheds && (path.len = 0, nl_buf_puts(&path, out_dir),
                                      nl_buf_puts(&path, "/schedules"), make_dir(path.data) != 0))))
        rc = 1;

    const uint64_t n_seeds = seed_hi - seed_lo + 1;
    const size_t total = n_wl * policies.n * bounds.n * faults.n * (size_t)n_seeds;
    row_entry *rows = rc == 0 ? calloc(total ? total : 1, sizeof *rows) : NULL;
    if (rc == 0 && !rows) {
        fputs("nvmelite-c: error: out of memory\n", stderr);
        rc = 1;
    }
    size_t n_rows = 0;
    nl_buf sched = {0}, line = {0}, id = {0};
    for (size_t wi = 0; wi < n_wl && rc == 0; wi++) {
        const nl_workload *w = &wls[wi];
        nl_ctx *ctx = nl_ctx_new(w->n_cmds);
        nl_run_out o = {.sched = write_scheds ? &sched : NULL};
        for (size_t pi = 0; pi < policies.n && rc == 0; pi++)
            for (size_t bi = 0; bi < bounds.n && rc == 0; bi++)
                for (size_t fi = 0; fi < faults.n && rc == 0; fi++)
                    for (uint64_t s = seed_lo;; s++) {
                        nl_params p = base;
                        p.policy = (enum nl_policy)policies.v[pi];
                        p.bound_inf = bounds.inf[bi];
                        p.bound_k = (uint32_t)bounds.v[bi];
                        p.fault = (enum nl_fault)faults.v[fi];
                        p.schedule_seed = s;
                        nl_error err = {0};
                        nl_rng_decider d;
                        nl_rng_decider_init(&d, s, &err);
                        nl_run(ctx, w, &p, &d.base, &o);
                        char sha[65];
                        nl_sha256_hex(o.log.data, o.log.len, sha);
                        line.len = 0;
                        nl_put_runs_row(&line, w, &p, &o.metrics, sha);
                        row_entry *r = &rows[n_rows];
                        r->seq = n_rows++;
                        id.len = 0;
                        nl_put_run_id(&id, w, &p);
                        r->row = malloc(line.len + 1);
                        r->run_id = malloc(id.len + 1);
                        if (!r->row || !r->run_id) {
                            rc = 1;
                            break;
                        }
                        memcpy(r->row, line.data, line.len + 1);
                        r->row_len = line.len;
                        memcpy(r->run_id, id.data, id.len + 1);
                        r->run_id_len = id.len;
                        for (int kind = 0; kind < 2; kind++) {
                            nl_buf *content = kind == 0 ? &o.log : &sched;
                            if ((kind == 0 && !write_logs) || (kind == 1 && !write_scheds))
                                continue;
                            path.len = 0;
                            nl_buf_puts(&path, out_dir);
                            nl_buf_puts(&path, kind == 0 ? "/logs/" : "/schedules/");
                            nl_buf_put(&path, r->run_id, r->run_id_len);
                            nl_buf_puts(&path, kind == 0 ? ".log" : ".sched");
                            /* plain write(2): thousands of small files, no stdio buffers */
                            int fd = open(path.data, O_WRONLY | O_CREAT | O_TRUNC, 0666);
                            bool ok = fd >= 0 &&
                                      write(fd, content->data, content->len) == (ssize_t)content->len;
                            if (fd >= 0 && close(fd) != 0)
                                ok = false;
                            if (!ok) {
                                fprintf(stderr, "nvmelite-c: error: cannot write %s: %s\n",
                                        path.data, strerror(errno));
                                rc = 1;
                            }
                        }
                        if (s == seed_hi || rc)
                            break;
                    }
        nl_buf_free(&o.log);
        nl_ctx_free(ctx);
    }
    if (rc == 0) {
        /* byte order of run_id; a repeated run id keeps its last run, as overwritten logs do */
        qsort(rows, n_rows, sizeof *rows, cmp_rows);
        nl_buf csv = {0};
        nl_buf_puts(&csv, nl_runs_csv_header);
        nl_buf_puts(&csv, "\r\n");
        for (size_t i = 0; i < n_rows; i++) {
            if (i + 1 < n_rows && rows[i].run_id_len == rows[i + 1].run_id_len &&
                memcmp(rows[i].run_id, rows[i + 1].run_id, rows[i].run_id_len) == 0)
                continue;
            nl_buf_put(&csv, rows[i].row, rows[i].row_len);
            nl_buf_puts(&csv, "\r\n");
        }
        path.len = 0;
        nl_buf_puts(&path, out_dir);
        nl_buf_puts(&path, "/runs.csv");
        if (write_file_atomic(path.data, csv.data, csv.len) != 0)
            rc = 1;
        nl_buf_free(&csv);
    }
    for (size_t i = 0; i < n_rows; i++) {
        free(rows[i].row);
        free(rows[i].run_id);
    }
    free(rows);
    for (size_t i = 0; i < loaded; i++)
        nl_workload_free(&wls[i]);
    free(wls);
    free(wl_paths);
    nl_buf_free(&path);
    nl_buf_free(&sched);
    nl_buf_free(&line);
    nl_buf_free(&id);
    return rc;
}

/* ---- batch protocol (docs/dut-protocol.md) ------------------------------------------------- */

#define CACHE_SLOTS 8

typedef struct {
    char *path;
    nl_workload w;
    nl_ctx *ctx;
} cached_workload;

static void respond(const char *status, const nl_buf *a, const nl_buf *b)
{
    printf("%s %zu", status, a->len);
    if (b)
        printf(" %zu", b->len);
    putchar('\n');
    fwrite(a->data, 1, a->len, stdout);
    if (b)
        fwrite(b->data, 1, b->len, stdout);
    fflush(stdout);
}

static void respond_error(const char *file, size_t line, const char *msg)
{
    nl_buf m = {0};
    char tmp[64];
    nl_buf_puts(&m, file);
    if (line) {
        snprintf(tmp, sizeof tmp, ":%zu", line);
        nl_buf_puts(&m, tmp);
    }
    nl_buf_puts(&m, ": ");
    nl_buf_puts(&m, msg);
    nl_buf_putc(&m, '\n');
    respond("error", &m, NULL);
    nl_buf_free(&m);
}

static int cmd_batch(void)
{
    cached_workload cache[CACHE_SLOTS] = {{0}};
    size_t next_slot = 0;
    nl_buf header = {0}, sched = {0}, row = {0};
    nl_run_out o = {0};
    int rc = 0;
    for (;;) {
        header.len = 0;
        int ch;
        while ((ch = getchar()) != EOF && ch != '\n')
            nl_buf_putc(&header, (char)ch);
        if (ch == EOF && header.len == 0)
            break;
        size_t sched_len;
        int consumed = 0;
        if (ch == EOF || header.len < 4 || memcmp(header.data, "run ", 4) != 0 ||
            sscanf(header.data + 4, "%zu %n", &sched_len, &consumed) != 1 || consumed == 0 ||
            header.data[4] < '0' || header.data[4] > '9') {
            fprintf(stderr, "nvmelite-c: error: batch request: expected 'run <schedule_bytes> "
                            "<workload_path>', got '%.80s'\n", header.data ? header.data : "");
            rc = EXIT_BAD_INPUT;
            break;
        }
        const char *wl_path = header.data + 4 + consumed;
        sched.len = 0;
        nl_buf_reserve(&sched, sched_len + 1);
        if (fread(sched.data, 1, sched_len, stdin) != sched_len) {
            fputs("nvmelite-c: error: batch request: schedule truncated\n", stderr);
            rc = EXIT_BAD_INPUT;
            break;
        }
        sched.len = sched_len;
        sched.data[sched_len] = '\0';

        cached_workload *cw = NULL;
        for (size_t i = 0; i < CACHE_SLOTS; i++)
            if (cache[i].path && strcmp(cache[i].path, wl_path) == 0)
                cw = &cache[i];
        if (!cw) {
            nl_workload w;
            nl_error err = {0};
            if (nl_workload_load(wl_path, &w, &err) != 0) {
                respond_error(wl_path, err.line, err.msg);
                continue;
            }
            cw = &cache[next_slot];
            next_slot = (next_slot + 1) % CACHE_SLOTS;
            free(cw->path);
            nl_workload_free(&cw->w);
            nl_ctx_free(cw->ctx);
            cw->path = strdup(wl_path);
            cw->w = w;
            cw->ctx = nl_ctx_new(w.n_cmds);
        }
        nl_error err = {0};
        nl_sched_decider d;
        nl_params p;
        if (open_schedule(sched.data, sched.len, &cw->w, &d, &p, &err) != 0 ||
            nl_run(cw->ctx, &cw->w, &p, &d.base, &o) != 0) {
            nl_sched_close(&d);
            respond_error("schedule", err.line, err.msg);
            continue;
        }
        char sha[65];
        nl_sha256_hex(o.log.data, o.log.len, sha);
        row.len = 0;
        nl_put_runs_row(&row, &cw->w, &p, &o.metrics, sha);
        nl_sched_close(&d);
        nl_buf_putc(&row, '\n');
        respond("ok", &o.log, &row);
    }
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        free(cache[i].path);
        nl_workload_free(&cache[i].w);
        nl_ctx_free(cache[i].ctx);
    }
    nl_buf_free(&header);
    nl_buf_free(&sched);
    nl_buf_free(&row);
    nl_buf_free(&o.log);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--batch") == 0) {
        static char outbuf[1 << 16];
        setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
        return cmd_batch();
    }
    if (argc >= 2 && strcmp(argv[1], "run") == 0)
        return cmd_run(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "replay") == 0)
        return cmd_replay_args(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "matrix") == 0)
        return cmd_matrix(argc, argv);
    if (argc == 3 && argv[1][0] != '-' && argv[2][0] != '-') {
        /* the DUT protocol's single-run mode; the metrics row goes where the harness asks */
        outputs out = {.metrics_path = getenv("QOSLAB_DUT_METRICS")};
        if (out.metrics_path && !*out.metrics_path)
            out.metrics_path = NULL;
        return cmd_replay(argv[1], argv[2], &out);
    }
    fputs(usage, stderr);
    return EXIT_BAD_INPUT;
}
