/* What every bench times with: a monotonic clock, and the machine's float32
 * GEMM speed as a yardstick for the figures that depend on it. */
#ifndef PADDLEC_BENCH_TIMING_H
#define PADDLEC_BENCH_TIMING_H

/* Seconds from a fixed origin (CLOCK_MONOTONIC). */
double bench_now_s(void);
/* oneDNN's sgemm on 1024 x 1024 matrices, in GFLOP/s: the best of `runs`
 * timed calls after one warm-up call. */
double bench_sgemm_peak(int runs);

#endif
