/* The C reference for cfd_proxy's file-and-folder creation (bench/run.py, item 2).
 *
 * Makes what the proxy's uncollated write phase makes, with plain system
 * calls: PROCS processes (one per rank) each fill ROOT/processor<rank>/ with
 * WRITES time folders, each of them
 *
 *     <time>/<name> for every NAME=SIZE given, as OpenFOAM's OFstream makes a file:
 *     mkdir of its folder (EEXIST is success, ENOENT makes the parent first: so
 *     <time>/, uniform/ and functionObjects/ are made on the way), stat of
 *     <name>.gz and of <name>, open, write, close
 *
 * where the files and their sizes are the proxy's, passed in (for its default
 * file set: U p k omega nut phi, uniform/time, uniform/cumulativeContErr,
 * uniform/functionObjects/functionObjectProperties). Timed as the proxy times
 * its write phase: every process times each write, all wait at a barrier
 * after it, and a write counts with its slowest process. Prints one line: the
 * sum over writes of the slowest process's time, in seconds, and the files
 * and folders made by all processes.
 *
 *     gcc -O2 -pthread -o creates creates.c
 *     ./creates ROOT PROCS WRITES NAME=SIZE [NAME=SIZE ...]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 64
static const char *FILES[MAX_FILES];
static int NFILES;

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

/* Foam::mkDir, as tierbench's csrc/foamio.c makes it: 0 or -1 with errno set */
static int foam_mkdir(char *path) {
    if (mkdir(path, 0777) == 0 || errno == EEXIST) return 0;
    if (errno != ENOENT) return -1;
    char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path) return -1;
    *slash = '\0';
    int failed = foam_mkdir(path);
    *slash = '/';
    if (failed) return -1;
    return mkdir(path, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

/* OFstream's look for a compressed or plain twin, then the file (see the top) */
static void make_file(char *path, const char *data, size_t size) {
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (foam_mkdir(path) != 0) die("mkdir", path);
    *slash = '/';
    char gz[4400];
    struct stat st;
    snprintf(gz, sizeof gz, "%s.gz", path);
    stat(gz, &st);
    stat(path, &st);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) die("open", path);
    write_all(fd, data, size, path);
    if (close(fd) != 0) die("close", path);
}

/* One rank: WRITES time folders below ROOT/processor<rank>, each write timed into times[]. */
static void rank_loop(const char *root, int rank, int writes, const long *sizes,
                      const char *data, pthread_barrier_t *barrier, double *times) {
    char base[4096], path[4352];
    snprintf(base, sizeof base, "%s/processor%d", root, rank);
    if (mkdir(base, 0755) != 0) die("mkdir", base);
    pthread_barrier_wait(barrier);
    for (int w = 1; w <= writes; w++) {
        double start = now();
        for (int f = 0; f < NFILES; f++) {
            snprintf(path, sizeof path, "%s/%d/%s", base, w, FILES[f]);
            make_file(path, data, (size_t)sizes[f]);
        }
        times[w - 1] = now() - start;
        pthread_barrier_wait(barrier);
    }
}

int main(int argc, char **argv) {
    if (argc < 5 || argc - 4 > MAX_FILES) {
        fprintf(stderr, "usage: creates ROOT PROCS WRITES NAME=SIZE [NAME=SIZE ...] (1 to %d files)\n",
                MAX_FILES);
        return 1;
    }
    const char *root = argv[1];
    int procs = atoi(argv[2]), writes = atoi(argv[3]);
    long sizes[MAX_FILES], largest = 1;
    NFILES = argc - 4;
    for (int f = 0; f < NFILES; f++) {
        char *equals = strrchr(argv[4 + f], '=');
        if (!equals || equals == argv[4 + f]) {
            fprintf(stderr, "creates: %s is not NAME=SIZE\n", argv[4 + f]);
            return 1;
        }
        *equals = '\0';
        FILES[f] = argv[4 + f];
        sizes[f] = atol(equals + 1);
        if (sizes[f] > largest) largest = sizes[f];
    }
    if (procs < 1 || writes < 1) {
        fprintf(stderr, "creates: PROCS and WRITES must be at least 1\n");
        return 1;
    }
    char *data = malloc((size_t)largest);
    if (!data) die("malloc", "");
    memset(data, 'x', (size_t)largest);

    /* the barrier and every process's write times, shared by the forked processes */
    size_t bytes = sizeof(pthread_barrier_t) + sizeof(double) * (size_t)procs * (size_t)writes;
    void *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) die("mmap", "");
    pthread_barrier_t *barrier = shared;
    double *times = (double *)((char *)shared + sizeof(pthread_barrier_t));
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    if (pthread_barrier_init(barrier, &attr, (unsigned)procs) != 0) die("barrier", "");
    pid_t *pids = calloc((size_t)procs, sizeof(pid_t));
    if (!pids) die("calloc", "");
    for (int rank = 0; rank < procs; rank++) {
        pid_t pid = pids[rank] = fork();
        if (pid < 0) die("fork", "");
        if (pid == 0) {
            rank_loop(root, rank, writes, sizes, data, barrier, times + (size_t)rank * writes);
            _exit(0);
        }
    }
    int failed = 0, status;
    while (wait(&status) > 0)
        if (!failed && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
            failed = 1; /* the others would wait at the barrier for ever */
            for (int rank = 0; rank < procs; rank++) kill(pids[rank], SIGKILL);
        }
    if (failed) {
        fprintf(stderr, "creates: a process failed\n");
        return 2;
    }
    double total = 0.0; /* each write counts with its slowest process */
    for (int w = 0; w < writes; w++) {
        double longest = 0.0;
        for (int rank = 0; rank < procs; rank++)
            if (times[(size_t)rank * writes + w] > longest) longest = times[(size_t)rank * writes + w];
        total += longest;
    }
    printf("%.9f %ld %ld\n", total, (long)procs * writes * NFILES, (long)procs * writes * 3);
    return 0;
}
