/* Byte buffers, input errors and whole-file reads shared by the rest of nvmelite-c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvmelite.h"

static void die_oom(void)
{
    fputs("nvmelite-c: error: out of memory\n", stderr);
    exit(1);
}

void nl_buf_reserve(nl_buf *b, size_t extra)
{
    if (b->cap - b->len > extra)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= extra) {
        if (cap > SIZE_MAX / 2)
            die_oom();
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p)
        die_oom();
    b->data = p;
    b->cap = cap;
}

void nl_buf_put(nl_buf *b, const void *p, size_t n)
{
    if (n == 0)
        return;
    nl_buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void nl_buf_puts(nl_buf *b, const char *s) { nl_buf_put(b, s, strlen(s)); }

void nl_buf_putc(nl_buf *b, char c)
{
    nl_buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void nl_buf_u64(nl_buf *b, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    nl_buf_put(b, tmp + i, sizeof tmp - i);
}

void nl_buf_free(nl_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void nl_error_set(nl_error *err, size_t line, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->line = line;
}

char *nl_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    nl_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        nl_buf_put(&b, chunk, n);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        nl_buf_free(&b);
        errno = EIO;
        return NULL;
    }
    nl_buf_reserve(&b, 1);
    b.data[b.len] = '\0';
    *len = b.len;
    return b.data;
}
