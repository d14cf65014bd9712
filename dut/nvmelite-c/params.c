/* The run parameter tuple (spec §2): accepted spellings, canonical forms and the run id. */
#include <string.h>

#include "nvmelite.h"

const char *const nl_fault_names[NL_FAULT_COUNT] = {"NONE", "TIMEOUT", "RESET"};

static bool equal_nocase(const char *s, size_t len, const char *upper)
{
    if (strlen(upper) != len)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if (c != upper[i])
            return false;
    }
    return true;
}

int nl_parse_policy(const char *s, size_t len, enum nl_policy *out)
{
    for (int i = 0; i < NL_POLICY_COUNT; i++)
        if (equal_nocase(s, len, nl_policies[i].name)) {
            *out = (enum nl_policy)i;
            return 0;
        }
    return -1;
}

int nl_parse_fault(const char *s, size_t len, enum nl_fault *out)
{
    for (int i = 0; i < NL_FAULT_COUNT; i++)
        if (equal_nocase(s, len, nl_fault_names[i])) {
            *out = (enum nl_fault)i;
            return 0;
        }
    return -1;
}

int nl_parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned digit = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return -1;
        v = v * 10 + digit;
    }
    *out = v;
    return 0;
}

int nl_parse_bound(const char *s, size_t len, uint64_t max, bool *inf, uint64_t *out)
{
    if (equal_nocase(s, len, "INF")) {
        *inf = true;
        *out = 0;
        return 0;
    }
    if (len > 0 && s[0] == '+')
        s++, len--;
    uint64_t v;
    if (nl_parse_u64(s, len, &v) != 0 || v > max)
        return -1;
    *inf = false;
    *out = v;
    return 0;
}

void nl_put_bound(nl_buf *b, bool inf, uint64_t v)
{
    if (inf)
        nl_buf_put(b, "inf", 3);
    else
        nl_buf_u64(b, v);
}

void nl_put_run_id(nl_buf *b, const nl_workload *w, const nl_params *p)
{
    nl_buf_put(b, w->seed_id, w->seed_id_len);
    nl_buf_putc(b, '_');
    nl_buf_puts(b, nl_policies[p->policy].name);
    nl_buf_putc(b, '_');
    nl_put_bound(b, p->bound_inf, p->bound_k);
    nl_buf_putc(b, '_');
    nl_buf_u64(b, p->schedule_seed);
    nl_buf_putc(b, '_');
    nl_buf_puts(b, nl_fault_names[p->fault]);
}
