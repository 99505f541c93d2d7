/*
 * stats.h — order statistics on arrays of doubles: the comparison for
 * qsort, sorting, the median and quantiles of a sorted array. Pure
 * functions; nothing allocated, nothing returned that the caller owns.
 */
#ifndef LP_STATS_H
#define LP_STATS_H

#include <stddef.h>

/* qsort comparison of two doubles, ascending (NaN compares equal to all). */
int cmp_double(const void *a, const void *b);
/* Sort v[0..n) ascending in place. */
void sort_doubles(double *v, size_t n);
/* The median of sorted[0..n), n > 0: the middle value, or the mean of the two. */
double median_sorted(const double *sorted, size_t n);
/* Quantile (type 7, as R and numpy's default) of sorted[0..n); NAN if n == 0. */
double quantile_sorted(const double *sorted, size_t n, double q);

#endif
