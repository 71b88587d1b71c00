/* _feio: an implicit FE solver's file output, each increment in one call from Python.
 *
 * Writer(fds, frame_bytes, sync, restart, restart_interval, restart_bytes, restart_sync)
 *
 *   fds               (msg_fd, sta_fd, odb_fd): open descriptors of job.msg, job.sta, job.odb
 *   frame_bytes       size of a field-output frame: zeros pad the frame up to it
 *   sync              true: fsync the three files after every increment
 *   restart           None, or the path of the restart file, rewritten
 *                     every restart_interval increments with that increment's
 *                     frame padded to restart_bytes, fsync'd with restart_sync
 *
 * A Writer is called with each converged increment (a
 * tierbench.workloads.fe_model.Increment: its number, attempts, iterations,
 * time, time_increment, force, residuals and the C-contiguous float64 arrays
 * displacement, stress, strain, plastic_strain, alpha). It appends the
 * increment's message lines to job.msg, its status line to job.sta and a
 * field-output frame (32-byte header, the arrays as little-endian float64, the
 * padding) to job.odb, one write(2) per file, and rewrites the restart file
 * when due: the same bytes and calls as IncrementWriter in
 * tierbench.workloads.fe_proxy. Its written, seconds and restarts attributes
 * count the bytes, the seconds in the calls and the restart files so far.
 *
 * start(create, append, sync) -> (fds, bytes written, seconds)
 *
 *   create  sequence of (path, tuple of buffers): each file is created
 *           (or emptied), gets its buffers in one writev, is fsync'd with sync
 *           and closed (the deck, the pre-processor's files)
 *   append  the same for files opened for appending and kept open (job.msg,
 *           job.sta, job.odb with their headers): returns their descriptors
 *
 * finish(fds, texts, sync) -> (bytes written, seconds)
 *
 *   appends texts[i] to fds[i], fsyncs it with sync, closes it; all are
 *   closed, also after an error
 *
 * Why C: formatting and writing an increment's output from Python costs tens
 * of microseconds, a tenth of a small increment's solve; this costs a few.
 * The seconds counted are those in open, write, fsync and close. Errors raise
 * OSError with the errno (and path) of the failed call. Built at run time by
 * tierbench.native; on a big-endian machine the module refuses to load and
 * Python is used.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "files.h"

#define HEADER_BYTES 32
#define ARRAY_COUNT 5
#define MAX_PARTS 64

enum { NUMBER, ATTEMPTS, ITERATIONS, TIME, TIME_INCREMENT, FORCE, RESIDUALS, FIRST_ARRAY };
static const char *const NAMES[] = {
    "number", "attempts", "iterations", "time", "time_increment", "force", "residuals",
    "displacement", "stress", "strain", "plastic_strain", "alpha",
};
#define NAME_COUNT (FIRST_ARRAY + ARRAY_COUNT)
/* the attribute names, interned once */
static PyObject *names[NAME_COUNT];

/* zeros to pad frames with, grown to the largest padding asked for; a smaller
 * one is not freed, as a call in another thread may still be writing from it */
static char *zeros = NULL;
static size_t zeros_size = 0;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *padding_of(size_t size) {
    if (size > zeros_size) {
        char *grown = PyMem_Calloc(size, 1);
        if (grown == NULL) return NULL;
        zeros = grown;
        zeros_size = size;
    }
    return zeros;
}

/* ------------------------------------------------------------------ text
 *
 * The .msg and .sta lines are built with the helpers below instead of printf:
 * glibc's conversion of a double costs more than the rest of an increment's
 * output. put_e gives exactly what "%{width}.{precision}E" gives (in C and in
 * Python's format): the decimal digits of the double rounded to nearest,
 * ties to even. The fast path scales by an exact power of ten (one correctly
 * rounded operation, relative error below 2^-53) and rounds; where the scaled
 * value lies too close to a rounding tie to be sure of the direction, or the
 * power is not exact, it asks snprintf. tests/test_fe_proxy.py compares it
 * with Python's format on random and tie-prone doubles.
 */

typedef struct {
    char *at; /* where the next character goes; the caller sized the buffer */
} Text;

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#define MAX_E_PRECISION 15 /* beyond it, 10^precision is not below 2^53 */
#define FIELD_MAX 64       /* longest field put_e or put_int writes, for buffer sizes */

static void put(Text *t, const char *literal) {
    size_t n = strlen(literal);
    memcpy(t->at, literal, n);
    t->at += n;
}

/* right-aligned in width, as "%{width}lld" */
static void put_int(Text *t, long long value, int width) {
    char digits[24];
    int n = 0;
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    do {
        digits[n++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    int length = n + (value < 0);
    for (; width > length; width--) *t->at++ = ' ';
    if (value < 0) *t->at++ = '-';
    while (n) *t->at++ = digits[--n];
}

static void put_e_slow(Text *t, double x, int precision, int width) {
    char field[FIELD_MAX];
    if (isnan(x)) x = NAN; /* Python writes NAN whatever its sign bit, glibc -NAN */
    int n = snprintf(field, sizeof field, "%*.*E", width, precision, x);
    if (n < 0 || n >= (int)sizeof field) n = 0; /* cannot happen for width < 32 */
    memcpy(t->at, field, (size_t)n);
    t->at += n;
}

/* x as "%{width}.{precision}E" */
static void put_e(Text *t, double x, int precision, int width) {
    if (!isfinite(x) || x == 0.0 || precision < 0 || precision > MAX_E_PRECISION) {
        put_e_slow(t, x, precision, width);
        return;
    }
    double magnitude = fabs(x);
    int exponent = (int)floor(log10(magnitude));
    long long low = (long long)POW10[precision], high = 10 * low, mantissa = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        int shift = precision - exponent;
        if (shift < -22 || shift > 22) break;
        double scaled = shift >= 0 ? magnitude * POW10[shift] : magnitude / POW10[-shift];
        if (scaled < (double)low) {
            exponent--; /* log10 came out a hair high */
            continue;
        }
        if (scaled >= (double)high) {
            exponent++;
            continue;
        }
        double whole = floor(scaled), fraction = scaled - whole;
        /* scaled is off the exact product by at most scaled * 2^-53: closer to a tie
         * than a few times that, the direction of rounding is not known */
        if (fabs(fraction - 0.5) <= scaled * 1e-15) break;
        mantissa = (long long)whole + (fraction > 0.5);
        if (mantissa == high) {
            mantissa = low;
            exponent++;
        }
        break;
    }
    if (mantissa == 0) {
        put_e_slow(t, x, precision, width);
        return;
    }
    char field[FIELD_MAX], *end = field + sizeof field, *at = end;
    int e = exponent < 0 ? -exponent : exponent;
    do {
        *--at = (char)('0' + e % 10);
        e /= 10;
    } while (e);
    if (exponent > -10 && exponent < 10) *--at = '0'; /* at least two exponent digits */
    *--at = exponent < 0 ? '-' : '+';
    *--at = 'E';
    for (int k = 0; k < precision; k++) {
        *--at = (char)('0' + mantissa % 10);
        mantissa /= 10;
    }
    if (precision > 0) *--at = '.';
    *--at = (char)('0' + mantissa);
    if (x < 0) *--at = '-';
    int length = (int)(end - at);
    for (; width > length; width--) *t->at++ = ' ';
    memcpy(t->at, at, (size_t)length);
    t->at += length;
}

static int get_long(PyObject *inc, int name, long long *value) {
    PyObject *item = PyObject_GetAttr(inc, names[name]);
    if (item == NULL) return -1;
    *value = PyLong_AsLongLong(item);
    Py_DECREF(item);
    return (*value == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int get_double(PyObject *inc, int name, double *value) {
    PyObject *item = PyObject_GetAttr(inc, names[name]);
    if (item == NULL) return -1;
    *value = PyFloat_AsDouble(item);
    Py_DECREF(item);
    return (*value == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

typedef struct {
    long long number, attempts, iterations;
    double time, time_increment, force;
} Scalars;

/* the increment's .msg text into a new PyMem buffer; -1 with an exception set */
static int format_messages(PyObject *inc, const Scalars *s, char **text, size_t *used) {
    PyObject *residuals = PyObject_GetAttr(inc, names[RESIDUALS]);
    if (residuals == NULL) return -1;
    PyObject *list = PySequence_Fast(residuals, "residuals must be a sequence");
    Py_DECREF(residuals);
    if (list == NULL) return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(list);
    /* every line is under 64 characters plus two fields */
    *text = PyMem_Malloc((size_t)(count + 2) * (64 + 2 * FIELD_MAX));
    if (*text == NULL) {
        Py_DECREF(list);
        PyErr_NoMemory();
        return -1;
    }
    Text t = {*text};
    put(&t, " INCREMENT ");
    put_int(&t, s->number, 5);
    put(&t, " STARTS. ATTEMPT NUMBER ");
    put_int(&t, s->attempts, 2);
    put(&t, ", TIME INCREMENT ");
    put_e(&t, s->time_increment, 3, 0);
    put(&t, "\n");
    for (Py_ssize_t i = 0; i < count; i++) {
        double r = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(list, i));
        if (r == -1.0 && PyErr_Occurred()) {
            Py_DECREF(list);
            return -1;
        }
        put(&t, "   EQUILIBRIUM ITERATION ");
        put_int(&t, (long long)i, 3);
        put(&t, ": LARGEST RELATIVE RESIDUAL ");
        put_e(&t, r, 3, 0);
        put(&t, "\n");
    }
    Py_DECREF(list);
    put(&t, "   CONVERGED AFTER ");
    put_int(&t, s->iterations, 0);
    put(&t, " ITERATIONS; FORCE ");
    put_e(&t, s->force, 6, 0);
    put(&t, " N\n");
    *used = (size_t)(t.at - *text);
    return 0;
}

/* the increment's .sta line into sta (at least 4 * FIELD_MAX + 16 bytes); its length */
static size_t format_status(const Scalars *s, char *sta) {
    Text t = {sta};
    put(&t, "   1 ");
    put_int(&t, s->number, 5);
    put(&t, " ");
    put_int(&t, s->attempts, 3);
    put(&t, " ");
    put_int(&t, s->iterations, 6);
    put(&t, " ");
    put_e(&t, s->time, 5, 12);
    put(&t, " ");
    put_e(&t, s->time, 5, 12);
    put(&t, " ");
    put_e(&t, s->time_increment, 5, 12);
    put(&t, "\n");
    return (size_t)(t.at - sta);
}

/* the field arrays' data in frame[1..] (they are kept alive by owners); -1 with an
 * exception set. Through numpy's C API: the buffer protocol costs a fresh
 * array a format string and an allocation, more than writing it. */
static int hold_arrays(PyObject *inc, PyObject **owners, struct iovec *frame, size_t *frame_size) {
    for (int k = 0; k < ARRAY_COUNT; k++) {
        PyObject *item = owners[k] = PyObject_GetAttr(inc, names[FIRST_ARRAY + k]);
        int failed = item == NULL;
        if (!failed) {
            PyArrayObject *array = (PyArrayObject *)item;
            if (!PyArray_Check(item) || PyArray_TYPE(array) != NPY_FLOAT64 ||
                !PyArray_IS_C_CONTIGUOUS(array) || !PyArray_ISNOTSWAPPED(array)) {
                PyErr_Format(PyExc_TypeError, "%s must be a C-contiguous float64 array",
                             NAMES[FIRST_ARRAY + k]);
                Py_DECREF(item);
                failed = 1;
            } else {
                frame[k + 1].iov_base = PyArray_DATA(array);
                frame[k + 1].iov_len = (size_t)PyArray_NBYTES(array);
                *frame_size += frame[k + 1].iov_len;
            }
        }
        if (failed) {
            for (int j = 0; j < k; j++) Py_DECREF(owners[j]);
            return -1;
        }
    }
    return ARRAY_COUNT;
}

/* ------------------------------------------------------------------ Writer */

typedef struct {
    PyObject_HEAD
    int fds[3]; /* job.msg, job.sta, job.odb */
    Py_ssize_t frame_bytes, restart_bytes;
    long long restart_interval;
    int sync, restart_sync;
    PyObject *restart; /* bytes path, or None */
    Py_ssize_t written;
    double seconds;
    long long restarts;
} Writer;

static int Writer_init(Writer *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"fds", "frame_bytes", "sync", "restart", "restart_interval",
                               "restart_bytes", "restart_sync", NULL};
    PyObject *restart;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "(iii)npOLnp", keywords, &self->fds[0],
                                     &self->fds[1], &self->fds[2], &self->frame_bytes,
                                     &self->sync, &restart, &self->restart_interval,
                                     &self->restart_bytes, &self->restart_sync))
        return -1;
    if (self->frame_bytes < 0 || self->restart_bytes < 0 || self->restart_interval < 0) {
        PyErr_SetString(PyExc_ValueError, "sizes and the restart interval must not be negative");
        return -1;
    }
    if (restart == Py_None)
        Py_INCREF(restart);
    else if (!PyUnicode_FSConverter(restart, &restart)) /* a new bytes reference */
        return -1;
    Py_XSETREF(self->restart, restart);
    self->written = 0;
    self->seconds = 0.0;
    self->restarts = 0;
    return 0;
}

static void Writer_dealloc(Writer *self) {
    Py_XDECREF(self->restart);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* writer(inc): one increment's output, and the restart file when it is due */
static PyObject *Writer_call(Writer *self, PyObject *args, PyObject *kwargs) {
    PyObject *inc;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)
        return PyErr_Format(PyExc_TypeError, "a Writer takes the increment alone");
    if (!PyArg_UnpackTuple(args, "Writer", 1, 1, &inc)) return NULL;
    Scalars s;
    if (get_long(inc, NUMBER, &s.number) || get_long(inc, ATTEMPTS, &s.attempts) ||
        get_long(inc, ITERATIONS, &s.iterations) || get_double(inc, TIME, &s.time) ||
        get_double(inc, TIME_INCREMENT, &s.time_increment) || get_double(inc, FORCE, &s.force))
        return NULL;
    if (s.number < 0 || s.number > UINT32_MAX)
        return PyErr_Format(PyExc_ValueError, "increment number %lld out of range", s.number);
    int restart_due = self->restart != Py_None && self->restart_interval > 0 &&
                      s.number % self->restart_interval == 0;

    char sta[6 * FIELD_MAX + 32];
    size_t sta_len = format_status(&s, sta);
    char *msg = NULL;
    size_t msg_len = 0;
    if (format_messages(inc, &s, &msg, &msg_len) != 0) {
        PyMem_Free(msg);
        return NULL;
    }

    unsigned char header[HEADER_BYTES] = {'F', 'R', 'M', '1'};
    uint32_t number32 = (uint32_t)s.number;
    memcpy(header + 4, &number32, 4);
    memcpy(header + 8, &s.time, 8);
    memcpy(header + 16, &s.force, 8);
    PyObject *owners[ARRAY_COUNT];
    struct iovec frame[ARRAY_COUNT + 2];
    frame[0].iov_base = header;
    frame[0].iov_len = HEADER_BYTES;
    size_t frame_size = HEADER_BYTES;
    if (hold_arrays(inc, owners, frame, &frame_size) < 0) {
        PyMem_Free(msg);
        return NULL;
    }
    size_t frame_bytes = (size_t)self->frame_bytes, restart_bytes = (size_t)self->restart_bytes;
    size_t padding = frame_bytes > frame_size ? frame_bytes - frame_size : 0;
    size_t restart_padding = restart_bytes > frame_size ? restart_bytes - frame_size : 0;
    char *pad = padding_of(padding > restart_padding ? padding : restart_padding);
    if (pad == NULL) PyErr_NoMemory();

    const int *fds = self->fds;
    const char *restart_path = restart_due ? PyBytes_AS_STRING(self->restart) : NULL;
    int sync_files = self->sync, restart_sync = self->restart_sync;
    Py_ssize_t written = 0, done = 0;
    double seconds = 0.0;
    int saved = 0, restart_failed = 0;
    if (pad != NULL) {
        Py_BEGIN_ALLOW_THREADS
        double start = now();
        struct iovec text = {msg, msg_len};
        done = write_all(fds[0], &text, 1);
        if (done >= 0) {
            written += done;
            text.iov_base = sta;
            text.iov_len = sta_len;
            done = write_all(fds[1], &text, 1);
        }
        if (done >= 0) {
            written += done;
            frame[ARRAY_COUNT + 1].iov_base = pad;
            frame[ARRAY_COUNT + 1].iov_len = padding;
            struct iovec copy[ARRAY_COUNT + 2];
            memcpy(copy, frame, sizeof frame);
            done = write_all(fds[2], copy, padding ? ARRAY_COUNT + 2 : ARRAY_COUNT + 1);
        }
        if (done >= 0) {
            written += done;
            if (sync_files && (fsync(fds[0]) != 0 || fsync(fds[1]) != 0 || fsync(fds[2]) != 0))
                done = -1;
        }
        if (done >= 0 && restart_path != NULL) {
            frame[ARRAY_COUNT + 1].iov_len = restart_padding;
            done = write_file(restart_path, frame,
                              restart_padding ? ARRAY_COUNT + 2 : ARRAY_COUNT + 1, restart_sync);
            if (done >= 0)
                written += done;
            else
                restart_failed = 1;
        }
        if (done < 0) saved = errno;
        seconds = now() - start;
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < ARRAY_COUNT; k++) Py_DECREF(owners[k]);
    PyMem_Free(msg);
    if (pad == NULL) return NULL;
    self->written += written;
    self->seconds += seconds;
    if (saved) {
        errno = saved;
        return restart_failed ? PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, self->restart)
                              : PyErr_SetFromErrno(PyExc_OSError);
    }
    self->restarts += restart_due;
    Py_RETURN_NONE;
}

static PyMemberDef Writer_members[] = {
    {"written", T_PYSSIZET, offsetof(Writer, written), READONLY, "bytes written so far"},
    {"seconds", T_DOUBLE, offsetof(Writer, seconds), READONLY, "seconds in the calls so far"},
    {"restarts", T_LONGLONG, offsetof(Writer, restarts), READONLY, "restart files written"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "_feio.Writer",
    .tp_doc = PyDoc_STR("Writer(fds, frame_bytes, sync, restart, restart_interval, restart_bytes, "
                        "restart_sync): called with each converged increment"),
    .tp_basicsize = sizeof(Writer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Writer_init,
    .tp_dealloc = (destructor)Writer_dealloc,
    .tp_call = (ternaryfunc)Writer_call,
    .tp_members = Writer_members,
};

/* ------------------------------------------------------------------ start, finish */

/* (path, tuple of buffers): the path as a new bytes reference (a str is encoded
 * as os.fsencode does) and the buffers held in views; -1 with an exception set */
static int hold_entry(PyObject *entry, PyObject **name, Py_buffer *views, struct iovec *iov,
                      Py_ssize_t *count) {
    PyObject *parts;
    *name = NULL;
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 ||
        !PyTuple_Check(parts = PyTuple_GET_ITEM(entry, 1))) {
        PyErr_SetString(PyExc_TypeError, "files hold (path, tuple of buffers)");
        return -1;
    }
    *count = PyTuple_GET_SIZE(parts);
    if (*count > MAX_PARTS) {
        PyErr_Format(PyExc_ValueError, "more than %d parts", MAX_PARTS);
        return -1;
    }
    if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(entry, 0), name)) return -1;
    for (Py_ssize_t k = 0; k < *count; k++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(parts, k), &views[k], PyBUF_SIMPLE) != 0) {
            while (k > 0) PyBuffer_Release(&views[--k]);
            Py_CLEAR(*name);
            return -1;
        }
        iov[k].iov_base = views[k].buf;
        iov[k].iov_len = (size_t)views[k].len;
    }
    return 0;
}

/* start(create, append, sync) -> (fds, bytes written, seconds)
 *
 * create: (path, buffers) of files made whole (created or emptied, written,
 * fsync'd with sync, closed): the deck and the pre-processor's files. append:
 * (path, buffers) of files opened for appending, written and kept open: their
 * descriptors are returned, in order. On an error every descriptor opened is
 * closed again and OSError names the path. */
static PyObject *start(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *create, *append;
    int sync_files;
    if (!PyArg_ParseTuple(args, "OOp", &create, &append, &sync_files)) return NULL;
    PyObject *made = PySequence_Fast(create, "create must be a sequence");
    if (made == NULL) return NULL;
    PyObject *kept = PySequence_Fast(append, "append must be a sequence");
    if (kept == NULL) {
        Py_DECREF(made);
        return NULL;
    }
    Py_ssize_t made_count = PySequence_Fast_GET_SIZE(made);
    Py_ssize_t kept_count = PySequence_Fast_GET_SIZE(kept);
    PyObject *fds = PyTuple_New(kept_count);
    Py_ssize_t written = 0, opened = 0;
    double seconds = 0.0;
    int failed = fds == NULL;
    for (Py_ssize_t i = 0; !failed && i < made_count + kept_count; i++) {
        int appending = i >= made_count;
        PyObject *entry = appending ? PySequence_Fast_GET_ITEM(kept, i - made_count)
                                    : PySequence_Fast_GET_ITEM(made, i);
        PyObject *name;
        Py_buffer views[MAX_PARTS];
        struct iovec iov[MAX_PARTS];
        Py_ssize_t count;
        if (hold_entry(entry, &name, views, iov, &count) != 0) {
            failed = 1;
            break;
        }
        const char *path = PyBytes_AS_STRING(name);
        Py_ssize_t done = -1;
        int fd = -1, saved = 0;
        Py_BEGIN_ALLOW_THREADS
        double began = now();
        if (!appending) {
            done = write_file(path, iov, (int)count, sync_files);
        } else {
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
            if (fd >= 0) {
                done = write_all(fd, iov, (int)count);
                if (done < 0) {
                    saved = errno;
                    close(fd);
                    errno = saved;
                }
            }
        }
        if (done < 0) saved = errno;
        seconds += now() - began;
        Py_END_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < count; k++) PyBuffer_Release(&views[k]);
        if (saved) {
            errno = saved;
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, name);
        }
        Py_DECREF(name);
        if (saved) {
            failed = 1;
            break;
        }
        written += done;
        if (appending) {
            PyObject *number = PyLong_FromLong(fd);
            if (number == NULL) {
                close(fd);
                failed = 1;
                break;
            }
            PyTuple_SET_ITEM(fds, opened++, number);
        }
    }
    Py_DECREF(made);
    Py_DECREF(kept);
    if (failed) {
        for (Py_ssize_t k = 0; k < opened; k++) close((int)PyLong_AsLong(PyTuple_GET_ITEM(fds, k)));
        Py_XDECREF(fds);
        return NULL;
    }
    return Py_BuildValue("(Nnd)", fds, written, seconds);
}

/* finish(fds, texts, sync) -> (bytes written, seconds)
 *
 * Appends texts[i] (a buffer, maybe empty) to fds[i], fsyncs it with sync and
 * closes it; every descriptor is closed, also after an error, and the first
 * error raises OSError. */
static PyObject *finish(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *fds, *texts;
    int sync_files;
    if (!PyArg_ParseTuple(args, "O!O!p", &PyTuple_Type, &fds, &PyTuple_Type, &texts, &sync_files))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(fds);
    if (PyTuple_GET_SIZE(texts) != count || count > MAX_PARTS)
        return PyErr_Format(PyExc_ValueError, "one text per descriptor, at most %d", MAX_PARTS);
    int numbers[MAX_PARTS];
    Py_buffer views[MAX_PARTS];
    Py_ssize_t held = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        numbers[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(fds, i));
        if (numbers[i] == -1 && PyErr_Occurred()) return NULL;
    }
    for (; held < count; held++)
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(texts, held), &views[held], PyBUF_SIMPLE) != 0)
            break;
    int failed_hold = held < count, saved = 0;
    Py_ssize_t written = 0;
    double seconds = 0.0;
    Py_BEGIN_ALLOW_THREADS
    double began = now();
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!failed_hold && !saved && views[i].len > 0) {
            struct iovec text = {views[i].buf, (size_t)views[i].len};
            Py_ssize_t done = write_all(numbers[i], &text, 1);
            if (done < 0)
                saved = errno;
            else
                written += done;
        }
        if (!failed_hold && !saved && sync_files && fsync(numbers[i]) != 0) saved = errno;
        if (close(numbers[i]) != 0 && !saved) saved = errno;
    }
    seconds = now() - began;
    Py_END_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < held; k++) PyBuffer_Release(&views[k]);
    if (failed_hold) return NULL;
    if (saved) {
        errno = saved;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("(nd)", written, seconds);
}

static PyObject *format_e(PyObject *self, PyObject *args) {
    (void)self;
    double x;
    int precision, width;
    if (!PyArg_ParseTuple(args, "dii", &x, &precision, &width)) return NULL;
    if (precision < 0 || precision > 30 || width < 0 || width > 30)
        return PyErr_Format(PyExc_ValueError, "precision and width must be 0 to 30");
    char field[2 * FIELD_MAX];
    Text t = {field};
    put_e(&t, x, precision, width);
    return PyUnicode_FromStringAndSize(field, t.at - field);
}

static PyMethodDef methods[] = {
    {"start", start, METH_VARARGS, "Make the job's files, open those kept open."},
    {"finish", finish, METH_VARARGS, "Last lines, fsync, close."},
    {"format_e", format_e, METH_VARARGS, "x as '%{width}.{precision}E' (for the tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_feio", NULL, -1, methods};

PyMODINIT_FUNC PyInit__feio(void) {
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "_feio writes little-endian frames by memcpy");
        return NULL;
    }
    for (int k = 0; k < NAME_COUNT; k++) {
        if (names[k] == NULL && (names[k] = PyUnicode_InternFromString(NAMES[k])) == NULL)
            return NULL;
    }
    import_array();
    if (PyType_Ready(&WriterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&WriterType);
    if (PyModule_AddObject(m, "Writer", (PyObject *)&WriterType) < 0) {
        Py_DECREF(&WriterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
