/* shoal-work: one MPI program holding shoal's workloads.
 *
 * Every workload runs the same problem at every rank count, times its
 * phases (compute, communication, rank-0-only serial part), and under
 * --check compares its parallel result with a serial reference computed on
 * rank 0 after the timed part. See docs/work.md. */
#ifndef SHOAL_WORK_H
#define SHOAL_WORK_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* WK_PROBE_ONLY: the serial kernels alone, for shoal-guest-probe (native/guestprobe), a static
 * program without MPI that measures a virtual board's core inside its guest on the same kernels
 * as the host's (docs/pallex.md, "The board's speed"). Each workload file leaves its MPI part out
 * under it; MPI_Comm stays a name so the descriptor keeps one shape. */
#ifdef WK_PROBE_ONLY
typedef struct wk_no_mpi *MPI_Comm;
#else
#include <mpi.h>
#endif

typedef struct {
    const char *size;       /* the workload's size knob, as given */
    int check;              /* compare with the serial reference on rank 0 */
    int corrupt;            /* damage the parallel result before the check (tests the check) */
    const char *output_dir; /* rank 0 writes the result's files here (NULL: none) */
    const char *aes;        /* edge: "openssl", "software" or "auto" */
} wk_opts;

typedef struct {
    /* This rank's phase times, seconds. */
    double compute_s, comm_s, serial_s;
    /* Rank 0: end of the timed part (shoal clock), set by wk_timed_end(). */
    double t_end;
    /* Rank 0: the timed part's length when the workload measures it the way its
     * reference does (NPB IS: the longest rank's own clock); 0: from the start
     * barrier to t_end. */
    double elapsed_s;
    /* Rank 0: units of work done (pixels, alignments, frames, images, ops, keys). */
    double work;
    /* Rank 0: "pass", "fail" or "off", and why it failed. */
    const char *check;
    char check_detail[256];
    /* Rank 0: FNV-1a 64 of the result, so runs can be compared. */
    uint64_t digest;
    /* Rank 0: workload-specific fields, a JSON object body ("\"k\":v,..."), may be empty. */
    char extra[1024];
} wk_result;

typedef struct {
    const char *name;
    const char *unit;         /* what "work" counts, singular */
    const char *default_size;
    const char *small_size;   /* runs in well under a second at any rank count (tests, quick looks) */
    const char *description;
    /* Check the size text; 0 if valid, else fill err. Sets *memory_B to the
     * most one rank holds (for "does it fit the device"). */
    int (*parse)(const char *size, double *memory_B, char *err, size_t errlen);
    void (*run)(const wk_opts *opts, wk_result *res, MPI_Comm comm);
    /* One piece of the workload's serial kernel at its reference size, no MPI (--probe: the
     * host core's speed on it, docs/cluster.md "Host speed"); part numbers give different
     * but equally costly pieces; sets *units to the units of work it did. NULL: none. */
    void (*probe)(long part, double *units);
} wk_workload;

/* A workload's descriptor, in the file that implements it: defines wk_NAME, which main.c's
 * catalog (one line per workload) lists. */
#define WK_WORKLOAD(name_, unit_, size_, small_, parse_, run_, description_)                     \
    WK_WORKLOAD_PROBED(name_, unit_, size_, small_, parse_, run_, NULL, description_)
/* The same, for a workload whose kernel defines the reference core (--probe). */
#ifdef WK_PROBE_ONLY
#define WK_WORKLOAD_PROBED(name_, unit_, size_, small_, parse_, run_, probe_, description_)      \
    const wk_workload wk_##name_ = {.name = #name_, .unit = unit_, .probe = probe_}
#else
#define WK_WORKLOAD_PROBED(name_, unit_, size_, small_, parse_, run_, probe_, description_)      \
    const wk_workload wk_##name_ = {.name = #name_, .unit = unit_, .default_size = size_,       \
                                    .small_size = small_, .description = description_,           \
                                    .parse = parse_, .run = run_, .probe = probe_}
#endif

/* Timing helpers: the shoal clock (shoal_clock.h). */
double wk_now(void);
void wk_timed_end(wk_result *res);

/* Result bookkeeping. */
void wk_fail(wk_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void wk_extra(wk_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t wk_fnv1a(uint64_t h, const void *data, size_t n);
/* splitmix64's step: a counter-based generator, wk_mix(seed + i) for the i-th number. */
uint64_t wk_mix(uint64_t z);
#define WK_FNV_INIT 1469598103934665603ULL

/* Block partition of n items over p ranks: [*lo, *hi) for rank r. */
void wk_block(long n, int p, int r, long *lo, long *hi);

/* Memory that must not fail (a failed allocation aborts the job with a message). */
void *wk_alloc(size_t n);
void *wk_zalloc(size_t n);

/* Rank 0 writes a file into opts->output_dir (no-op without one). */
void wk_write_file(const wk_opts *opts, const char *name, const void *data, size_t n);
/* Open a text file in the output directory for writing (NULL without one). */
FILE *wk_open_text(const wk_opts *opts, const char *name);

/* Rank 0 writes a result (head, then data) to the cluster's file server where SHOAL_STORE names
 * one, each block once the server's storage committed it: the bytes stored (checked by the
 * server's CRC-32), 0 without a server, -1 (and res failed) when storing failed. */
long wk_store(wk_result *res, const char *name, const void *head, size_t head_n, const void *data,
              size_t n);

/* A JSON string literal of s on stdout. */
void wk_json_string(const char *s);

/* --probe LIST [--probe-s S] [--rounds R] over the kernels of `catalog` (those with a probe):
 * parses those options from argv[1..] and prints the samples as one JSON line; returns the
 * exit status (2 for bad input). */
int wk_probe_cli(int argc, char **argv, const wk_workload *const *catalog, size_t n);

/* Parse "123" or "123K/M/G" into a count; 0 on success. */
int wk_parse_count(const char *text, long *out);

#endif
