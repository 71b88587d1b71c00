/* The C reference for fe_proxy's output (bench/run.py, item 3).
 *
 * Replays the output fe_proxy made in its evaluations, as recorded by
 * bench/fe_output_overhead.py, the way the application it models makes it:
 * the file-system calls on one file (/dev/null there), the same calls in the
 * same order with the same flags and byte counts, and the numbers of its .frd
 * results formatted as ccx 2.20 formats them (frd.c: fprintf of "%3s%10d" per
 * node and of "%12.5E" per value, of the value as a float, into a stdio
 * FILE; here one in memory, as the writes are the replayed calls), and its
 * .cvg, .sta and .dat lines written from the solve's numbers as ccx writes
 * them: Fortran records with ccx's formats on its units, flushed where it
 * flushes them (bench/ccx_lines.f90; the flush is the traced write). Nothing
 * else (no solve). What this costs is the application's own output on that
 * file; what the proxy costs beyond it is its overhead.
 *
 * The trace holds one evaluation after another, one call a line:
 *
 *     e                      an evaluation begins
 *     o FLAGS FD             open(PATH, FLAGS, 0666), recorded as FD
 *     w FD SIZE              write
 *     p FD SIZE KIND V1 ...  write of a line ccx writes from Fortran: KIND 0 a
 *                            .cvg line, 1 the same after the file's heading,
 *                            2 a .sta line, 3 the same after its heading, 4 an
 *                            increment's .dat; V the numbers it prints (the
 *                            integer ones as integers); SIZE its bytes
 *     v FD N SIZE1 ... SIZEN writev of N parts
 *     r FD SIZE              read
 *     l FD OFFSET WHENCE     lseek
 *     s FD                   fsync
 *     t FD                   fstat
 *     c FD                   close
 *     f NODES K              format a block of NODES nodes of K values each:
 *                            the next NODES x (1 + K) numbers of VALUES
 *                            (float32: the node's number, then its values)
 *     i                      a segment ends: the calls up to here are made at
 *                            one point of the solve (its start, an increment,
 *                            its end), when the replay runs in place
 *
 * PRINTED holds the bytes of those lines as the proxy wrote them, one after
 * another. Before anything is timed, every traced line is written once to a
 * real file and must be those bytes; then the Fortran units' descriptors are
 * pointed at PATH. (The runtime buffers a regular file, a write a flush as
 * ccx's on a disk, but not /dev/null, where it writes every record.)
 *
 * Every evaluation is replayed REPEATS times after one warm-up replay, the
 * repeats of the whole trace in turn (so an evaluation's repeats are apart,
 * as the proxy's are). Prints one line per evaluation: the median seconds of
 * its replays, its file calls, the bytes it wrote and the values it formatted.
 *
 *     gfortran -O2 -D_FORTIFY_SOURCE=2 -o fe_replay fe_replay.c ccx_lines.f90
 *     ./fe_replay TRACE VALUES PRINTED PATH REPEATS
 *
 * Built with -shared -fPIC it is also a library, for the replay in place:
 * fe_replay_open(TRACE, VALUES, PRINTED, PATH) loads the trace, and
 * fe_replay_segment(E, S) makes the calls of evaluation E's segment S, called
 * by the bench between the solver's increments where the proxy makes them.
 * A negative E makes no call (what calling the library costs); fe_replay_made()
 * counts the file calls made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 1024
#define MAX_PARTS 64
#define MAX_PRINTED 9 /* numbers of a printed line */

/* ccx's .cvg, .sta and .dat lines (bench/ccx_lines.f90): its units opened in a folder, the
 * descriptor of a KIND's unit, a line of KIND written and flushed */
void ccx_lines_open(const char *folder, int length);
int ccx_lines_fd(long kind);
void ccx_lines_print(long kind, const double *v);

/* how many numbers each KIND prints */
static const int PRINTED[] = {9, 9, 7, 7, 9};

typedef struct {
    char op;
    int fd, parts, nodes; /* parts: of a writev; nodes: of a formatted block */
    long a, b; /* open: flags; write, read, print: size; lseek: offset, whence;
                  format: first, K; print: KIND */
    long *sizes; /* writev: the parts' sizes */
    double *printed; /* print: its numbers */
} Call;

/* Where formatted blocks go: a FILE in memory (``memory``), rewound for each. */
#define FORMATTED (1 << 22)
static char *memory;

typedef struct {
    Call *calls;
    long count, bytes, blocks, numbers; /* blocks: of the calls, the formatted ones */
    long *marks; /* where each segment's calls begin; marks[segments] = count */
    int segments;
} Evaluation;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "fe_replay: %s %s: %s\n", what, detail, strerror(errno));
    exit(2);
}

/* A segment more for ``e``, beginning at its next call. */
static void mark(Evaluation *e) {
    e->marks = realloc(e->marks, sizeof(long) * (size_t)(e->segments + 2));
    if (!e->marks) die("realloc", "a segment's mark");
    e->marks[e->segments++] = e->count;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int compare(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The numbers after a line's letter, at most max of them; how many there were. */
static int numbers(const char *line, long *out, int max) {
    int k = 0;
    char *end;
    for (const char *p = line + 1; k <= max; p = end) {
        long value = strtol(p, &end, 10);
        if (end == p) break;
        if (k == max) return -1; /* too many */
        out[k++] = value;
    }
    return k;
}

/* How many numbers a call of ``op`` has (writev: 2 + its parts); -1 for no such call. */
static int expected(char op, const long *n, int k) {
    switch (op) {
    case 'o': case 'w': case 'r': return 2;
    case 'l': return 3;
    case 's': case 't': case 'c': return 1;
    case 'f': return 2;
    case 'v': return k >= 2 && n[1] >= 1 && n[1] <= MAX_PARTS ? 2 + (int)n[1] : -1;
    default: return -1;
    }
}

/* A line "p FD SIZE KIND V1 ..." read into ``c``; 0 if it is not one. */
static int printed_line(const char *line, Call *c) {
    char *end;
    long head[3];
    const char *p = line + 1;
    for (int i = 0; i < 3; i++, p = end) {
        head[i] = strtol(p, &end, 10);
        if (end == p) return 0;
    }
    c->fd = (int)head[0], c->a = head[1], c->b = head[2];
    if (c->fd < 0 || c->fd >= MAX_FD || c->a < 1 || c->b < 0 || c->b > 4) return 0;
    int k = 0;
    for (double value = strtod(p, &end); end != p; value = strtod(p, &end)) {
        if (k == PRINTED[c->b]) return 0;
        c->printed[k++] = value, p = end;
    }
    return k == PRINTED[c->b];
}

/* The trace's evaluations; *largest is the largest write or read, *formatted the
 * numbers its blocks take from VALUES. */
static Evaluation *load(const char *trace, int *count, long *largest, long *formatted) {
    FILE *in = fopen(trace, "r");
    if (!in) die("open", trace);
    Evaluation *evals = NULL;
    int n = 0;
    long capacity = 0, line_number = 0, v[2 + MAX_PARTS];
    char line[8192], where[4200];
    *largest = 1;
    *formatted = 0;
    while (fgets(line, sizeof line, in)) {
        line_number++;
        snprintf(where, sizeof where, "%s line %ld", trace, line_number);
        if (line[0] == 'e') {
            evals = realloc(evals, sizeof(Evaluation) * (size_t)(n + 1));
            if (!evals) die("realloc", trace);
            evals[n++] = (Evaluation){NULL, 0, 0, 0, 0, NULL, 0};
            mark(&evals[n - 1]);
            capacity = 0;
            continue;
        }
        if (line[0] == 'i' && n > 0) {
            mark(&evals[n - 1]);
            continue;
        }
        errno = EINVAL;
        if (n == 0) die("a call before the first evaluation:", where);
        Call c = {line[0], 0, 0, 0, 0, 0, NULL, NULL};
        if (c.op == 'p') {
            c.printed = malloc(sizeof(double) * MAX_PRINTED);
            if (!c.printed) die("malloc", trace);
            if (!printed_line(line, &c)) die("not a printed line:", where);
        } else {
            int k = numbers(line, v, 2 + MAX_PARTS);
            if (k < 1 || k != expected(line[0], v, k)) die("not a call:", where);
            c.fd = (int)v[0];
        }
        if (c.op == 'o') c.a = v[0], c.fd = (int)v[1];
        if (c.op == 'w' || c.op == 'r' || c.op == 'l') c.a = v[1];
        if (c.op == 'l') c.b = v[2];
        if (c.op == 'f') {
            c.fd = 0, c.nodes = (int)v[0], c.a = *formatted, c.b = v[1];
            if (c.nodes < 1 || c.b < 1 || c.nodes * (14 + 12 * c.b) > FORMATTED / 2)
                die("a block of no or too many numbers:", where);
            *formatted += c.nodes * (1 + c.b);
        }
        if (c.op == 'v') {
            c.parts = (int)v[1];
            c.sizes = malloc(sizeof(long) * (size_t)c.parts);
            if (!c.sizes) die("malloc", trace);
            memcpy(c.sizes, v + 2, sizeof(long) * (size_t)c.parts);
        }
        if (c.fd < 0 || c.fd >= MAX_FD) die("descriptor out of range:", where);
        Evaluation *e = &evals[n - 1];
        for (int i = 0; i < c.parts; i++) {
            e->bytes += c.sizes[i];
            if (c.sizes[i] > *largest) *largest = c.sizes[i];
        }
        if (c.op == 'w' || c.op == 'p') e->bytes += c.a;
        if (c.op == 'f') e->blocks++, e->numbers += c.nodes * c.b;
        if ((c.op == 'w' || c.op == 'r') && c.a > *largest) *largest = c.a;
        if (e->count == capacity) {
            capacity = capacity ? 2 * capacity : 1024;
            e->calls = realloc(e->calls, sizeof(Call) * (size_t)capacity);
            if (!e->calls) die("realloc", trace);
        }
        e->calls[e->count++] = c;
    }
    fclose(in);
    for (int e = 0; e < n; e++) evals[e].marks[evals[e].segments] = evals[e].count;
    *count = n;
    return evals;
}

/* A block of the .frd as ccx prints it: its two header lines, the lines that name its
 * components, a line per node, the end. */
static void format_block(FILE *out, const float *v, int nodes, long k) {
    rewind(out);
    fprintf(out, "%5sPSTEP%25s%12d%12d%12d%10s\n", "    1", "", 1, 1, 1, "");
    fprintf(out, "%7s%5d%12.5E%12d%22d%5d%11s1\n", "  100CL", 101, 1.0, nodes, 0, 1, "");
    fprintf(out, "%3s  %-8s%5ld%5d\n", " -4", "BLOCK", k, 1);
    for (long j = 0; j < k; j++) fprintf(out, "%3s  %-8s%5d%5d%5ld%5d\n", " -5", "C", 1, 4, j, 0);
    for (int i = 0; i < nodes; i++, v += 1 + k) {
        fprintf(out, "%3s%10d", " -1", (int)v[0]);
        for (long j = 1; j <= k; j++) fprintf(out, "%12.5E", v[j]);
        fprintf(out, "\n");
    }
    fprintf(out, "%3s\n", " -3");
    fflush(out);
}

/* The file calls replayed so far (the formatted blocks are not file calls). */
static long made;

/* Calls first to last - 1 of an evaluation on PATH; the recorded descriptors mapped to the
 * real ones. */
static void replay(const Evaluation *e, long first, long last, const char *path, char *data,
                   int *fds, const float *values, FILE *out) {
    struct iovec iov[MAX_PARTS];
    struct stat status;
    for (long i = first; i < last; i++) {
        const Call *c = &e->calls[i];
        made += c->op != 'f';
        switch (c->op) {
        case 'o':
            fds[c->fd] = open(path, (int)c->a, 0666);
            if (fds[c->fd] < 0) die("open", path);
            break;
        case 'w':
            if (write(fds[c->fd], data, (size_t)c->a) != c->a) die("write", path);
            break;
        case 'p':
            ccx_lines_print(c->b, c->printed); /* the write: the runtime's flush */
            break;
        case 'v':
            for (int k = 0; k < c->parts; k++) iov[k] = (struct iovec){data, (size_t)c->sizes[k]};
            if (writev(fds[c->fd], iov, c->parts) < 0) die("writev", path);
            break;
        case 'r':
            if (read(fds[c->fd], data, (size_t)c->a) < 0) die("read", path);
            break;
        case 'l':
            if (lseek(fds[c->fd], c->a, (int)c->b) < 0) die("lseek", path);
            break;
        case 's':
            fsync(fds[c->fd]); /* /dev/null refuses fsync; the call is what is replayed */
            break;
        case 't':
            if (fstat(fds[c->fd], &status) != 0) die("fstat", path);
            break;
        case 'c':
            if (close(fds[c->fd]) != 0) die("close", path);
            break;
        case 'f':
            format_block(out, values + c->a, c->nodes, c->b);
            break;
        }
    }
}

/* What a replay needs, made once from the trace. */
static struct {
    Evaluation *evals;
    int count;
    char *path, *data;
    int fds[MAX_FD];
    float *values;
    FILE *out;
} R;

/* The line of ``text`` (``size`` bytes) holding byte ``at``, quoted for a message. */
static void quote(const char *what, const char *text, long size, long at) {
    long start = at, end = at;
    while (start > 0 && text[start - 1] != '\n') start--;
    while (end < size && text[end] != '\n') end++;
    fprintf(stderr, "fe_replay: %s \"%.*s\"\n", what, (int)(end - start), text + start);
}

/* ccx's units opened, every printed line of the trace written once to a real file and
 * checked against the bytes the proxy wrote (PRINTED, in the trace's order), then the
 * units' descriptors pointed at PATH. */
static void open_lines(const Evaluation *evals, int count, const char *printed,
                       const char *path) {
    static const char *const files[] = {"dat", "sta", "cvg"};
    const char *tmp = getenv("TMPDIR");
    char folder[4096], name[4200];
    snprintf(folder, sizeof folder, "%s/fe_replay.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(folder)) die("mkdtemp", folder);
    ccx_lines_open(folder, (int)strlen(folder));
    for (int f = 0; f < 3; f++) { /* open, they need no name: nothing is left if this stops */
        snprintf(name, sizeof name, "%s/job.%s", folder, files[f]);
        if (unlink(name) != 0) die("unlink", name);
    }
    if (rmdir(folder) != 0) die("rmdir", folder);
    FILE *proxy = fopen(printed, "rb");
    if (!proxy) die("open", printed);
    char *want = malloc(FORMATTED), *got = malloc(FORMATTED);
    if (!want || !got) die("malloc", "");
    struct stat before, after;
    for (int e = 0; e < count; e++)
        for (long i = 0; i < evals[e].count; i++) {
            const Call *c = &evals[e].calls[i];
            if (c->op != 'p') continue;
            int fd = ccx_lines_fd(c->b);
            if (fstat(fd, &before) != 0) die("fstat", folder);
            ccx_lines_print(c->b, c->printed);
            if (fstat(fd, &after) != 0) die("fstat", folder);
            long size = (long)(after.st_size - before.st_size);
            errno = EINVAL;
            if (size != c->a || size > FORMATTED)
                die("a printed line of another size than traced on", path);
            if (pread(fd, got, (size_t)size, before.st_size) != size) die("pread", folder);
            if (fread(want, 1, (size_t)size, proxy) != (size_t)size)
                die("fewer printed bytes than traced in", printed);
            if (memcmp(got, want, (size_t)size) != 0) {
                long at = 0;
                while (got[at] == want[at]) at++;
                quote("the proxy wrote", want, size, at);
                quote("ccx writes     ", got, size, at);
                die("a line the proxy wrote is not ccx's, in", printed);
            }
        }
    errno = EINVAL;
    if (fgetc(proxy) != EOF) die("more printed bytes than traced in", printed);
    fclose(proxy);
    free(want), free(got);
    for (long kind = 0; kind <= 4; kind += 2) {
        int target = open(path, O_WRONLY);
        if (target < 0 || dup2(target, ccx_lines_fd(kind)) < 0) die("open", path);
        close(target);
    }
}

/* Loads TRACE, the numbers of its blocks from VALUES and its printed lines' bytes from
 * PRINTED, to be replayed on PATH; returns the evaluations. */
int fe_replay_open(const char *trace, const char *values_file, const char *printed,
                   const char *path) {
    long largest, formatted;
    R.evals = load(trace, &R.count, &largest, &formatted);
    R.values = malloc(sizeof(float) * (size_t)(formatted + 1));
    FILE *numbers = fopen(values_file, "rb");
    if (!R.values || !numbers) die("read", values_file);
    if (fread(R.values, sizeof(float), (size_t)formatted, numbers) != (size_t)formatted) {
        errno = EINVAL;
        die("fewer numbers than the trace's blocks take in", values_file);
    }
    fclose(numbers);
    memory = malloc(FORMATTED);
    R.out = memory ? fmemopen(memory, FORMATTED, "w") : NULL;
    if (!R.out) die("fmemopen", "");
    open_lines(R.evals, R.count, printed, path);
    R.data = malloc((size_t)largest);
    R.path = strdup(path);
    if (!R.data || !R.path) die("malloc", "");
    memset(R.data, 'x', (size_t)largest);
    return R.count;
}

/* How many segments evaluation ``e`` has (0 for no such evaluation). */
int fe_replay_segments(int e) { return e >= 0 && e < R.count ? R.evals[e].segments : 0; }

/* The calls of evaluation ``e``'s segment ``s``; none for a negative ``e``. */
void fe_replay_segment(int e, int s) {
    if (e < 0) return;
    if (e >= R.count || s < 0 || s >= R.evals[e].segments) {
        errno = EINVAL;
        die("no such segment in", "the trace");
    }
    const Evaluation *ev = &R.evals[e];
    replay(ev, ev->marks[s], ev->marks[s + 1], R.path, R.data, R.fds, R.values, R.out);
}

/* The file calls made since the trace was opened. */
long fe_replay_made(void) { return made; }

static void replay_all(int e) {
    replay(&R.evals[e], 0, R.evals[e].count, R.path, R.data, R.fds, R.values, R.out);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: fe_replay TRACE VALUES PRINTED PATH REPEATS\n");
        return 1;
    }
    int repeats = atoi(argv[5]);
    if (repeats < 1) {
        fprintf(stderr, "fe_replay: REPEATS must be at least 1\n");
        return 1;
    }
    int count = fe_replay_open(argv[1], argv[2], argv[3], argv[4]);
    double *times = malloc(sizeof(double) * (size_t)count * (size_t)repeats);
    if (!times) die("malloc", "");
    for (int e = 0; e < count; e++) replay_all(e); /* warm-up */
    for (int r = 0; r < repeats; r++)
        for (int e = 0; e < count; e++) {
            double start = now();
            replay_all(e);
            times[(size_t)e * repeats + r] = now() - start;
        }
    for (int e = 0; e < count; e++) {
        double *mine = times + (size_t)e * repeats;
        qsort(mine, (size_t)repeats, sizeof(double), compare);
        double median = repeats % 2 ? mine[repeats / 2]
                                    : 0.5 * (mine[repeats / 2 - 1] + mine[repeats / 2]);
        const Evaluation *ev = &R.evals[e];
        printf("%.9f %ld %ld %ld\n", median, ev->count - ev->blocks, ev->bytes, ev->numbers);
    }
    return 0;
}
