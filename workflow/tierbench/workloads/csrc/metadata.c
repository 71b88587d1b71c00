/* The metadata workload's loop: mdtest's phases with plain system calls.
 *
 * Python's own cost per call (argument parsing, the path's encoding,
 * os.stat_result) is a large part of a 1.5 us stat on tmpfs: a Python loop ran
 * stats at 0.6-0.7 of C's rate (bench item 10). So the loop that is timed is
 * this one; tierbench.workloads.metadata builds it with gcc, runs it in the
 * job's run folder and checks what it reports.
 *
 *     metadata ROOT LAYOUT ITEMS BRANCHING DEPTH FILE_SIZE FSYNC MIN_SECONDS
 *
 * ROOT is an empty folder. LAYOUT flat puts every item in ROOT; tree first
 * makes BRANCHING folders per level, DEPTH levels deep (tree_create), and
 * spreads the items round robin over its leaves. One cycle is, per phase and
 * timed as a whole with CLOCK_MONOTONIC:
 *
 *     dir_create   mkdir d<i>            file_create  open(O_CREAT|O_EXCL), FILE_SIZE
 *     dir_stat     stat d<i>                          bytes written, fsync if FSYNC, close
 *     dir_remove   rmdir d<i>            file_stat    stat f<i>
 *                                        file_read    open, read FILE_SIZE bytes, close
 *                                        file_rename  rename f<i> to r<i> (same folder)
 *                                        file_rename_noreplace
 *                                                     renameat2 r<i> back to f<i> with
 *                                                     RENAME_NOREPLACE
 *                                        file_remove  unlink f<i> (r<i> where refused)
 *
 * A tier may refuse RENAME_NOREPLACE (EINVAL: GlusterFS's FUSE client, after a round
 * trip); the refused calls are timed as they are, counted, and printed as a line
 * "refused <phase> <calls>". coreutils' mv then looks the new name up and renames.
 *
 * Cycles repeat until MIN_SECONDS have passed (at least one), so a fast tier
 * is timed long enough to be read; then the tree is removed (tree_remove).
 * Every call is checked: a failure prints what failed and exits 2. Prints one
 * line per phase: its name, the operations done and the seconds they took.
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

enum { DIR_CREATE, DIR_STAT, DIR_REMOVE, FILE_CREATE, FILE_STAT, FILE_READ, FILE_RENAME,
       FILE_RENAME_NOREPLACE, FILE_REMOVE, PHASES };
static const char *NAMES[PHASES] = {"dir_create", "dir_stat",    "dir_remove",
                                    "file_create", "file_stat",  "file_read",
                                    "file_rename", "file_rename_noreplace", "file_remove"};

static const char *ROOT;
static long BRANCHING, DEPTH, LEAVES = 1;
static int TREE;

static void die(const char *what, const char *path) {
    fprintf(stderr, "metadata: %s %s: %s\n", what, path, strerror(errno));
    exit(2);
}

static double clock_seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double now(void) { return clock_seconds(CLOCK_MONOTONIC); }

/* this process's CPU time: what a call costs the caller, apart from waiting for the tier */
static double cpu_now(void) { return clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }

/* the folder of leaf `leaf`: ROOT/t<digit>/t<digit>... (DEPTH digits in base BRANCHING) */
static void leaf_path(char *out, size_t size, long leaf, long levels) {
    int n = snprintf(out, size, "%s", ROOT);
    long digits[64];
    for (long level = DEPTH - 1; level >= 0; level--) {
        digits[level] = leaf % BRANCHING;
        leaf /= BRANCHING;
    }
    for (long level = 0; level < levels; level++)
        n += snprintf(out + n, size - (size_t)n, "/t%ld", digits[level]);
}

/* every item's path, made before any clock starts: a phase times its calls alone */
static char *item_path(char kind, long i) {
    char folder[4096], *path;
    leaf_path(folder, sizeof folder, TREE ? i % LEAVES : 0, TREE ? DEPTH : 0);
    if (asprintf(&path, "%s/%c%ld", folder, kind, i) < 0) die("asprintf", folder);
    return path;
}

/* mkdir (or rmdir) every folder of the tree, parents first (or children first) */
static long walk_tree(int remove) {
    char path[4096];
    long done = 0;
    for (long level = remove ? DEPTH : 1; remove ? level >= 1 : level <= DEPTH;
         level += remove ? -1 : 1) {
        long folders = 1, stride = 1;
        for (long l = 0; l < level; l++) folders *= BRANCHING;
        for (long l = level; l < DEPTH; l++) stride *= BRANCHING;
        for (long f = 0; f < folders; f++) {
            leaf_path(path, sizeof path, f * stride, level);
            if ((remove ? rmdir(path) : mkdir(path, 0755)) != 0)
                die(remove ? "rmdir" : "mkdir", path);
            done++;
        }
    }
    return done;
}

static char **DIRS, **FILES, **RENAMED;
/* per item, whether this cycle's RENAME_NOREPLACE was refused (the file is still r<i>) */
static char *REFUSED;
static long refused_calls;

static void one_op(int phase, long i, char *data, long file_size, int sync) {
    const char *path = phase <= DIR_REMOVE                                 ? DIRS[i]
                       : phase == FILE_RENAME_NOREPLACE                    ? RENAMED[i]
                       : phase == FILE_REMOVE && REFUSED[i]                ? RENAMED[i]
                                                                           : FILES[i];
    struct stat st;
    int fd;
    switch (phase) {
    case DIR_CREATE:
        if (mkdir(path, 0755) != 0) die("mkdir", path);
        break;
    case DIR_STAT:
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) die("stat", path);
        break;
    case DIR_REMOVE:
        if (rmdir(path) != 0) die("rmdir", path);
        break;
    case FILE_CREATE:
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) die("open", path);
        for (long left = file_size; left > 0;) {
            ssize_t n = write(fd, data + (file_size - left), (size_t)left);
            if (n <= 0) die("write", path);
            left -= n;
        }
        if (sync && fsync(fd) != 0) die("fsync", path);
        if (close(fd) != 0) die("close", path);
        break;
    case FILE_STAT:
        if (stat(path, &st) != 0 || st.st_size != file_size) die("stat", path);
        break;
    case FILE_READ:
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) die("open", path);
        for (long got = 0; got < file_size;) {
            ssize_t n = read(fd, data + got, (size_t)(file_size - got));
            if (n <= 0) die("read (short file)", path);
            got += n;
        }
        if (close(fd) != 0) die("close", path);
        break;
    case FILE_RENAME:
        if (rename(path, RENAMED[i]) != 0) die("rename", path);
        break;
    case FILE_RENAME_NOREPLACE:
        REFUSED[i] = renameat2(AT_FDCWD, path, AT_FDCWD, FILES[i], RENAME_NOREPLACE) != 0;
        if (REFUSED[i] && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            die("renameat2", path);
        refused_calls += REFUSED[i];
        break;
    case FILE_REMOVE:
        if (unlink(path) != 0) die("unlink", path);
        break;
    }
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: metadata ROOT flat|tree ITEMS BRANCHING DEPTH FILE_SIZE FSYNC "
                        "MIN_SECONDS\n");
        return 1;
    }
    ROOT = argv[1];
    TREE = strcmp(argv[2], "tree") == 0;
    long items = atol(argv[3]), file_size = atol(argv[6]);
    BRANCHING = atol(argv[4]);
    DEPTH = atol(argv[5]);
    int sync = atoi(argv[7]);
    double min_seconds = atof(argv[8]);
    if ((!TREE && strcmp(argv[2], "flat") != 0) || items < 1 || file_size < 0 ||
        (TREE && (BRANCHING < 1 || DEPTH < 1 || DEPTH > 64))) {
        fprintf(stderr, "metadata: bad arguments (layout flat or tree, ITEMS >= 1, "
                        "BRANCHING >= 1, 1 <= DEPTH <= 64, FILE_SIZE >= 0)\n");
        return 1;
    }
    if (TREE)
        for (long l = 0; l < DEPTH; l++) LEAVES *= BRANCHING;
    char *data = malloc((size_t)file_size + 1);
    if (!data) die("malloc", "");
    memset(data, 'x', (size_t)file_size + 1);
    DIRS = calloc((size_t)items, sizeof(char *));
    FILES = calloc((size_t)items, sizeof(char *));
    RENAMED = calloc((size_t)items, sizeof(char *));
    REFUSED = calloc((size_t)items, 1);
    if (!DIRS || !FILES || !RENAMED || !REFUSED) die("calloc", "");
    /* each kind's paths made in a row, so a phase reads its paths in the order they lie in
     * memory: interleaved, the best rounds' stats on tmpfs ran at 0.91-0.94 of bench item
     * 10's C loop, in a row at 0.99 */
    for (long i = 0; i < items; i++) DIRS[i] = item_path('d', i);
    for (long i = 0; i < items; i++) FILES[i] = item_path('f', i);
    for (long i = 0; i < items; i++) RENAMED[i] = item_path('r', i);

    double seconds[PHASES] = {0}, cpu[PHASES] = {0}, start = now(), t, c;
    double tree_create = 0, tree_remove = 0, tree_create_cpu = 0, tree_remove_cpu = 0;
    long ops[PHASES] = {0}, tree_folders = 0;
    if (TREE) {
        t = now(), c = cpu_now();
        tree_folders = walk_tree(0);
        tree_create = now() - t, tree_create_cpu = cpu_now() - c;
    }
    do {
        for (int phase = 0; phase < PHASES; phase++) {
            t = now(), c = cpu_now();
            for (long i = 0; i < items; i++) one_op(phase, i, data, file_size, sync);
            seconds[phase] += now() - t;
            cpu[phase] += cpu_now() - c;
            ops[phase] += items;
        }
    } while (now() - start < min_seconds);
    /* each line: phase, operations, wall seconds, CPU seconds */
    if (TREE) {
        t = now(), c = cpu_now();
        walk_tree(1);
        tree_remove = now() - t, tree_remove_cpu = cpu_now() - c;
        printf("tree_create %ld %.9f %.9f\n", tree_folders, tree_create, tree_create_cpu);
    }
    for (int phase = 0; phase < PHASES; phase++)
        printf("%s %ld %.9f %.9f\n", NAMES[phase], ops[phase], seconds[phase], cpu[phase]);
    if (TREE)
        printf("tree_remove %ld %.9f %.9f\n", tree_folders, tree_remove, tree_remove_cpu);
    if (refused_calls)
        printf("refused %s %ld\n", NAMES[FILE_RENAME_NOREPLACE], refused_calls);
    return 0;
}
