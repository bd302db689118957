/* msa: ClustalW-style multiple sequence alignment (seed 002 §V, MASON).
 *
 * Stage 1, parallel: all N(N-1)/2 pairwise global alignments (Gotoh, affine
 * gaps; score only), pairs sorted by cost and dealt to ranks in snake
 * order, scores gathered on rank 0 -> distance matrix. Stages 2 and 3 on
 * rank 0 alone (the serial part): the neighbour-joining guide tree, then
 * progressive profile alignment along it. Input: N DNA sequences evolved
 * from one random root along a random tree (fixed seed), as ROSE makes
 * seed 002's Sx-Ly sets. Alignments/s (stage 1 pairs per second of the
 * whole job). Scoring: match 2, mismatch -1, gap of length k: -5 - 2(k-1). */
#include "work.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MATCH 2
#define MISMATCH (-1)
#define GAP_OPEN (-5)   /* the first position of a gap */
#define GAP_EXTEND (-2) /* every further position */
#define NEG_INF (-1000000000)

typedef struct { int n; int *len; char **seq; } seqset;

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t r = wk_mix(*s);
    *s += 0x9e3779b97f4a7c15ULL;
    return r;
}

static int msa_dims(const char *size, int *n, int *l)
{
    char tail;
    if (sscanf(size, "S%d-L%d%c", n, l, &tail) != 2)
        return -1;
    return (*n < 3 || *n > 5000 || *l < 4 || *l > 20000) ? -1 : 0;
}

static int msa_parse(const char *size, double *mem, char *err, size_t len)
{
    int n, l;
    if (msa_dims(size, &n, &l)) {
        snprintf(err, len, "msa size '%s': give S<sequences>-L<length>, e.g. S200-L300 "
                 "(3..5000 sequences of 4..20000 bases)", size);
        return -1;
    }
    /* Rank 0: distance matrix (two copies) and the alignment rows. */
    *mem = 2.0 * 8.0 * n * n + 4.0 * n * l * 2.0;
    return 0;
}

static const char BASES[4] = {'A', 'C', 'G', 'T'};

/* N sequences: each a mutated copy of a random earlier one (sequence 0 of the root). */
static void generate(seqset *s, int n, int l)
{
    uint64_t rng = 0x5eed0002ULL * 2654435761ULL + (uint64_t)n * 131 + (uint64_t)l;
    s->n = n;
    s->len = wk_alloc(sizeof(int) * (size_t)n);
    s->seq = wk_alloc(sizeof(char *) * (size_t)n);
    int cap = 2 * l + 8;
    char *root = wk_alloc((size_t)cap);
    for (int i = 0; i < l; i++)
        root[i] = BASES[rng_next(&rng) & 3];
    for (int k = 0; k < n; k++) {
        int from = k == 0 ? -1 : (int)(rng_next(&rng) % (uint64_t)k);
        const char *parent = from < 0 ? root : s->seq[from];
        int parent_len = from < 0 ? l : s->len[from], out = 0;
        char *child = wk_alloc((size_t)cap);
        for (int i = 0; i < parent_len && out < cap - 2; i++) {
            uint64_t r = rng_next(&rng) % 1000;
            if (r < 10 && parent_len > l / 2)
                continue; /* deletion */
            child[out++] = r < 70 ? BASES[rng_next(&rng) & 3] : parent[i]; /* substitution */
            if (r >= 990 && out < cap - 2)
                child[out++] = BASES[rng_next(&rng) & 3]; /* insertion */
        }
        s->seq[k] = child;
        s->len[k] = out;
    }
    free(root);
}

/* Global alignment score (Gotoh), score only, O(lb) memory. */
static int gotoh(const char *a, int la, const char *b, int lb, int *m, int *x, int *y)
{
    /* Row 0. */
    m[0] = 0;
    x[0] = y[0] = NEG_INF;
    for (int j = 1; j <= lb; j++) {
        m[j] = x[j] = NEG_INF;
        y[j] = GAP_OPEN + (j - 1) * GAP_EXTEND;
    }
    for (int i = 1; i <= la; i++) {
        int diag_m = m[0], diag_x = x[0], diag_y = y[0];
        m[0] = NEG_INF;
        y[0] = NEG_INF;
        x[0] = GAP_OPEN + (i - 1) * GAP_EXTEND;
        char ai = a[i - 1];
        for (int j = 1; j <= lb; j++) {
            int best = diag_m > diag_x ? diag_m : diag_x;
            if (diag_y > best)
                best = diag_y;
            int up_m = m[j], up_x = x[j], up_y = y[j];
            int nm = best + (ai == b[j - 1] ? MATCH : MISMATCH);
            /* x: a[i] against a gap (from the row above). */
            int nx = up_m + GAP_OPEN;
            if (up_x + GAP_EXTEND > nx) nx = up_x + GAP_EXTEND;
            if (up_y + GAP_OPEN > nx) nx = up_y + GAP_OPEN;
            /* y: b[j] against a gap (from the left). */
            int ny = m[j - 1] + GAP_OPEN;
            if (y[j - 1] + GAP_EXTEND > ny) ny = y[j - 1] + GAP_EXTEND;
            if (x[j - 1] + GAP_OPEN > ny) ny = x[j - 1] + GAP_OPEN;
            diag_m = up_m, diag_x = up_x, diag_y = up_y;
            m[j] = nm, x[j] = nx, y[j] = ny;
        }
    }
    int best = m[lb] > x[lb] ? m[lb] : x[lb];
    return y[lb] > best ? y[lb] : best;
}

typedef struct { int i, j; double cost; } pair;

static int by_cost(const void *pa, const void *pb)
{
    const pair *a = pa, *b = pb;
    if (a->cost != b->cost)
        return a->cost > b->cost ? -1 : 1;
    if (a->i != b->i)
        return a->i - b->i;
    return a->j - b->j;
}

/* Pairs sorted by cost (la*lb), dealt in snake order: 0..P-1, P-1..0, ... */
static int owner(long k, int p)
{
    long round = k / p, pos = k % p;
    return (int)(round % 2 == 0 ? pos : p - 1 - pos);
}

/* ---- stage 2: neighbour joining ------------------------------------------ */
typedef struct { int nodes; int *left, *right; double *bl_left, *bl_right; int root; } tree;

static void nj(const double *dist, int n, tree *t)
{
    int total = 2 * n - 1;
    t->nodes = total;
    t->left = wk_alloc(sizeof(int) * (size_t)total);
    t->right = wk_alloc(sizeof(int) * (size_t)total);
    t->bl_left = wk_zalloc(sizeof(double) * (size_t)total);
    t->bl_right = wk_zalloc(sizeof(double) * (size_t)total);
    for (int i = 0; i < total; i++)
        t->left[i] = t->right[i] = -1;
    double *d = wk_alloc(sizeof(double) * (size_t)n * (size_t)n);
    memcpy(d, dist, sizeof(double) * (size_t)n * (size_t)n);
    int *node = wk_alloc(sizeof(int) * (size_t)n); /* tree node held in each matrix slot */
    double *r = wk_alloc(sizeof(double) * (size_t)n);
    int *active = wk_alloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        node[i] = i, active[i] = i;
    int m = n, next = n;
    while (m > 2) {
        for (int a = 0; a < m; a++) {
            double s = 0;
            for (int b = 0; b < m; b++)
                s += d[(size_t)active[a] * n + active[b]];
            r[a] = s;
        }
        double best = DBL_MAX;
        int bi = 0, bj = 1;
        for (int a = 0; a < m; a++)
            for (int b = a + 1; b < m; b++) {
                double q = (m - 2) * d[(size_t)active[a] * n + active[b]] - r[a] - r[b];
                if (q < best)
                    best = q, bi = a, bj = b;
            }
        int i = active[bi], j = active[bj];
        double dij = d[(size_t)i * n + j];
        double li = 0.5 * dij + (r[bi] - r[bj]) / (2.0 * (m - 2));
        t->left[next] = node[i], t->right[next] = node[j];
        t->bl_left[next] = li, t->bl_right[next] = dij - li;
        for (int a = 0; a < m; a++) {
            int k = active[a];
            if (k == i || k == j)
                continue;
            double du = 0.5 * (d[(size_t)i * n + k] + d[(size_t)j * n + k] - dij);
            d[(size_t)i * n + k] = d[(size_t)k * n + i] = du;
        }
        node[i] = next++;
        active[bj] = active[--m];
    }
    int i = active[0], j = active[1];
    double dij = d[(size_t)i * n + j];
    t->left[next] = node[i], t->right[next] = node[j];
    t->bl_left[next] = t->bl_right[next] = 0.5 * dij;
    t->root = next;
    free(d), free(node), free(r), free(active);
}

static void newick(FILE *fh, const tree *t, int v)
{
    if (t->left[v] < 0) {
        fprintf(fh, "s%d", v);
        return;
    }
    fputc('(', fh);
    newick(fh, t, t->left[v]);
    fprintf(fh, ":%.6f,", t->bl_left[v]);
    newick(fh, t, t->right[v]);
    fprintf(fh, ":%.6f)", t->bl_right[v]);
}

/* ---- stage 3: progressive profile alignment ------------------------------- */
typedef struct { int rows, cols; int *members; char **row; } profile;

static int sym(char c) { return c == 'A' ? 0 : c == 'C' ? 1 : c == 'G' ? 2 : c == 'T' ? 3 : 4; }
static int pair_score(int x, int y) /* sum-of-pairs with linear gaps in profiles */
{
    if (x == 4 || y == 4)
        return (x == 4 && y == 4) ? 0 : GAP_EXTEND;
    return x == y ? MATCH : MISMATCH;
}

static void counts(const profile *p, int col, int c[5])
{
    memset(c, 0, 5 * sizeof(int));
    for (int r = 0; r < p->rows; r++)
        c[sym(p->row[r][col])]++;
}

static profile merge(profile *a, profile *b)
{
    int la = a->cols, lb = b->cols;
    int (*wa)[5] = wk_alloc(sizeof(int[5]) * (size_t)(la + 1));
    int (*cb)[5] = wk_alloc(sizeof(int[5]) * (size_t)(lb + 1));
    int gap_b[5] = {0, 0, 0, 0, b->rows}; /* a gap column of b */
    for (int i = 0; i < la; i++) {
        int c[5];
        counts(a, i, c);
        for (int y = 0; y < 5; y++) {
            wa[i][y] = 0;
            for (int x = 0; x < 5; x++)
                wa[i][y] += c[x] * pair_score(x, y);
        }
    }
    for (int j = 0; j < lb; j++)
        counts(b, j, cb[j]);
    /* wgap[y]: a gap column of a against symbol y. */
    int wgap[5];
    for (int y = 0; y < 5; y++)
        wgap[y] = a->rows * pair_score(4, y);
    long *prev = wk_alloc(sizeof(long) * (size_t)(lb + 1)), *cur = wk_alloc(sizeof(long) * (size_t)(lb + 1));
    unsigned char *dir = wk_alloc((size_t)(la + 1) * (size_t)(lb + 1));
    prev[0] = 0;
    for (int j = 1; j <= lb; j++) {
        long s = 0;
        for (int y = 0; y < 5; y++)
            s += (long)wgap[y] * cb[j - 1][y];
        prev[j] = prev[j - 1] + s;
        dir[j] = 2;
    }
    for (int i = 1; i <= la; i++) {
        long col_gap = 0; /* column i of a against a gap column of b */
        for (int y = 0; y < 5; y++)
            col_gap += (long)wa[i - 1][y] * gap_b[y];
        cur[0] = prev[0] + col_gap;
        dir[(size_t)i * (lb + 1)] = 1;
        for (int j = 1; j <= lb; j++) {
            long s = 0, g = 0;
            for (int y = 0; y < 5; y++)
                s += (long)wa[i - 1][y] * cb[j - 1][y], g += (long)wgap[y] * cb[j - 1][y];
            long diag = prev[j - 1] + s, up = prev[j] + col_gap, left = cur[j - 1] + g;
            unsigned char d = 0;
            long best = diag;
            if (up > best) best = up, d = 1;
            if (left > best) best = left, d = 2;
            cur[j] = best;
            dir[(size_t)i * (lb + 1) + j] = d;
        }
        long *tmp = prev;
        prev = cur, cur = tmp;
    }
    /* Trace back into a list of moves, then write the merged rows. */
    char *moves = wk_alloc((size_t)(la + lb + 1));
    int nm = 0, i = la, j = lb;
    while (i > 0 || j > 0) {
        unsigned char d = (i == 0) ? 2 : (j == 0) ? 1 : dir[(size_t)i * (lb + 1) + j];
        moves[nm++] = (char)d;
        if (d == 0) i--, j--;
        else if (d == 1) i--;
        else j--;
    }
    profile out = {a->rows + b->rows, nm, wk_alloc(sizeof(int) * (size_t)(a->rows + b->rows)),
                   wk_alloc(sizeof(char *) * (size_t)(a->rows + b->rows))};
    for (int r = 0; r < out.rows; r++) {
        const profile *src = r < a->rows ? a : b;
        int sr = r < a->rows ? r : r - a->rows;
        int is_a = src == a, at = 0;
        char *row = wk_alloc((size_t)nm + 1);
        for (int k = 0; k < nm; k++) {
            char mv = moves[nm - 1 - k];
            int takes = mv == 0 || (is_a ? mv == 1 : mv == 2);
            row[k] = takes ? src->row[sr][at++] : '-';
        }
        row[nm] = 0;
        out.members[r] = src->members[sr];
        out.row[r] = row;
        free(src->row[sr]);
    }
    free(a->members), free(a->row), free(b->members), free(b->row);
    free(wa), free(cb), free(prev), free(cur), free(dir), free(moves);
    return out;
}

static profile align_tree(const tree *t, int v, const seqset *s)
{
    if (t->left[v] < 0) {
        profile p = {1, s->len[v], wk_alloc(sizeof(int)), wk_alloc(sizeof(char *))};
        p.members[0] = v;
        p.row[0] = wk_alloc((size_t)s->len[v] + 1);
        memcpy(p.row[0], s->seq[v], (size_t)s->len[v]);
        p.row[0][s->len[v]] = 0;
        return p;
    }
    profile a = align_tree(t, t->left[v], s), b = align_tree(t, t->right[v], s);
    return merge(&a, &b);
}

/* ---- the workload ---------------------------------------------------------- */
static double distance(int score, int la, int lb)
{
    int shorter = la < lb ? la : lb;
    return 1.0 - (double)score / (double)(MATCH * shorter);
}

#ifndef WK_PROBE_ONLY /* the MPI part: left out of shoal-guest-probe */
static void msa_run(const wk_opts *opts, wk_result *res, MPI_Comm comm)
{
    int rank, p, n, l;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    msa_dims(opts->size, &n, &l);
    seqset s;
    generate(&s, n, l); /* every rank makes the same set: the input is not timed */
    long npairs = (long)n * (n - 1) / 2, k = 0;
    pair *pairs = wk_alloc(sizeof(pair) * (size_t)npairs);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            pairs[k++] = (pair){i, j, (double)s.len[i] * s.len[j]};
    qsort(pairs, (size_t)npairs, sizeof(pair), by_cost);
    int *count = wk_zalloc(sizeof(int) * (size_t)p), *displ = wk_zalloc(sizeof(int) * (size_t)p);
    for (k = 0; k < npairs; k++)
        count[owner(k, p)]++;
    for (int r = 1; r < p; r++)
        displ[r] = displ[r - 1] + count[r - 1];
    int *mine = wk_alloc(sizeof(int) * (size_t)(count[rank] ? count[rank] : 1));
    int *m = wk_alloc(sizeof(int) * (size_t)(2 * l + 9) * 3), *x = m + 2 * l + 9, *y = x + 2 * l + 9;

    MPI_Barrier(comm);
    double t = wk_now();
    int got = 0;
    for (k = 0; k < npairs; k++)
        if (owner(k, p) == rank)
            mine[got++] = gotoh(s.seq[pairs[k].i], s.len[pairs[k].i], s.seq[pairs[k].j],
                                s.len[pairs[k].j], m, x, y);
    res->compute_s += wk_now() - t;
    t = wk_now();
    int *gathered = rank == 0 ? wk_alloc(sizeof(int) * (size_t)npairs) : NULL;
    MPI_Gatherv(mine, count[rank], MPI_INT, gathered, count, displ, MPI_INT, 0, comm);
    res->comm_s += wk_now() - t;

    if (rank == 0) {
        t = wk_now();
        /* Scores back into matrix order: pair k sits in its owner's slice, in order. */
        int *score = wk_zalloc(sizeof(int) * (size_t)n * (size_t)n);
        int *seen = wk_zalloc(sizeof(int) * (size_t)p);
        for (k = 0; k < npairs; k++) {
            int o = owner(k, p);
            int sc = gathered[displ[o] + seen[o]++];
            score[(size_t)pairs[k].i * n + pairs[k].j] = score[(size_t)pairs[k].j * n + pairs[k].i] = sc;
        }
        if (opts->corrupt)
            score[1] += 1, score[n] += 1;
        double *dist = wk_zalloc(sizeof(double) * (size_t)n * (size_t)n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j)
                    dist[(size_t)i * n + j] = distance(score[(size_t)i * n + j], s.len[i], s.len[j]);
        tree tr;
        nj(dist, n, &tr);
        profile aln = align_tree(&tr, tr.root, &s);
        res->serial_s += wk_now() - t;
        wk_timed_end(res);
        res->work = (double)npairs;
        res->digest = wk_fnv1a(WK_FNV_INIT, score, sizeof(int) * (size_t)n * (size_t)n);
        res->digest = wk_fnv1a(res->digest, tr.left, sizeof(int) * (size_t)tr.nodes);
        res->digest = wk_fnv1a(res->digest, tr.right, sizeof(int) * (size_t)tr.nodes);

        /* Sum-of-pairs score of the final alignment, and its sanity: rows are the inputs. */
        long sp = 0;
        for (int c = 0; c < aln.cols; c++) {
            int cc[5];
            counts(&aln, c, cc);
            for (int a = 0; a < 5; a++)
                for (int b = a; b < 5; b++)
                    sp += (long)pair_score(a, b) * (a == b ? (long)cc[a] * (cc[a] - 1) / 2 : (long)cc[a] * cc[b]);
        }
        wk_extra(res, "\"sequences\":%d,\"mean_length\":%d,\"pairs\":%ld,\"alignment_columns\":%d,"
                 "\"sp_score\":%ld", n, l, npairs, aln.cols, sp);
        if (opts->output_dir) {
            FILE *fh = wk_open_text(opts, "sequences.fasta");
            for (int i = 0; fh && i < n; i++)
                fprintf(fh, ">s%d\n%.*s\n", i, s.len[i], s.seq[i]);
            if (fh) fclose(fh);
            fh = wk_open_text(opts, "scores.tsv");
            for (int i = 0; fh && i < n; i++)
                for (int j = 0; j < n; j++)
                    fprintf(fh, "%d%c", i == j ? MATCH * s.len[i] : score[(size_t)i * n + j], j + 1 < n ? '\t' : '\n');
            if (fh) fclose(fh);
            fh = wk_open_text(opts, "tree.nwk");
            if (fh) {
                newick(fh, &tr, tr.root);
                fputs(";\n", fh);
                fclose(fh);
            }
            fh = wk_open_text(opts, "alignment.fasta");
            for (int r = 0; fh && r < aln.rows; r++)
                fprintf(fh, ">s%d\n%s\n", aln.members[r], aln.row[r]);
            if (fh) fclose(fh);
        }
        if (opts->check) {
            /* Serial reference: every pair on this rank, the same tree. */
            for (int i = 0; i < n && strcmp(res->check, "fail"); i++)
                for (int j = i + 1; j < n; j++) {
                    int ref = gotoh(s.seq[i], s.len[i], s.seq[j], s.len[j], m, x, y);
                    if (ref != score[(size_t)i * n + j]) {
                        wk_fail(res, "score of pair (%d, %d) is %d, the serial alignment gives %d", i, j,
                                score[(size_t)i * n + j], ref);
                        break;
                    }
                }
            double *ref_dist = wk_zalloc(sizeof(double) * (size_t)n * (size_t)n);
            for (int i = 0; i < n; i++)
                for (int j = i + 1; j < n; j++)
                    ref_dist[(size_t)i * n + j] = ref_dist[(size_t)j * n + i] =
                        distance(gotoh(s.seq[i], s.len[i], s.seq[j], s.len[j], m, x, y), s.len[i], s.len[j]);
            tree ref;
            nj(ref_dist, n, &ref);
            if (memcmp(ref.left, tr.left, sizeof(int) * (size_t)tr.nodes) ||
                memcmp(ref.right, tr.right, sizeof(int) * (size_t)tr.nodes) ||
                memcmp(ref.bl_left, tr.bl_left, sizeof(double) * (size_t)tr.nodes))
                wk_fail(res, "guide tree differs from the serial one");
            for (int r = 0; r < aln.rows; r++) {
                int v = aln.members[r], at = 0, same = 1;
                for (int c = 0; c < aln.cols && same; c++)
                    if (aln.row[r][c] != '-')
                        same = at < s.len[v] && aln.row[r][c] == s.seq[v][at++];
                if (!same || at != s.len[v])
                    wk_fail(res, "alignment row of sequence %d is not that sequence with gaps", v);
            }
            free(ref_dist);
            free(ref.left), free(ref.right), free(ref.bl_left), free(ref.bl_right);
        }
        for (int r = 0; r < aln.rows; r++)
            free(aln.row[r]);
        free(aln.row), free(aln.members);
        free(tr.left), free(tr.right), free(tr.bl_left), free(tr.bl_right);
        free(score), free(seen), free(dist), free(gathered);
    }
    free(mine), free(m), free(pairs), free(count), free(displ);
    for (int i = 0; i < n; i++)
        free(s.seq[i]);
    free(s.seq), free(s.len);
}

#endif /* WK_PROBE_ONLY */

/* --probe: the same 24 pairwise alignments of a set of the default length (200) every part. */
static void msa_probe(long part, double *units)
{
    enum { N = 24, L = 200, PAIRS = 24 };
    static seqset s;
    static int *m;
    if (!m) {
        generate(&s, N, L);
        m = wk_alloc(sizeof(int) * (size_t)(2 * L + 9) * 3);
    }
    int *x = m + 2 * L + 9, *y = x + 2 * L + 9;
    (void)part;
    for (long k = 0; k < PAIRS; k++) {
        int i = (int)(k % N), j = (int)((k / N + i + 1) % N);
        if (j == i)
            j = (i + 1) % N;
        gotoh(s.seq[i], s.len[i], s.seq[j], s.len[j], m, x, y);
    }
    *units = PAIRS;
}

WK_WORKLOAD_PROBED(msa, "alignment", "S100-L200", "S12-L40", msa_parse, msa_run, msa_probe,
            "multiple sequence alignment (seed 002, ClustalW/MASON): pairwise alignments in "
            "parallel, guide tree and progressive alignment on rank 0; alignments/s");
