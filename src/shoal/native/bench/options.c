/* The command line of shoal-bench: parsed completely before any benchmark
 * runs, so a mistake costs nothing and is reported on one line. */
#include "bench.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_long(const char *s, long *out)
{
    char *end;
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > (unsigned long long)SIZE_MAX)
        return -1;
    *out = (size_t)v;
    return 0;
}

/* "test:size,test:size,..." in run order. */
static int parse_points(const char *list, sb_options *o, char *err, size_t errlen)
{
    char *copy = strdup(list);
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    o->points = calloc(cap, sizeof *o->points);
    if (!copy || !o->points) {
        free(copy);
        snprintf(err, errlen, "out of memory reading --points");
        return -1;
    }
    o->npoints = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(item, ':');
        if (!colon) {
            snprintf(err, errlen, "--points entry '%s' is not test:size (e.g. imb.PingPong:8)", item);
            free(copy);
            return -1;
        }
        *colon = '\0';
        const sb_test *t = sb_find_test(item);
        if (!t) {
            snprintf(err, errlen, "unknown test '%s' in --points; 'shoal-bench --list' shows the tests", item);
            free(copy);
            return -1;
        }
        size_t size;
        if (parse_size(colon + 1, &size)) {
            snprintf(err, errlen, "size '%s' of %s in --points is not a whole number of bytes", colon + 1, item);
            free(copy);
            return -1;
        }
        o->points[o->npoints].test = t;
        o->points[o->npoints].size = size;
        o->npoints++;
    }
    free(copy);
    if (o->npoints == 0) {
        snprintf(err, errlen, "--points is empty; give test:size entries, e.g. imb.PingPong:8");
        return -1;
    }
    return 0;
}

int sb_parse_options(int argc, char **argv, sb_options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof *o);
    o->ci = 0.02;
    o->budget = 1.0;
    o->min_reps = 10;
    o->max_reps = 100000;
    o->rep_time = 2e-4; /* short repetitions: most miss the rare interrupt, so the median settles fast */
    o->warmup = 2;
    o->settle = 0.05;
    const char *points = NULL;

    for (int i = 1; i < argc; i++) {
        char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s'; options start with -- (see --help)", arg);
            return -1;
        }
        char name[32];
        const char *value = NULL;
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (nlen >= sizeof name) {
            snprintf(err, errlen, "unknown option '%.40s' (see --help)", arg);
            return -1;
        }
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        if (!strcmp(name, "--check")) {
            if (eq) {
                snprintf(err, errlen, "--check takes no value");
                return -1;
            }
            o->check = 1;
            continue;
        }
        static const char *const valued[] = {"--points", "--ci", "--budget", "--min-reps", "--max-reps",
                                             "--rep-time", "--warmup", "--settle", "--flush", "--inner"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++)
            known |= !strcmp(name, valued[k]);
        if (!known) {
            snprintf(err, errlen, "unknown option '%s' (see --help)", name);
            return -1;
        }
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        else {
            snprintf(err, errlen, "%s needs a value", name);
            return -1;
        }

        int bad = 0;
        const char *want = "";
        if (!strcmp(name, "--points")) {
            points = value;
        } else if (!strcmp(name, "--ci")) {
            bad = parse_double(value, &o->ci) || o->ci < 0;
            want = "a number >= 0 (relative half-width, e.g. 0.02)";
        } else if (!strcmp(name, "--budget")) {
            bad = parse_double(value, &o->budget) || o->budget <= 0;
            want = "a number of seconds > 0";
        } else if (!strcmp(name, "--rep-time")) {
            bad = parse_double(value, &o->rep_time) || o->rep_time <= 0;
            want = "a number of seconds > 0";
        } else if (!strcmp(name, "--min-reps")) {
            bad = parse_long(value, &o->min_reps) || o->min_reps < 1;
            want = "a whole number >= 1";
        } else if (!strcmp(name, "--max-reps")) {
            bad = parse_long(value, &o->max_reps) || o->max_reps < 1;
            want = "a whole number >= 1";
        } else if (!strcmp(name, "--warmup")) {
            bad = parse_long(value, &o->warmup) || o->warmup < 0;
            want = "a whole number >= 0";
        } else if (!strcmp(name, "--settle")) {
            bad = parse_double(value, &o->settle) || o->settle < 0;
            want = "a number of seconds >= 0";
        } else if (!strcmp(name, "--inner")) {
            bad = parse_long(value, &o->inner) || o->inner < 1;
            want = "a whole number >= 1";
        } else if (!strcmp(name, "--flush")) {
            bad = parse_size(value, &o->flush);
            want = "a whole number of bytes";
        }
        if (bad) {
            snprintf(err, errlen, "%s '%s' is not valid: give %s", name, value, want);
            return -1;
        }
    }
    if (!points) {
        snprintf(err, errlen, "nothing to run: give --points test:size,... (or --list to see the tests)");
        return -1;
    }
    if (o->min_reps > o->max_reps) {
        snprintf(err, errlen, "--min-reps %ld is above --max-reps %ld; lower one of them", o->min_reps, o->max_reps);
        return -1;
    }
    return parse_points(points, o, err, errlen);
}

void sb_free_options(sb_options *o)
{
    free(o->points);
    o->points = NULL;
    o->npoints = 0;
}
