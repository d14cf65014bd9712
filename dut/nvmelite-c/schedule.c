/*
 * Schedules: qoslab's replayable `.sched` file (docs/nvmelite-schedule.md), read as a decider
 * and written during a run, and the reference's JSON schedule record (spec §8), written only.
 */
#include <string.h>

#include "internal.h"

static const char sched_magic[] = "qoslab-nvmelite-schedule v1";

/* ---- writing ------------------------------------------------------------------------------ */

/* A header value on one line: `\` doubled, control characters (and DEL) as `\xHH`. */
static void put_kv(nl_buf *b, const char *key, const char *v, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    nl_buf_puts(b, key);
    nl_buf_putc(b, '=');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '\\') {
            nl_buf_put(b, "\\\\", 2);
        } else if (c < 0x20 || c == 0x7f) {
            char esc[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            nl_buf_put(b, esc, sizeof esc);
        } else {
            nl_buf_putc(b, (char)c);
        }
    }
    nl_buf_putc(b, '\n');
}

void nl_sched_put_header(nl_buf *b, const nl_workload *w, const nl_params *p)
{
    nl_buf_puts(b, sched_magic);
    nl_buf_putc(b, '\n');
    put_kv(b, "seed_id", w->seed_id, w->seed_id_len);
    nl_buf_puts(b, "schedule_seed=");
    nl_buf_u64(b, p->schedule_seed);
    nl_buf_puts(b, "\npolicy=");
    nl_buf_puts(b, nl_policies[p->policy].name);
    nl_buf_puts(b, "\nbound_k=");
    nl_put_bound(b, p->bound_inf, p->bound_k);
    nl_buf_puts(b, "\nfault_mode=");
    nl_buf_puts(b, nl_fault_names[p->fault]);
    nl_buf_puts(b, "\nsubmit_window=");
    nl_put_bound(b, p->window_inf, p->submit_window);
    nl_buf_putc(b, '\n');
    put_kv(b, "scheduler_version", p->scheduler_version.p, p->scheduler_version.len);
    put_kv(b, "git_commit", p->git_commit.p, p->git_commit.len);
    nl_buf_puts(b, "steps\n");
}

void nl_sched_put_end(nl_buf *b) { nl_buf_puts(b, "end\n"); }

/* JSON string escaping as the reference's serializer does it: `"`, `\` and control
 * characters escaped (short forms where JSON has them), everything else verbatim. */
static void put_json_string(nl_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    nl_buf_putc(b, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            break;
        }
        if (esc) {
            nl_buf_puts(b, esc);
        } else if (c < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            nl_buf_put(b, u, sizeof u);
        } else {
            nl_buf_putc(b, (char)c);
        }
    }
    nl_buf_putc(b, '"');
}

void nl_record_put_begin(nl_buf *b, const nl_workload *w, const nl_params *p)
{
    nl_buf_puts(b, "{\n  \"seed_id\": ");
    put_json_string(b, w->seed_id, w->seed_id_len);
    nl_buf_puts(b, ",\n  \"schedule_seed\": ");
    nl_buf_u64(b, p->schedule_seed);
    nl_buf_puts(b, ",\n  \"policy\": \"");
    nl_buf_puts(b, nl_policies[p->policy].name);
    nl_buf_puts(b, "\",\n  \"bound_k\": \"");
    nl_put_bound(b, p->bound_inf, p->bound_k);
    nl_buf_puts(b, "\",\n  \"fault_mode\": \"");
    nl_buf_puts(b, nl_fault_names[p->fault]);
    nl_buf_puts(b, "\",\n  \"steps\": [");
}

void nl_record_put_pick(nl_buf *b, size_t *n_steps, size_t pick_index)
{
    nl_buf_puts(b, (*n_steps)++ ? ",\n" : "\n");
    nl_buf_puts(b, "    {\n      \"type\": \"CompletePick\",\n      \"pick_index\": ");
    nl_buf_u64(b, pick_index);
    nl_buf_puts(b, "\n    }");
}

void nl_record_put_fault(nl_buf *b, size_t *n_steps, enum nl_fault f, uint64_t at_step)
{
    nl_buf_puts(b, (*n_steps)++ ? ",\n" : "\n");
    nl_buf_puts(b, "    {\n      \"type\": \"FAULT\",\n      \"fault_type\": \"");
    nl_buf_puts(b, nl_fault_names[f]);
    nl_buf_puts(b, "\",\n      \"at_step\": ");
    nl_buf_u64(b, at_step);
    nl_buf_puts(b, "\n    }");
}

void nl_record_put_end(nl_buf *b, size_t n_steps)
{
    nl_buf_puts(b, n_steps ? "\n  ]\n}" : "]\n}");
}

/* ---- reading -------------------------------------------------------------------------------- */

/* The next line [*start, *start + *len) without its `\n`; false at the end of the text. */
static bool next_line(nl_sched_decider *d, const char **start, size_t *len)
{
    if (d->pos >= d->len)
        return false;
    const char *s = d->text + d->pos;
    const char *nl = memchr(s, '\n', d->len - d->pos);
    *start = s;
    *len = nl ? (size_t)(nl - s) : d->len - d->pos;
    d->pos += *len + (nl ? 1 : 0);
    d->line++;
    return true;
}

enum { STEP_END = NL_STEP_RESET + 1 };

static bool word_is(const char *s, size_t len, const char *word)
{
    return len == strlen(word) && memcmp(s, word, len) == 0;
}

static const char *step_name(int kind)
{
    switch (kind) {
    case NL_STEP_SUBMIT:
        return "submit";
    case NL_STEP_COMPLETE:
        return "complete";
    case NL_STEP_TIMEOUT:
        return "timeout";
    case NL_STEP_RESET:
        return "reset";
    default:
        return "end";
    }
}

/* Reads one step line into d->kind (or STEP_END); returns the kind or -1. */
static int read_step(nl_sched_decider *d)
{
    const char *s;
    size_t len;
    if (!next_line(d, &s, &len)) {
        nl_error_set(d->base.err, d->line + 1, "the schedule ends without its 'end' line");
        return -1;
    }
    const char *hash = memchr(s, '#', len);
    if (hash)
        len = (size_t)(hash - s);
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
        len--;
    while (len > 0 && (s[0] == ' ' || s[0] == '\t'))
        s++, len--;
    d->has_draw = false;
    int kind;
    if (word_is(s, len, "submit")) {
        kind = NL_STEP_SUBMIT;
    } else if (word_is(s, len, "complete")) {
        kind = NL_STEP_COMPLETE;
    } else if (len > 9 && memcmp(s, "complete ", 9) == 0) {
        size_t i = 9;
        while (i < len && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (len - i < 5 || memcmp(s + i, "draw=", 5) != 0 ||
            nl_parse_u64(s + i + 5, len - i - 5, &d->draw) != 0) {
            nl_error_set(d->base.err, d->line,
                         "expected 'complete draw=<u64>', found '%.*s'", (int)(len > 60 ? 60 : len), s);
            return -1;
        }
        d->has_draw = true;
        kind = NL_STEP_COMPLETE;
    } else if (word_is(s, len, "timeout")) {
        kind = NL_STEP_TIMEOUT;
    } else if (word_is(s, len, "reset")) {
        kind = NL_STEP_RESET;
    } else if (word_is(s, len, "end")) {
        kind = STEP_END;
    } else {
        nl_error_set(d->base.err, d->line,
                     "expected a step (submit, complete, timeout, reset or end), found '%.*s'",
                     (int)(len > 60 ? 60 : len), s);
        return -1;
    }
    d->kind = (enum nl_step_kind)kind;
    return kind;
}

static int sched_decide(nl_decider *base, int forced, bool in_burst, size_t pending,
                        bool can_submit)
{
    nl_sched_decider *d = (nl_sched_decider *)base;
    int kind = read_step(d);
    if (kind < 0)
        return -1;
    if (kind == STEP_END) {
        nl_error_set(base->err, d->line,
                     "infeasible schedule: 'end' while the run goes on (%zu pending, %s); "
                     "expected a step", pending, can_submit ? "submits possible" : "no submit possible");
        return -1;
    }
    if (kind == NL_STEP_SUBMIT) {
        if (forced == 1) {
            nl_error_set(base->err, d->line, "infeasible schedule: 'submit' %s; expected 'complete'",
                         in_burst ? "inside a running BATCHED burst"
                                  : "but no submit is possible (window full, nothing left to "
                                    "submit, or submissions stopped by TIMEOUT)");
            return -1;
        }
        return 0;
    }
    if (forced == 0) {
        nl_error_set(base->err, d->line,
                     "infeasible schedule: '%s' with nothing pending; expected 'submit'",
                     step_name(kind));
        return -1;
    }
    return 1;
}

static int sched_completion(nl_decider *base, enum nl_step_kind kind, bool needs_draw,
                            uint64_t *draw)
{
    nl_sched_decider *d = (nl_sched_decider *)base;
    if (kind != NL_STEP_COMPLETE) {
        if (d->kind != kind) {
            nl_error_set(base->err, d->line,
                         "infeasible schedule: the %s fault fires at this completion "
                         "(first one with step_count >= n/2); expected '%s', found '%s'",
                         kind == NL_STEP_TIMEOUT ? "TIMEOUT" : "RESET", step_name(kind),
                         step_name(d->kind));
            return -1;
        }
        return 0;
    }
    if (d->kind != NL_STEP_COMPLETE) {
        nl_error_set(base->err, d->line,
                     "infeasible schedule: '%s' where no fault fires; expected 'complete'",
                     step_name(d->kind));
        return -1;
    }
    if (needs_draw && !d->has_draw) {
        nl_error_set(base->err, d->line, "a %s completion needs 'complete draw=<u64>'",
                     nl_policies[d->policy].name);
        return -1;
    }
    if (!needs_draw && d->has_draw) {
        nl_error_set(base->err, d->line, "a %s completion takes no draw; expected 'complete'",
                     nl_policies[d->policy].name);
        return -1;
    }
    if (needs_draw)
        *draw = d->draw;
    return 0;
}

static int sched_finish(nl_decider *base)
{
    nl_sched_decider *d = (nl_sched_decider *)base;
    int kind = read_step(d);
    if (kind < 0)
        return -1;
    if (kind != STEP_END) {
        nl_error_set(base->err, d->line,
                     "infeasible schedule: the run has ended but the schedule goes on with "
                     "'%s'; expected 'end'", step_name(kind));
        return -1;
    }
    const char *s;
    size_t len;
    if (next_line(d, &s, &len)) {
        nl_error_set(base->err, d->line, "unexpected text after the 'end' line");
        return -1;
    }
    return 0;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The value of the next header line `key=value`, unescaped into `into` (see put_kv). */
static int header_value(nl_sched_decider *d, const char *key, nl_buf *into, nl_str *out,
                        nl_error *err)
{
    const char *s;
    size_t len, klen = strlen(key);
    if (!next_line(d, &s, &len) || len < klen + 1 || memcmp(s, key, klen) != 0 || s[klen] != '=') {
        nl_error_set(err, d->line, "expected the header line '%s=...'", key);
        return -1;
    }
    into->len = 0;
    nl_buf_reserve(into, 1);
    for (size_t i = klen + 1; i < len; i++) {
        if (s[i] != '\\') {
            nl_buf_putc(into, s[i]);
            continue;
        }
        if (i + 1 < len && s[i + 1] == '\\') {
            nl_buf_putc(into, '\\');
            i++;
            continue;
        }
        int hi = i + 3 < len && s[i + 1] == 'x' ? hex_digit(s[i + 2]) : -1;
        int lo = hi >= 0 ? hex_digit(s[i + 3]) : -1;
        if (lo < 0) {
            nl_error_set(err, d->line, "%s: invalid escape; expected '\\\\' or '\\xHH'", key);
            return -1;
        }
        nl_buf_putc(into, (char)(hi << 4 | lo));
        i += 3;
    }
    into->data[into->len] = '\0';
    out->p = into->data;
    out->len = into->len;
    return 0;
}

void nl_sched_close(nl_sched_decider *d)
{
    for (size_t i = 0; i < sizeof d->values / sizeof d->values[0]; i++)
        nl_buf_free(&d->values[i]);
}

int nl_sched_open(nl_sched_decider *d, const char *text, size_t len, nl_params *p,
                  nl_str *seed_id, nl_error *err)
{
    memset(d, 0, sizeof *d);
    memset(p, 0, sizeof *p);
    d->text = text;
    d->len = len;
    d->base = (nl_decider){.decide = sched_decide,
                           .completion = sched_completion,
                           .finish = sched_finish,
                           .err = err};
    const char *s;
    size_t n;
    if (!next_line(d, &s, &n) || !word_is(s, n, sched_magic)) {
        nl_error_set(err, 1, "not a qoslab schedule file: expected '%s' on line 1", sched_magic);
        return -1;
    }
    nl_str v;
    uint64_t u;
    bool inf;
    nl_buf *tmp = &d->values[3];
    if (header_value(d, "seed_id", &d->values[0], seed_id, err) != 0)
        return -1;
    if (header_value(d, "schedule_seed", tmp, &v, err) != 0)
        return -1;
    if (nl_parse_u64(v.p, v.len, &p->schedule_seed) != 0) {
        nl_error_set(err, d->line, "schedule_seed: expected a decimal u64, found '%.*s'",
                     (int)(v.len > 40 ? 40 : v.len), v.p);
        return -1;
    }
    if (header_value(d, "policy", tmp, &v, err) != 0)
        return -1;
    if (nl_parse_policy(v.p, v.len, &p->policy) != 0) {
        nl_error_set(err, d->line,
                     "policy: expected FIFO, RANDOM, ADVERSARIAL or BATCHED, found '%.*s'",
                     (int)(v.len > 40 ? 40 : v.len), v.p);
        return -1;
    }
    if (header_value(d, "bound_k", tmp, &v, err) != 0)
        return -1;
    if (nl_parse_bound(v.p, v.len, UINT32_MAX, &inf, &u) != 0) {
        nl_error_set(err, d->line, "bound_k: expected a u32 or 'inf', found '%.*s'",
                     (int)(v.len > 40 ? 40 : v.len), v.p);
        return -1;
    }
    p->bound_inf = inf;
    p->bound_k = (uint32_t)u;
    if (header_value(d, "fault_mode", tmp, &v, err) != 0)
        return -1;
    if (nl_parse_fault(v.p, v.len, &p->fault) != 0) {
        nl_error_set(err, d->line, "fault_mode: expected NONE, TIMEOUT or RESET, found '%.*s'",
                     (int)(v.len > 40 ? 40 : v.len), v.p);
        return -1;
    }
    if (header_value(d, "submit_window", tmp, &v, err) != 0)
        return -1;
    if (nl_parse_bound(v.p, v.len, UINT64_MAX, &p->window_inf, &p->submit_window) != 0) {
        nl_error_set(err, d->line, "submit_window: expected a u64 or 'inf', found '%.*s'",
                     (int)(v.len > 40 ? 40 : v.len), v.p);
        return -1;
    }
    if (header_value(d, "scheduler_version", &d->values[1], &p->scheduler_version, err) != 0 ||
        header_value(d, "git_commit", &d->values[2], &p->git_commit, err) != 0)
        return -1;
    if (!next_line(d, &s, &n) || !word_is(s, n, "steps")) {
        nl_error_set(err, d->line, "expected the line 'steps'");
        return -1;
    }
    d->policy = p->policy;
    return 0;
}
