/* Helpers every workload uses: clock, result fields, partitions, files. */
#include "work.h"
#include "shoal_clock.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void wk_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

double wk_now(void) { return shoal_now_s(); }

void wk_timed_end(wk_result *res) { res->t_end = shoal_now_s(); }

void wk_fail(wk_result *res, const char *fmt, ...)
{
    if (res->check && strcmp(res->check, "fail") == 0)
        return; /* keep the first reason */
    res->check = "fail";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->check_detail, sizeof res->check_detail, fmt, ap);
    va_end(ap);
}

void wk_extra(wk_result *res, const char *fmt, ...)
{
    size_t used = strlen(res->extra);
    if (used && used + 1 < sizeof res->extra)
        res->extra[used++] = ',', res->extra[used] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->extra + used, sizeof res->extra - used, fmt, ap);
    va_end(ap);
}

uint64_t wk_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

uint64_t wk_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void wk_block(long n, int p, int r, long *lo, long *hi)
{
    *lo = n * r / p;
    *hi = n * (r + 1) / p;
}

void *wk_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "shoal-work: out of memory allocating %zu bytes\n", n);
#ifdef WK_PROBE_ONLY
        exit(3);
#else
        MPI_Abort(MPI_COMM_WORLD, 3);
#endif
    }
    return p;
}

void *wk_zalloc(size_t n)
{
    void *p = wk_alloc(n);
    memset(p, 0, n ? n : 1);
    return p;
}

static FILE *open_out(const wk_opts *opts, const char *name, const char *mode)
{
    if (!opts->output_dir)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", opts->output_dir, name);
    FILE *fh = fopen(path, mode);
    if (!fh)
        fprintf(stderr, "shoal-work: cannot write %s: %s\n", path, strerror(errno));
    return fh;
}

void wk_write_file(const wk_opts *opts, const char *name, const void *data, size_t n)
{
    FILE *fh = open_out(opts, name, "wb");
    if (!fh)
        return;
    fwrite(data, 1, n, fh);
    fclose(fh);
}

FILE *wk_open_text(const wk_opts *opts, const char *name) { return open_out(opts, name, "w"); }

int wk_parse_count(const char *text, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || v <= 0)
        return -1;
    switch (*end) {
    case 'K': case 'k': v *= 1024L; end++; break;
    case 'M': case 'm': v *= 1024L * 1024L; end++; break;
    case 'G': case 'g': v *= 1024L * 1024L * 1024L; end++; break;
    default: break;
    }
    if (*end)
        return -1;
    *out = v;
    return 0;
}
