/* The rhythm of a call site: a robust line through its recent values.
 *
 * A series holds the last SW_HISTORY values of one quantity of a call site
 * (the intervals between its arrivals, or the durations of its long waits).
 * The fit is Theil-Sen: the slope is the median of the pairwise slopes, the
 * intercept the median of what is left. Medians ignore the odd outlier (a
 * rank descheduled once, an arrival skipped); the slope follows a rhythm
 * that drifts, where a plain median lags half the history behind. The
 * margin is the second-largest residual, scaled: what the spread of the
 * site's own arrivals says the next one may be off by. */
#include "shoalwait.h"

#define MIN_FIT 4   /* values needed before a series predicts */

void sw_series_push(struct sw_series *s, int64_t x)
{
    s->v[s->head] = x;
    s->head = (s->head + 1) % SW_HISTORY;
    if (s->n < SW_HISTORY)
        s->n++;
}

static void sort(double *a, int n)
{
    for (int i = 1; i < n; i++) {
        double x = a[i];
        int j = i - 1;
        for (; j >= 0 && a[j] > x; j--)
            a[j + 1] = a[j];
        a[j + 1] = x;
    }
}

static double median(double *a, int n)
{
    sort(a, n);
    return n % 2 ? a[n / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
}

int sw_series_fit(const struct sw_series *s, struct sw_fit *f)
{
    int n = s->n;
    if (n < MIN_FIT)
        return 0;
    double v[SW_HISTORY], w[SW_HISTORY * (SW_HISTORY - 1) / 2];
    for (int i = 0; i < n; i++)   /* oldest first */
        v[i] = (double)s->v[(s->head - n + i + SW_HISTORY) % SW_HISTORY];
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            w[k++] = (v[j] - v[i]) / (j - i);
    double slope = median(w, k);
    for (int i = 0; i < n; i++)
        w[i] = v[i] - slope * i;
    double icept = median(w, n);
    for (int i = 0; i < n; i++) {
        double r = v[i] - icept - slope * i;
        w[i] = r < 0 ? -r : r;
    }
    sort(w, n);
    /* 1.5 x the second-largest of n residuals: ~2.3 standard deviations
     * of a normal spread with 8 values; the largest may be an outlier. */
    f->margin = (int64_t)(1.5 * w[n - 2]);
    f->next = (int64_t)(icept + slope * n);
    for (int i = 0; i < n; i++)
        w[i] = v[i];
    f->median = (int64_t)median(w, n);
    return 1;
}
