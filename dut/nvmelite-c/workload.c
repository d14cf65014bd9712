/*
 * Workload files (spec §1): a strict JSON reader.
 *
 * Why a hand-written parser: the spec's acceptance rules (§1.2) are those of a strict typed
 * reader: duplicated field names are errors, `1.0` and `1e2` are floats and rejected where an
 * integer is expected, negatives and values above 2^64-1 (lba) or 2^32-1 (len, pattern) are
 * rejected, as are a UTF-8 BOM, trailing commas and invalid UTF-8. The general-purpose C JSON
 * libraries packaged by Debian cannot check that: cJSON keeps every number as a double (2^64-1
 * and 2^64 become the same value, and `1.0` looks like `1`) and silently keeps the last of two
 * duplicated members; jansson stores integers as signed 64-bit (no lba above 2^63-1) and also
 * lets the last duplicate win. The reader below checks those rules while it parses and
 * builds nothing but the workload.
 *
 * Values of members the model ignores are still validated as JSON. Inside a command object
 * they are also range-checked as numbers (a literal whose magnitude overflows a double is
 * rejected), as the reference's buffered tagged-enum reader does; elsewhere only their syntax
 * counts.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvmelite.h"

#define MAX_DEPTH 128

typedef struct {
    const char *s;
    size_t len, pos;
    int depth;
    nl_error *err;
} jreader;

static size_t line_at(const jreader *r, size_t pos)
{
    size_t line = 1;
    for (size_t i = 0; i < pos && i < r->len; i++)
        line += r->s[i] == '\n';
    return line;
}

#define FAIL(r, ...)                                                                         \
    do {                                                                                     \
        nl_error_set((r)->err, line_at((r), (r)->pos), __VA_ARGS__);                         \
        return -1;                                                                           \
    } while (0)

static int peek(const jreader *r) { return r->pos < r->len ? (unsigned char)r->s[r->pos] : -1; }

static void skip_ws(jreader *r)
{
    while (r->pos < r->len) {
        char c = r->s[r->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        r->pos++;
    }
}

static const char *describe(int c)
{
    static char tmp[32];
    if (c < 0)
        return "end of file";
    if (c >= 0x20 && c < 0x7f)
        snprintf(tmp, sizeof tmp, "'%c'", c);
    else
        snprintf(tmp, sizeof tmp, "byte 0x%02x", (unsigned)c);
    return tmp;
}

static int expect(jreader *r, char c)
{
    skip_ws(r);
    if (peek(r) != (unsigned char)c)
        FAIL(r, "invalid JSON: expected '%c', found %s", c, describe(peek(r)));
    r->pos++;
    return 0;
}

/* Whole-input UTF-8 check: the reference reads the file as text before parsing it. */
static int check_utf8(jreader *r)
{
    const unsigned char *s = (const unsigned char *)r->s;
    size_t i = 0;
    while (i < r->len) {
        unsigned c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            n = 1, cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2, cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3, cp = c & 0x07;
        } else {
            r->pos = i;
            FAIL(r, "invalid UTF-8 (byte 0x%02x)", c);
        }
        if (i + n >= r->len) {
            r->pos = i;
            FAIL(r, "invalid UTF-8 (truncated sequence)");
        }
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) {
                r->pos = i;
                FAIL(r, "invalid UTF-8 (bad continuation byte)");
            }
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff)) {
            r->pos = i;
            FAIL(r, "invalid UTF-8 (overlong or out-of-range sequence)");
        }
        i += n + 1;
    }
    return 0;
}

static int hex4(jreader *r, uint32_t *out)
{
    if (r->len - r->pos < 4)
        FAIL(r, "invalid JSON: truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->s[r->pos + (size_t)i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            FAIL(r, "invalid JSON: bad \\u escape");
        v = v << 4 | (uint32_t)d;
    }
    r->pos += 4;
    *out = v;
    return 0;
}

static void put_utf8(nl_buf *b, uint32_t cp)
{
    char tmp[4];
    size_t n;
    if (cp < 0x80)
        tmp[0] = (char)cp, n = 1;
    else if (cp < 0x800)
        tmp[0] = (char)(0xc0 | cp >> 6), tmp[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    else if (cp < 0x10000)
        tmp[0] = (char)(0xe0 | cp >> 12), tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3f)),
        tmp[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    else
        tmp[0] = (char)(0xf0 | cp >> 18), tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), tmp[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    nl_buf_put(b, tmp, n);
}

/*
 * A string at the cursor (which is at the opening quote). `out` receives the decoded bytes,
 * or is NULL when the value is only validated. A string that is decoded must not contain a
 * lone UTF-16 surrogate escape; one that is skipped may (the reference only checks the hex).
 */
static int parse_string(jreader *r, nl_buf *out)
{
    r->pos++; /* opening quote */
    if (out)
        out->len = 0;
    for (;;) {
        if (r->pos >= r->len)
            FAIL(r, "invalid JSON: unterminated string");
        unsigned char c = (unsigned char)r->s[r->pos];
        if (c == '"') {
            r->pos++;
            if (out)
                nl_buf_reserve(out, 1), out->data[out->len] = '\0';
            return 0;
        }
        if (c < 0x20)
            FAIL(r, "invalid JSON: control character in a string");
        if (c != '\\') {
            size_t start = r->pos;
            while (r->pos < r->len) {
                unsigned char d = (unsigned char)r->s[r->pos];
                if (d == '"' || d == '\\' || d < 0x20)
                    break;
                r->pos++;
            }
            if (out)
                nl_buf_put(out, r->s + start, r->pos - start);
            continue;
        }
        r->pos++;
        if (r->pos >= r->len)
            FAIL(r, "invalid JSON: unterminated string");
        char e = r->s[r->pos++];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple) {
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            if (out)
                nl_buf_putc(out, decoded[simple - "\"\\/bfnrt"]);
            continue;
        }
        if (e != 'u') {
            r->pos--;
            FAIL(r, "invalid JSON: invalid escape '\\%c'", e);
        }
        uint32_t cp;
        if (hex4(r, &cp) != 0)
            return -1;
        if (!out)
            continue;
        if (cp >= 0xdc00 && cp <= 0xdfff)
            FAIL(r, "invalid JSON: lone trailing surrogate in a \\u escape");
        if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t lo;
            if (r->len - r->pos < 2 || r->s[r->pos] != '\\' || r->s[r->pos + 1] != 'u')
                FAIL(r, "invalid JSON: lone leading surrogate in a \\u escape");
            r->pos += 2;
            if (hex4(r, &lo) != 0)
                return -1;
            if (lo < 0xdc00 || lo > 0xdfff)
                FAIL(r, "invalid JSON: lone leading surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        put_utf8(out, cp);
    }
}

enum num_kind { NUM_UNSIGNED, NUM_NEGATIVE, NUM_FLOAT, NUM_TOO_BIG };

/* A number at the cursor: JSON grammar, then its kind and (for NUM_UNSIGNED) its value. */
static int parse_number(jreader *r, bool check_range, enum num_kind *kind, uint64_t *value)
{
    size_t start = r->pos;
    bool negative = false, fractional = false;
    if (peek(r) == '-')
        negative = true, r->pos++;
    if (peek(r) == '0') {
        r->pos++;
        if (peek(r) >= '0' && peek(r) <= '9')
            FAIL(r, "invalid JSON: number with a leading zero");
    } else if (peek(r) >= '1' && peek(r) <= '9') {
        while (peek(r) >= '0' && peek(r) <= '9')
            r->pos++;
    } else {
        FAIL(r, "invalid JSON: expected a value, found %s", describe(peek(r)));
    }
    size_t int_end = r->pos;
    if (peek(r) == '.') {
        fractional = true, r->pos++;
        if (!(peek(r) >= '0' && peek(r) <= '9'))
            FAIL(r, "invalid JSON: expected a digit after '.'");
        while (peek(r) >= '0' && peek(r) <= '9')
            r->pos++;
    }
    if (peek(r) == 'e' || peek(r) == 'E') {
        fractional = true, r->pos++;
        if (peek(r) == '+' || peek(r) == '-')
            r->pos++;
        if (!(peek(r) >= '0' && peek(r) <= '9'))
            FAIL(r, "invalid JSON: expected a digit in the exponent");
        while (peek(r) >= '0' && peek(r) <= '9')
            r->pos++;
    }
    *value = 0;
    if (fractional)
        *kind = NUM_FLOAT;
    else if (negative)
        *kind = NUM_NEGATIVE;
    else if (nl_parse_u64(r->s + start, int_end - start, value) == 0)
        *kind = NUM_UNSIGNED;
    else
        *kind = NUM_TOO_BIG;
    if (check_range && *kind != NUM_UNSIGNED) {
        /* Non-u64 values are read as doubles; one that overflows to infinity is an error. */
        size_t n = r->pos - start;
        char stackbuf[64];
        char *lit = n < sizeof stackbuf ? stackbuf : malloc(n + 1);
        if (!lit)
            FAIL(r, "out of memory");
        memcpy(lit, r->s + start, n);
        lit[n] = '\0';
        errno = 0;
        double d = strtod(lit, NULL);
        if (lit != stackbuf)
            free(lit);
        if (isinf(d)) {
            r->pos = start;
            FAIL(r, "number out of range");
        }
    }
    return 0;
}

static int match_word(jreader *r, const char *word)
{
    size_t n = strlen(word);
    if (r->len - r->pos < n || memcmp(r->s + r->pos, word, n) != 0)
        FAIL(r, "invalid JSON: expected a value, found %s", describe(peek(r)));
    r->pos += n;
    return 0;
}

static int enter(jreader *r)
{
    if (++r->depth >= MAX_DEPTH)
        FAIL(r, "invalid JSON: nesting deeper than %d levels", MAX_DEPTH - 1);
    r->pos++;
    return 0;
}

/* Validates and skips one value. `content`: inside a command object (see the file comment). */
static int skip_value(jreader *r, bool content)
{
    skip_ws(r);
    int c = peek(r);
    if (c == '"')
        return parse_string(r, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        if (enter(r) != 0)
            return -1;
        skip_ws(r);
        if (peek(r) == close) {
            r->pos++, r->depth--;
            return 0;
        }
        for (;;) {
            if (close == '}') {
                skip_ws(r);
                if (peek(r) != '"')
                    FAIL(r, "invalid JSON: expected a member name, found %s", describe(peek(r)));
                if (parse_string(r, NULL) != 0 || expect(r, ':') != 0)
                    return -1;
            }
            if (skip_value(r, content) != 0)
                return -1;
            skip_ws(r);
            if (peek(r) == ',') {
                r->pos++;
                continue;
            }
            if (peek(r) == close) {
                r->pos++, r->depth--;
                return 0;
            }
            FAIL(r, "invalid JSON: expected ',' or '%c', found %s", close, describe(peek(r)));
        }
    }
    if (c == 't')
        return match_word(r, "true");
    if (c == 'f')
        return match_word(r, "false");
    if (c == 'n')
        return match_word(r, "null");
    enum num_kind kind;
    uint64_t v;
    return parse_number(r, content, &kind, &v);
}

/* After a member: ',' (then a member must follow: no trailing comma) or the closing brace. */
static int next_member(jreader *r, bool *done)
{
    skip_ws(r);
    if (peek(r) == ',') {
        r->pos++;
        skip_ws(r);
        if (peek(r) != '"')
            FAIL(r, "invalid JSON: expected a member name after ',', found %s",
                 describe(peek(r)));
        *done = false;
        return 0;
    }
    if (peek(r) == '}') {
        r->pos++;
        r->depth--;
        *done = true;
        return 0;
    }
    FAIL(r, "invalid JSON: expected ',' or '}', found %s", describe(peek(r)));
}

/* One member of a command object that the command's type may need. */
typedef struct {
    const char *name;
    int count;
    bool is_null, is_number;
    enum num_kind kind;
    uint64_t value;
    size_t pos;
} field;

static int read_field(jreader *r, field *f)
{
    f->count++;
    skip_ws(r);
    f->pos = r->pos;
    int c = peek(r);
    f->is_null = c == 'n';
    f->is_number = c == '-' || (c >= '0' && c <= '9');
    if (f->is_number)
        return parse_number(r, true, &f->kind, &f->value);
    return skip_value(r, true);
}

static int check_field(jreader *r, size_t index, const char *type, field *f, uint64_t max,
                       size_t obj_pos)
{
    const char *what = max == UINT32_MAX ? "an unsigned 32-bit integer" : "an unsigned 64-bit integer";
    if (f->count > 1) {
        r->pos = f->pos;
        FAIL(r, "commands[%zu] (%s): duplicate field '%s'", index, type, f->name);
    }
    if (f->count == 0 || f->is_null) {
        r->pos = f->count ? f->pos : obj_pos;
        FAIL(r, "commands[%zu] (%s): field '%s' is missing or null; expected %s", index, type,
             f->name, what);
    }
    r->pos = f->pos;
    if (!f->is_number)
        FAIL(r, "commands[%zu] (%s): field '%s': expected %s, got a non-number", index, type,
             f->name, what);
    if (f->kind == NUM_FLOAT)
        FAIL(r, "commands[%zu] (%s): field '%s': expected %s, got a float", index, type, f->name,
             what);
    if (f->kind == NUM_NEGATIVE)
        FAIL(r, "commands[%zu] (%s): field '%s': expected %s, got a negative number", index,
             type, f->name, what);
    if (f->kind == NUM_TOO_BIG || f->value > max)
        FAIL(r, "commands[%zu] (%s): field '%s': expected %s, got a value out of range", index,
             type, f->name, what);
    return 0;
}

static int parse_command(jreader *r, size_t index, nl_cmd *cmd, nl_buf *key, nl_buf *tmp)
{
    skip_ws(r);
    size_t obj_pos = r->pos;
    if (peek(r) != '{')
        FAIL(r, "commands[%zu]: expected a command object, found %s", index, describe(peek(r)));
    if (enter(r) != 0)
        return -1;
    field lba = {.name = "lba"}, len = {.name = "len"}, pattern = {.name = "pattern"};
    int type_count = 0;
    bool type_ok = false;
    size_t type_pos = 0;
    skip_ws(r);
    bool done = false;
    if (peek(r) == '}')
        r->pos++, r->depth--, done = true;
    while (!done) {
        skip_ws(r);
        if (peek(r) != '"')
            FAIL(r, "invalid JSON: expected a member name, found %s", describe(peek(r)));
        if (parse_string(r, key) != 0 || expect(r, ':') != 0)
            return -1;
        skip_ws(r);
        if (strcmp(key->data, "type") == 0 && key->len == 4) {
            if (++type_count > 1)
                FAIL(r, "commands[%zu]: duplicate field 'type'", index);
            type_pos = r->pos;
            if (peek(r) != '"') {
                if (peek(r) == 'n')
                    FAIL(r, "commands[%zu]: field 'type' is null; expected one of WRITE, "
                            "READ, FENCE, WRITE_VISIBLE", index);
                FAIL(r, "commands[%zu]: field 'type': expected a string", index);
            }
            if (parse_string(r, tmp) != 0)
                return -1;
            static const struct {
                const char *name;
                enum nl_cmd_type type;
            } types[] = {{"WRITE", NL_WRITE},
                         {"READ", NL_READ},
                         {"FENCE", NL_FENCE},
                         {"WRITE_VISIBLE", NL_WRITE_VISIBLE}};
            for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
                if (tmp->len == strlen(types[i].name) && strcmp(tmp->data, types[i].name) == 0)
                    cmd->type = types[i].type, type_ok = true;
            if (!type_ok) {
                r->pos = type_pos;
                FAIL(r, "commands[%zu]: unknown command type \"%.40s\"; expected one of WRITE, "
                        "READ, FENCE, WRITE_VISIBLE (case-sensitive)", index, tmp->data);
            }
        } else if (key->len == 3 && strcmp(key->data, "lba") == 0) {
            if (read_field(r, &lba) != 0)
                return -1;
        } else if (key->len == 3 && strcmp(key->data, "len") == 0) {
            if (read_field(r, &len) != 0)
                return -1;
        } else if (key->len == 7 && strcmp(key->data, "pattern") == 0) {
            if (read_field(r, &pattern) != 0)
                return -1;
        } else if (skip_value(r, true) != 0) {
            return -1;
        }
        if (next_member(r, &done) != 0)
            return -1;
    }
    size_t end = r->pos;
    if (type_count == 0) {
        r->pos = obj_pos;
        FAIL(r, "commands[%zu]: field 'type' is missing; expected one of WRITE, READ, FENCE, "
                "WRITE_VISIBLE", index);
    }
    const char *name = nl_cmd_type_name(cmd->type);
    cmd->lba = 0, cmd->len = 0, cmd->pattern = 0;
    if (cmd->type != NL_FENCE) {
        if (check_field(r, index, name, &lba, UINT64_MAX, obj_pos) != 0 ||
            check_field(r, index, name, &len, UINT32_MAX, obj_pos) != 0)
            return -1;
        cmd->lba = lba.value;
        cmd->len = (uint32_t)len.value;
    }
    if (cmd->type == NL_WRITE) {
        if (check_field(r, index, name, &pattern, UINT32_MAX, obj_pos) != 0)
            return -1;
        cmd->pattern = (uint32_t)pattern.value;
    }
    r->pos = end;
    return 0;
}

static int parse_commands(jreader *r, nl_workload *w, nl_buf *key, nl_buf *tmp)
{
    if (enter(r) != 0)
        return -1;
    size_t cap = 0;
    skip_ws(r);
    if (peek(r) == ']') {
        r->pos++, r->depth--;
        return 0;
    }
    for (;;) {
        if (w->n_cmds == cap) {
            cap = cap ? cap * 2 : 64;
            nl_cmd *p = realloc(w->cmds, cap * sizeof *p);
            if (!p)
                FAIL(r, "out of memory");
            w->cmds = p;
        }
        if (parse_command(r, w->n_cmds, &w->cmds[w->n_cmds], key, tmp) != 0)
            return -1;
        w->n_cmds++;
        skip_ws(r);
        if (peek(r) == ',') {
            r->pos++;
            skip_ws(r);
            if (peek(r) == ']')
                FAIL(r, "invalid JSON: trailing comma in 'commands'");
            continue;
        }
        if (peek(r) == ']') {
            r->pos++, r->depth--;
            return 0;
        }
        FAIL(r, "invalid JSON: expected ',' or ']' in 'commands', found %s", describe(peek(r)));
    }
}

static int parse_workload(jreader *r, nl_workload *w, nl_buf *key, nl_buf *tmp)
{
    if (check_utf8(r) != 0)
        return -1;
    skip_ws(r);
    if (peek(r) != '{') {
        if (r->len >= 3 && memcmp(r->s, "\xef\xbb\xbf", 3) == 0)
            FAIL(r, "invalid JSON: the file starts with a UTF-8 byte order mark");
        FAIL(r, "invalid JSON: expected an object, found %s", describe(peek(r)));
    }
    if (enter(r) != 0)
        return -1;
    int seen_seed = 0, seen_cmds = 0;
    skip_ws(r);
    bool done = false;
    if (peek(r) == '}')
        r->pos++, r->depth--, done = true;
    while (!done) {
        skip_ws(r);
        if (peek(r) != '"')
            FAIL(r, "invalid JSON: expected a member name, found %s", describe(peek(r)));
        if (parse_string(r, key) != 0 || expect(r, ':') != 0)
            return -1;
        skip_ws(r);
        if (key->len == 7 && strcmp(key->data, "seed_id") == 0) {
            if (seen_seed++)
                FAIL(r, "duplicate field 'seed_id'");
            if (peek(r) != '"')
                FAIL(r, "field 'seed_id': expected a string, found %s", describe(peek(r)));
            nl_buf id = {0};
            if (parse_string(r, &id) != 0) {
                nl_buf_free(&id);
                return -1;
            }
            nl_buf_reserve(&id, 1);
            id.data[id.len] = '\0';
            w->seed_id = id.data;
            w->seed_id_len = id.len;
        } else if (key->len == 8 && strcmp(key->data, "commands") == 0) {
            if (seen_cmds++)
                FAIL(r, "duplicate field 'commands'");
            if (peek(r) != '[')
                FAIL(r, "field 'commands': expected an array of commands, found %s",
                     describe(peek(r)));
            if (parse_commands(r, w, key, tmp) != 0)
                return -1;
        } else if (skip_value(r, false) != 0) {
            return -1;
        }
        if (next_member(r, &done) != 0)
            return -1;
    }
    skip_ws(r);
    if (r->pos != r->len)
        FAIL(r, "invalid JSON: trailing characters after the workload object");
    if (!seen_seed) {
        r->pos = 0;
        FAIL(r, "field 'seed_id' is missing");
    }
    if (!seen_cmds) {
        r->pos = 0;
        FAIL(r, "field 'commands' is missing");
    }
    return 0;
}

int nl_workload_parse(const char *text, size_t len, nl_workload *w, nl_error *err)
{
    memset(w, 0, sizeof *w);
    jreader r = {.s = text, .len = len, .err = err};
    nl_buf key = {0}, tmp = {0};
    int rc = parse_workload(&r, w, &key, &tmp);
    nl_buf_free(&key);
    nl_buf_free(&tmp);
    if (rc != 0)
        nl_workload_free(w);
    return rc;
}

int nl_workload_load(const char *path, nl_workload *w, nl_error *err)
{
    size_t len;
    char *text = nl_read_file(path, &len);
    if (!text) {
        memset(w, 0, sizeof *w);
        nl_error_set(err, 0, "cannot read the workload: %s", strerror(errno));
        return -1;
    }
    int rc = nl_workload_parse(text, len, w, err);
    free(text);
    return rc;
}

void nl_workload_free(nl_workload *w)
{
    free(w->seed_id);
    free(w->cmds);
    memset(w, 0, sizeof *w);
}

const char *nl_cmd_type_name(enum nl_cmd_type t)
{
    switch (t) {
    case NL_WRITE:
        return "WRITE";
    case NL_WRITE_VISIBLE:
        return "WRITE_VISIBLE";
    case NL_READ:
        return "READ";
    case NL_FENCE:
        return "FENCE";
    }
    return "?";
}
