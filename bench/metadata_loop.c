/* The C reference for the metadata workload (bench/run.py, item 10).
 *
 * The plainest loop of the workload's phases, one folder, empty files:
 *
 *     mkdir d<i>; stat d<i>; rmdir d<i>                     (for every i, phase by phase)
 *     open f<i> O_CREAT|O_EXCL [fsync] close; stat f<i>; open f<i> close;
 *     rename f<i> r<i>; unlink r<i>
 *
 * each phase timed as a whole with CLOCK_MONOTONIC, every path made before
 * the clock starts. Prints one line per phase: name, operations, seconds.
 *
 *     gcc -O2 -o metadata_loop metadata_loop.c
 *     ./metadata_loop ROOT ITEMS FSYNC
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *what, const char *path) {
    fprintf(stderr, "metadata_loop: %s %s: %s\n", what, path, strerror(errno));
    exit(2);
}

static double clock_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static char **names(const char *root, const char *prefix, long n) {
    char **out = malloc(sizeof(char *) * (size_t)n);
    for (long i = 0; i < n; i++)
        if (!out || asprintf(&out[i], "%s/%s%ld", root, prefix, i) < 0) fail("names", root);
    return out;
}

#define PHASE(label, call)                                                                     \
    do {                                                                                       \
        double start = clock_s();                                                              \
        for (long i = 0; i < n; i++) { call; }                                                 \
        printf("%s %ld %.9f\n", label, n, clock_s() - start);                                  \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: metadata_loop ROOT ITEMS FSYNC\n");
        return 1;
    }
    long n = atol(argv[2]);
    int sync = atoi(argv[3]);
    if (n < 1) {
        fprintf(stderr, "metadata_loop: ITEMS must be at least 1\n");
        return 1;
    }
    char **d = names(argv[1], "d", n), **f = names(argv[1], "f", n), **r = names(argv[1], "r", n);
    struct stat st;
    int fd;
    PHASE("dir_create", if (mkdir(d[i], 0755)) fail("mkdir", d[i]));
    PHASE("dir_stat", if (stat(d[i], &st)) fail("stat", d[i]));
    PHASE("dir_remove", if (rmdir(d[i])) fail("rmdir", d[i]));
    PHASE("file_create", fd = open(f[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
          if (fd < 0) fail("open", f[i]); if (sync && fsync(fd)) fail("fsync", f[i]);
          if (close(fd)) fail("close", f[i]));
    PHASE("file_stat", if (stat(f[i], &st)) fail("stat", f[i]));
    PHASE("file_read", fd = open(f[i], O_RDONLY | O_CLOEXEC); if (fd < 0) fail("open", f[i]);
          if (close(fd)) fail("close", f[i]));
    PHASE("file_rename", if (rename(f[i], r[i])) fail("rename", f[i]));
    PHASE("file_remove", if (unlink(r[i])) fail("unlink", r[i]));
    return 0;
}
