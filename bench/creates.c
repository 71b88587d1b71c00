/* The C reference for cfd_proxy's file-and-folder creation (bench/run.py, item 2).
 *
 * Makes what the proxy's uncollated write phase makes, with plain system
 * calls: PROCS processes (one per rank) each fill ROOT/processor<rank>/ with
 * WRITES time folders, each of them
 *
 *     <time>/  <time>/uniform/  <time>/uniform/functionObjects/   (mkdir x 3)
 *     <time>/{U,p,k,omega,nut,phi}                                (open, write, close)
 *     <time>/uniform/time
 *     <time>/uniform/functionObjects/functionObjectProperties
 *
 * the 8 files holding SIZE1..SIZE8 bytes (the proxy's sizes, passed in). The
 * processes start together (they wait for the parent to close a pipe); each
 * times its own loop. Prints one line: the slowest process's loop time in
 * seconds, and the files and folders made by all of them.
 *
 *     gcc -O2 -o creates creates.c
 *     ./creates ROOT PROCS WRITES SIZE1 ... SIZE8
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *FILES[8] = {
    "U", "p", "k", "omega", "nut", "phi",
    "uniform/time", "uniform/functionObjects/functionObjectProperties",
};

static void die(const char *what, const char *path) {
    fprintf(stderr, "creates: %s %s: %s\n", what, path, strerror(errno));
    exit(2);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void write_all(int fd, const char *data, size_t size, const char *path) {
    while (size > 0) {
        ssize_t done = write(fd, data, size);
        if (done < 0) die("write", path);
        data += done;
        size -= (size_t)done;
    }
}

/* One rank: WRITES time folders below ROOT/processor<rank>; returns the loop time. */
static double rank_loop(const char *root, int rank, int writes, const long *sizes,
                        const char *data) {
    char base[4096], path[4352];
    snprintf(base, sizeof base, "%s/processor%d", root, rank);
    if (mkdir(base, 0755) != 0) die("mkdir", base);
    double start = now();
    for (int w = 1; w <= writes; w++) {
        snprintf(path, sizeof path, "%s/%d", base, w);
        if (mkdir(path, 0755) != 0) die("mkdir", path);
        snprintf(path, sizeof path, "%s/%d/uniform", base, w);
        if (mkdir(path, 0755) != 0) die("mkdir", path);
        snprintf(path, sizeof path, "%s/%d/uniform/functionObjects", base, w);
        if (mkdir(path, 0755) != 0) die("mkdir", path);
        for (int f = 0; f < 8; f++) {
            snprintf(path, sizeof path, "%s/%d/%s", base, w, FILES[f]);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0) die("open", path);
            write_all(fd, data, (size_t)sizes[f], path);
            if (close(fd) != 0) die("close", path);
        }
    }
    return now() - start;
}

int main(int argc, char **argv) {
    if (argc != 12) {
        fprintf(stderr, "usage: creates ROOT PROCS WRITES SIZE1 ... SIZE8\n");
        return 1;
    }
    const char *root = argv[1];
    int procs = atoi(argv[2]), writes = atoi(argv[3]);
    long sizes[8], largest = 1;
    for (int f = 0; f < 8; f++) {
        sizes[f] = atol(argv[4 + f]);
        if (sizes[f] > largest) largest = sizes[f];
    }
    if (procs < 1 || writes < 1) {
        fprintf(stderr, "creates: PROCS and WRITES must be at least 1\n");
        return 1;
    }
    char *data = malloc((size_t)largest);
    if (!data) die("malloc", "");
    memset(data, 'x', (size_t)largest);

    int gate[2], results[2];
    if (pipe(gate) != 0 || pipe(results) != 0) die("pipe", "");
    for (int rank = 0; rank < procs; rank++) {
        pid_t pid = fork();
        if (pid < 0) die("fork", "");
        if (pid == 0) {
            char byte;
            close(gate[1]);
            close(results[0]);
            while (read(gate[0], &byte, 1) > 0) {
            } /* EOF: the parent let every process go */
            double seconds = rank_loop(root, rank, writes, sizes, data);
            if (write(results[1], &seconds, sizeof seconds) != sizeof seconds) die("pipe", "");
            _exit(0);
        }
    }
    close(gate[0]);
    close(results[1]);
    close(gate[1]); /* go */
    double slowest = 0.0, seconds;
    int reported = 0;
    while (read(results[0], &seconds, sizeof seconds) == sizeof seconds) {
        if (seconds > slowest) slowest = seconds;
        reported++;
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    if (failed || reported != procs) {
        fprintf(stderr, "creates: %d of %d processes reported\n", reported, procs);
        return 2;
    }
    printf("%.9f %ld %ld\n", slowest, (long)procs * writes * 8, (long)procs * writes * 3);
    return 0;
}
