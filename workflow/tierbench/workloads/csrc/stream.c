/*
 * STREAM memory bandwidth: copy, scale, add and triad, as in McCalpin's
 * STREAM 5.10 (https://www.cs.virginia.edu/stream/), with the array size and
 * the number of repetitions given on the command line instead of at compile
 * time.
 *
 *   stream <elements per array> [times]
 *
 * Bytes are counted as STREAM counts them: copy and scale move 2 arrays, add
 * and triad 3, each of 8-byte doubles. Each kernel runs `times` times (10 by
 * default); the best time of all but the first run gives the reported rate in
 * MB/s (1e6 bytes per second). The output follows STREAM's own layout so the
 * same parser reads this program and the original. The solution is validated
 * as STREAM does it: the expected values after `times` iterations are
 * computed on scalars and the average absolute error of each array must be
 * below 1e-13 relative to the expected value.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define HLINE "-------------------------------------------------------------\n"

static double mysecond(void) {
    struct timeval tp;
    gettimeofday(&tp, NULL);
    return (double)tp.tv_sec + (double)tp.tv_usec * 1.e-6;
}

static int checktick(void) {
    double t1, t2, timesfound[20];
    int i, minDelta = 1000000, Delta;
    for (i = 0; i < 20; i++) {
        t1 = mysecond();
        while (((t2 = mysecond()) - t1) < 1.0E-6) {
        }
        timesfound[i] = t1 = t2;
    }
    for (i = 1; i < 20; i++) {
        Delta = (int)(1.0E6 * (timesfound[i] - timesfound[i - 1]));
        minDelta = Delta < minDelta ? Delta : minDelta;
        if (minDelta < 0) minDelta = 0;
    }
    return minDelta;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <elements per array> [times]\n", argv[0]);
        return 2;
    }
    const long n = atol(argv[1]);
    const int ntimes = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 1 || ntimes < 2) {
        fprintf(stderr, "stream: need at least 1 element and 2 repetitions\n");
        return 2;
    }
    static const char *label[4] = {"Copy:      ", "Scale:     ", "Add:       ", "Triad:     "};
    const double bytes[4] = {2.0 * sizeof(double) * n, 2.0 * sizeof(double) * n,
                             3.0 * sizeof(double) * n, 3.0 * sizeof(double) * n};
    double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n),
           *c = malloc(sizeof(double) * n);
    double **times = malloc(sizeof(double *) * 4);
    if (!a || !b || !c || !times) {
        fprintf(stderr, "stream: cannot allocate 3 arrays of %ld doubles\n", n);
        return 3;
    }
    for (int j = 0; j < 4; j++) times[j] = calloc(ntimes, sizeof(double));

    printf(HLINE "STREAM version $Revision: 5.10 $ (tierbench, run-time array size)\n" HLINE);
    printf("This system uses %d bytes per array element.\n" HLINE, (int)sizeof(double));
    printf("Array size = %ld (elements), Offset = 0 (elements)\n", n);
    printf("Memory per array = %.1f MiB (= %.1f GiB).\n", sizeof(double) * (double)n / 1048576.0,
           sizeof(double) * (double)n / 1073741824.0);
    printf("Total memory required = %.1f MiB (= %.1f GiB).\n",
           3.0 * sizeof(double) * (double)n / 1048576.0,
           3.0 * sizeof(double) * (double)n / 1073741824.0);
    printf("Each kernel will be executed %d times.\n", ntimes);
    printf(" The *best* time for each kernel (excluding the first iteration)\n");
    printf(" will be used to compute the reported bandwidth.\n" HLINE);
#ifdef _OPENMP
    int counted = 0;
#pragma omp parallel
    {
#pragma omp master
        printf("Number of Threads requested = %i\n", omp_get_num_threads());
#pragma omp atomic
        counted++;
    }
    printf("Number of Threads counted = %i\n" HLINE, counted);
#endif

    /* first touch in parallel, so pages land near the threads that use them */
#pragma omp parallel for
    for (long j = 0; j < n; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }
    int quantum = checktick();
    printf("Your clock granularity/precision appears to be %d microseconds.\n",
           quantum >= 1 ? quantum : 1);
    double t = mysecond();
#pragma omp parallel for
    for (long j = 0; j < n; j++) a[j] = 2.0E0 * a[j];
    t = 1.0E6 * (mysecond() - t);
    printf("Each test below will take on the order of %d microseconds.\n", (int)t);
    printf(HLINE);

    const double scalar = 3.0;
    for (int k = 0; k < ntimes; k++) {
        times[0][k] = mysecond();
#pragma omp parallel for
        for (long j = 0; j < n; j++) c[j] = a[j];
        times[0][k] = mysecond() - times[0][k];

        times[1][k] = mysecond();
#pragma omp parallel for
        for (long j = 0; j < n; j++) b[j] = scalar * c[j];
        times[1][k] = mysecond() - times[1][k];

        times[2][k] = mysecond();
#pragma omp parallel for
        for (long j = 0; j < n; j++) c[j] = a[j] + b[j];
        times[2][k] = mysecond() - times[2][k];

        times[3][k] = mysecond();
#pragma omp parallel for
        for (long j = 0; j < n; j++) a[j] = b[j] + scalar * c[j];
        times[3][k] = mysecond() - times[3][k];
    }

    printf("Function    Best Rate MB/s  Avg time     Min time     Max time\n");
    for (int j = 0; j < 4; j++) {
        double avg = 0.0, mn = FLT_MAX, mx = 0.0;
        for (int k = 1; k < ntimes; k++) { /* the first iteration is excluded */
            avg += times[j][k];
            mn = times[j][k] < mn ? times[j][k] : mn;
            mx = times[j][k] > mx ? times[j][k] : mx;
        }
        avg /= (double)(ntimes - 1);
        printf("%s%12.1f  %11.6f  %11.6f  %11.6f\n", label[j], 1.0E-06 * bytes[j] / mn, avg, mn,
               mx);
    }
    printf(HLINE);

    /* validation, as STREAM's checkSTREAMresults */
    double aj = 1.0, bj = 2.0, cj = 0.0;
    aj = 2.0E0 * aj;
    for (int k = 0; k < ntimes; k++) {
        cj = aj;
        bj = scalar * cj;
        cj = aj + bj;
        aj = bj + scalar * cj;
    }
    double aSumErr = 0.0, bSumErr = 0.0, cSumErr = 0.0;
    for (long j = 0; j < n; j++) {
        aSumErr += fabs(a[j] - aj);
        bSumErr += fabs(b[j] - bj);
        cSumErr += fabs(c[j] - cj);
    }
    double aAvgErr = aSumErr / (double)n, bAvgErr = bSumErr / (double)n,
           cAvgErr = cSumErr / (double)n;
    const double epsilon = 1.e-13;
    int err = 0;
    if (fabs(aAvgErr / aj) > epsilon) {
        err++;
        printf("Failed Validation on array a[], AvgRelAbsErr > epsilon (%e)\n", epsilon);
        printf("     Expected Value: %e, AvgAbsErr: %e, AvgRelAbsErr: %e\n", aj, aAvgErr,
               fabs(aAvgErr) / aj);
    }
    if (fabs(bAvgErr / bj) > epsilon) {
        err++;
        printf("Failed Validation on array b[], AvgRelAbsErr > epsilon (%e)\n", epsilon);
        printf("     Expected Value: %e, AvgAbsErr: %e, AvgRelAbsErr: %e\n", bj, bAvgErr,
               fabs(bAvgErr) / bj);
    }
    if (fabs(cAvgErr / cj) > epsilon) {
        err++;
        printf("Failed Validation on array c[], AvgRelAbsErr > epsilon (%e)\n", epsilon);
        printf("     Expected Value: %e, AvgAbsErr: %e, AvgRelAbsErr: %e\n", cj, cAvgErr,
               fabs(cAvgErr) / cj);
    }
    if (err == 0)
        printf("Solution Validates: avg error less than %e on all three arrays\n", epsilon);
    printf(HLINE);
    free(a);
    free(b);
    free(c);
    return err == 0 ? 0 : 4;
}
