/* edge: each device captures its own images, encrypts them (AES-256-CTR)
 * and classifies them (k-nearest neighbours), as seed 004's camera nodes do
 * (capture, gpg AES-256, scikit-learn KNN).
 *
 * Image i (RGB, WxH) goes to rank i mod P. Capture is synthetic: a class
 * pattern (i's class) drawn with noise. Its key is FIPS-197's, its counter
 * block the image number; KNN (k = 5, squared Euclidean distance over the
 * 8x8 mean luminance, ties to the lower training index, votes to the lower
 * label) against a fixed training set. Rank 0 gathers one label and one
 * ciphertext digest per image. Images/s; bytes per image in the output for
 * joules per byte. */
#include "work.h"
#include "aes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FEATURES 64
#define CLASSES 10
#define TRAIN 2000
#define K 5

static int edge_dims(const char *size, long *images, int *w, int *h)
{
    char tail;
    if (sscanf(size, "%ld@%dx%d%c", images, w, h, &tail) != 3)
        return -1;
    return (*images < 1 || *images > 1000000 || *w < 8 || *h < 8 || *w > 16384 || *h > 16384) ? -1 : 0;
}

static int edge_parse(const char *size, double *mem, char *err, size_t n)
{
    long images;
    int w, h;
    if (edge_dims(size, &images, &w, &h)) {
        snprintf(err, n, "edge size '%s': give IMAGES@WIDTHxHEIGHT, e.g. 16@1024x816 (2.5 MB RGB images)",
                 size);
        return -1;
    }
    *mem = 3.0 * 3.0 * w * h; /* plain, cipher and (under --check) the decrypted copy */
    return 0;
}

/* The class pattern: 8x8 luminance cells, 0..255. */
static int pattern(int cls, int cell) { return (int)(wk_mix((uint64_t)cls * 977 + (uint64_t)cell) % 256); }

static int image_class(long i) { return (int)(wk_mix(0xC1A55ULL ^ (uint64_t)i) % CLASSES); }

/* Capture: the class pattern upscaled to WxH, per-pixel noise, RGB. */
static void capture(long i, int w, int h, uint8_t *img)
{
    int cls = image_class(i);
    uint64_t base = wk_mix(0x1A4E ^ (uint64_t)i);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint64_t r = wk_mix(base + (uint64_t)y * (uint64_t)w + (uint64_t)x);
            int lum = pattern(cls, (y * 8 / h) * 8 + x * 8 / w) + (int)(r % 121) - 60;
            lum = lum < 0 ? 0 : lum > 255 ? 255 : lum;
            uint8_t *px = img + 3 * ((size_t)y * w + x);
            px[0] = (uint8_t)lum;
            px[1] = (uint8_t)(lum ^ ((r >> 8) & 7));
            px[2] = (uint8_t)(lum ^ ((r >> 16) & 7));
        }
}

/* Features: mean luminance (the R channel) of each of 8x8 cells. */
static void features(const uint8_t *img, int w, int h, int f[FEATURES])
{
    long sum[FEATURES] = {0}, count[FEATURES] = {0};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int cell = (y * 8 / h) * 8 + x * 8 / w;
            sum[cell] += img[3 * ((size_t)y * w + x)];
            count[cell]++;
        }
    for (int c = 0; c < FEATURES; c++)
        f[c] = (int)(sum[c] / count[c]);
}

/* The training set: TRAIN samples, each its class pattern with heavier noise. */
static void training_set(int (*x)[FEATURES], int *label)
{
    for (int t = 0; t < TRAIN; t++) {
        label[t] = t % CLASSES;
        for (int c = 0; c < FEATURES; c++) {
            int v = pattern(label[t], c) + (int)(wk_mix(0x7EA1ULL * (uint64_t)(t + 1) + (uint64_t)c) % 81) - 40;
            x[t][c] = v < 0 ? 0 : v > 255 ? 255 : v;
        }
    }
}

static int knn(const int (*x)[FEATURES], const int *label, const int f[FEATURES])
{
    long best_d[K];
    int best_i[K];
    for (int k = 0; k < K; k++)
        best_d[k] = -1, best_i[k] = -1;
    for (int t = 0; t < TRAIN; t++) {
        long d = 0;
        for (int c = 0; c < FEATURES; c++) {
            long e = x[t][c] - f[c];
            d += e * e;
        }
        /* Insert keeping (distance, index) ascending; equal distances keep the lower index first. */
        int at = K;
        while (at > 0 && (best_i[at - 1] < 0 || d < best_d[at - 1]))
            at--;
        if (at >= K)
            continue;
        for (int k = K - 1; k > at; k--)
            best_d[k] = best_d[k - 1], best_i[k] = best_i[k - 1];
        best_d[at] = d, best_i[at] = t;
    }
    int votes[CLASSES] = {0}, winner = 0;
    for (int k = 0; k < K; k++)
        votes[label[best_i[k]]]++;
    for (int c = 1; c < CLASSES; c++)
        if (votes[c] > votes[winner])
            winner = c;
    return winner;
}

static const uint8_t KEY[32] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

static void image_iv(long i, uint8_t iv[16])
{
    memset(iv, 0, 16);
    for (int b = 0; b < 8; b++)
        iv[b] = (uint8_t)((uint64_t)i >> (56 - 8 * b));
}

static int hex_is(const uint8_t *got, const char *hex)
{
    for (int i = 0; i < 16; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        if (got[i] != v)
            return 0;
    }
    return 1;
}

static void unhex(const char *hex, uint8_t *out, int n)
{
    for (int i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

/* FIPS-197 C.3 (software block) and SP 800-38A F.5.5 (CTR, the implementation in use). */
static const char *nist_vectors(aes_ctr *aes)
{
    uint8_t pt[16], out[16], key[32], iv[16];
    unhex("00112233445566778899aabbccddeeff", pt, 16);
    aes256_block(KEY, pt, out);
    if (!hex_is(out, "8ea2b7ca516745bfeafc49904b496089"))
        return "FIPS-197 C.3 AES-256 block vector failed";
    unhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", key, 32);
    unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", iv, 16);
    unhex("6bc1bee22e409f96e93d7e117393172a", pt, 16);
    aes_ctr_crypt(aes, key, iv, pt, out, 16);
    if (!hex_is(out, "601ec313775789a5b7a7f504bbf3d228"))
        return "SP 800-38A F.5.5 CTR-AES256 vector failed";
    return NULL;
}

typedef struct { int (*x)[FEATURES]; int *label; aes_ctr *aes; int w, h; uint8_t *plain, *cipher; } edge_ctx;

/* One image: capture, encrypt, classify. Returns its label, sets its ciphertext digest. */
static int process(edge_ctx *c, long i, uint64_t *digest)
{
    size_t bytes = 3 * (size_t)c->w * (size_t)c->h;
    uint8_t iv[16];
    capture(i, c->w, c->h, c->plain);
    image_iv(i, iv);
    aes_ctr_crypt(c->aes, KEY, iv, c->plain, c->cipher, bytes);
    *digest = wk_fnv1a(WK_FNV_INIT, c->cipher, bytes);
    int f[FEATURES];
    features(c->plain, c->w, c->h, f);
    return knn((const int (*)[FEATURES])c->x, c->label, f);
}

static void edge_run(const wk_opts *opts, wk_result *res, MPI_Comm comm)
{
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    long images;
    edge_ctx c;
    edge_dims(opts->size, &images, &c.w, &c.h);
    const char *why = NULL;
    c.aes = aes_ctr_open(opts->aes, &why);
    int ok = c.aes != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        if (rank == 0)
            fprintf(stderr, "shoal-work: edge: %s\n", why ? why : "AES could not be set up on every rank");
        MPI_Abort(comm, 2);
    }
    size_t bytes = 3 * (size_t)c.w * (size_t)c.h;
    c.x = wk_alloc(sizeof(int[FEATURES]) * TRAIN);
    c.label = wk_alloc(sizeof(int) * TRAIN);
    training_set(c.x, c.label);
    c.plain = wk_alloc(bytes);
    c.cipher = wk_alloc(bytes);

    long mine = images / p + (rank < images % p);
    int *labels = wk_alloc(sizeof(int) * (size_t)(mine ? mine : 1));
    uint64_t *digests = wk_alloc(sizeof(uint64_t) * (size_t)(mine ? mine : 1));
    MPI_Barrier(comm);
    double t = wk_now();
    for (long i = rank, k = 0; i < images; i += p, k++)
        labels[k] = process(&c, i, &digests[k]);
    res->compute_s += wk_now() - t;

    t = wk_now();
    int *counts = NULL, *displs = NULL, *all_labels = NULL;
    uint64_t *all_digests = NULL;
    if (rank == 0) {
        counts = wk_alloc(sizeof(int) * (size_t)p);
        displs = wk_alloc(sizeof(int) * (size_t)p);
        for (int r = 0; r < p; r++) {
            counts[r] = (int)(images / p + (r < images % p));
            displs[r] = r ? displs[r - 1] + counts[r - 1] : 0;
        }
        all_labels = wk_alloc(sizeof(int) * (size_t)images);
        all_digests = wk_alloc(sizeof(uint64_t) * (size_t)images);
    }
    MPI_Gatherv(labels, (int)mine, MPI_INT, all_labels, counts, displs, MPI_INT, 0, comm);
    MPI_Gatherv(digests, (int)mine, MPI_UINT64_T, all_digests, counts, displs, MPI_UINT64_T, 0, comm);
    res->comm_s += wk_now() - t;

    if (rank == 0) {
        /* Rank 0 alone: results back into image order (rank r holds images r, r+P, ...). */
        t = wk_now();
        int *label_of = wk_alloc(sizeof(int) * (size_t)images);
        uint64_t *digest_of = wk_alloc(sizeof(uint64_t) * (size_t)images);
        for (int r = 0; r < p; r++)
            for (int k = 0; k < counts[r]; k++) {
                long i = r + (long)k * p;
                label_of[i] = all_labels[displs[r] + k];
                digest_of[i] = all_digests[displs[r] + k];
            }
        res->digest = wk_fnv1a(wk_fnv1a(WK_FNV_INIT, label_of, sizeof(int) * (size_t)images), digest_of,
                               sizeof(uint64_t) * (size_t)images);
        res->serial_s += wk_now() - t;
        wk_timed_end(res);
        res->work = (double)images;
        long right = 0;
        for (long i = 0; i < images; i++)
            right += label_of[i] == image_class(i);
        wk_extra(res, "\"images\":%ld,\"width\":%d,\"height\":%d,\"bytes_per_image_B\":%zu,"
                 "\"aes\":\"%s\",\"aes_library\":\"%s\",\"knn_k\":%d,\"training_samples\":%d,"
                 "\"labels_right\":%ld", images, c.w, c.h, bytes, aes_ctr_kind(c.aes), aes_ctr_library(c.aes),
                 K, TRAIN, right);
        if (opts->corrupt)
            label_of[images / 2] = (label_of[images / 2] + 1) % CLASSES;
        if (opts->output_dir) {
            FILE *fh = wk_open_text(opts, "knn_train.tsv");
            for (int tr = 0; fh && tr < TRAIN; tr++) {
                fprintf(fh, "%d", c.label[tr]);
                for (int f = 0; f < FEATURES; f++)
                    fprintf(fh, "\t%d", c.x[tr][f]);
                fputc('\n', fh);
            }
            if (fh) fclose(fh);
            fh = wk_open_text(opts, "labels.tsv");
            for (long i = 0; fh && i < images; i++) {
                int f[FEATURES];
                capture(i, c.w, c.h, c.plain);
                features(c.plain, c.w, c.h, f);
                fprintf(fh, "%ld\t%d\t%016llx", i, label_of[i], (unsigned long long)digest_of[i]);
                for (int k = 0; k < FEATURES; k++)
                    fprintf(fh, "\t%d", f[k]);
                fputc('\n', fh);
            }
            if (fh) fclose(fh);
            uint8_t iv[16];
            capture(0, c.w, c.h, c.plain);
            image_iv(0, iv);
            aes_ctr_crypt(c.aes, KEY, iv, c.plain, c.cipher, bytes);
            wk_write_file(opts, "image0.rgb", c.plain, bytes);
            wk_write_file(opts, "image0.aes", c.cipher, bytes);
        }
        if (opts->check) {
            const char *bad = nist_vectors(c.aes);
            if (bad)
                wk_fail(res, "%s (%s)", bad, aes_ctr_kind(c.aes));
            uint8_t *back = wk_alloc(bytes);
            for (long i = 0; i < images; i++) {
                uint64_t d;
                int label = process(&c, i, &d);
                uint8_t iv[16];
                image_iv(i, iv);
                aes_ctr_crypt(c.aes, KEY, iv, c.cipher, back, bytes);
                if (memcmp(back, c.plain, bytes) != 0)
                    wk_fail(res, "image %ld: decrypting the ciphertext does not give the image", i);
                if (label != label_of[i] || d != digest_of[i])
                    wk_fail(res, "image %ld: label %d / digest %016llx, the serial run gives %d / %016llx", i,
                            label_of[i], (unsigned long long)digest_of[i], label, (unsigned long long)d);
            }
            free(back);
        }
        free(label_of), free(digest_of), free(counts), free(displs), free(all_labels), free(all_digests);
    }
    free(labels), free(digests), free(c.x), free(c.label), free(c.plain), free(c.cipher);
    aes_ctr_close(c.aes);
}

WK_WORKLOAD(edge, "image", "16@1024x816", "6@64x48", edge_parse, edge_run,
            "edge processing (seed 004): capture, AES-256-CTR, KNN per image, images spread over "
            "ranks; images/s");
