/* _foamio: one write time of an OpenFOAM writer, in one call from Python.
 *
 * write_time(files, fsync, mkdirs=1) -> (bytes written, folders made)
 *
 *   files   list or tuple of (bytes path, calls): each file is made as OpenFOAM's
 *           OFstream makes it (tierbench.workloads.cfd.foam_write.write_files says
 *           which calls and why): mkdir of its folder the way Foam::mkDir does it
 *           (EEXIST is success, ENOENT makes the parent first), a stat of <path>.gz
 *           and of <path>, open with O_TRUNC, then one writev per entry of calls (a
 *           tuple of buffers: what libstdc++'s filebuf hands the kernel at once), close
 *   fsync   true: fsync every file before closing it
 *   mkdirs  Foam::mkDir calls on each file's folder (the collated master makes two)
 *
 * format_ascii(values, components, width) -> bytes
 *
 *   values  a C-contiguous buffer of float64, components per row
 *   Each number goes through libstdc++'s `ostream << double`, as in OpenFOAM's
 *   ascii Ostream (foamtext.cpp): that is most of what an ascii write costs a
 *   solver. "%+.<width-7>e", so every number is `width` characters (magnitudes
 *   below 1e-99 written as zero, above 9.9..e99 clipped); rows of one number
 *   end in a newline, vectors are "(a b c)\n". The bytes are those
 *   tierbench.workloads.cfd.foam.format_numbers makes in Python.
 *
 * The same system calls tierbench.workloads.cfd.foam makes in Python, with no
 * interpreter between them: with 1-cell fields on tmpfs the Python around the
 * calls cost as much as the calls. Errors raise OSError naming the path, as
 * os.mkdir and os.open do. Built at run time by tierbench.native.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "files.h"
#include "foamtext.h"

#define MAX_PARTS 64

static PyObject *raise_for(const char *path) {
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
    return NULL;
}

/* Foam::mkDir: mkdir; an existing folder is success; a missing parent is made first.
 * Returns the folders made, or -1 with errno set. */
static int foam_mkdir(char *path) {
    if (mkdir(path, 0777) == 0) return 1;
    if (errno == EEXIST) return 0;
    if (errno != ENOENT) return -1;
    char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path) return -1;
    *slash = '\0';
    int made = foam_mkdir(path);
    *slash = '/';
    if (made < 0) return -1;
    if (mkdir(path, 0777) != 0) return errno == EEXIST ? made : -1;
    return made + 1;
}

/* OFstream's look for a compressed or plain file of the same name before it opens */
static void probe(const char *path) {
    char gz[PATH_MAX];
    struct stat st;
    if (snprintf(gz, sizeof gz, "%s.gz", path) < (int)sizeof gz) stat(gz, &st);
    stat(path, &st);
}

/* the buffers of one call as iovecs; returns how many, or -1 with a Python error set */
static Py_ssize_t gather(PyObject *call, Py_buffer *views, struct iovec *iov) {
    if (!PyTuple_Check(call)) {
        PyErr_SetString(PyExc_TypeError, "a call is a tuple of buffers");
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(call);
    if (count > MAX_PARTS) {
        PyErr_Format(PyExc_ValueError, "more than %d buffers in one call", MAX_PARTS);
        return -1;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(call, k), &views[k], PyBUF_SIMPLE) != 0) {
            for (Py_ssize_t j = 0; j < k; j++) PyBuffer_Release(&views[j]);
            return -1;
        }
        iov[k].iov_base = views[k].buf;
        iov[k].iov_len = (size_t)views[k].len;
    }
    return count;
}

/* one file: folder, probes, open, one writev per call, fsync, close; -1 with a Python error */
static Py_ssize_t write_one(const char *file, PyObject *calls, int sync_file, int mkdirs,
                            int *made) {
    char folder[PATH_MAX];
    const char *slash = strrchr(file, '/');
    if (slash != NULL && slash != file) {
        size_t len = (size_t)(slash - file);
        if (len >= sizeof folder) {
            PyErr_SetString(PyExc_ValueError, "path too long");
            return -1;
        }
        memcpy(folder, file, len);
        folder[len] = '\0';
        for (int k = 0; k < mkdirs; k++) {
            int done;
            Py_BEGIN_ALLOW_THREADS
            done = foam_mkdir(folder);
            Py_END_ALLOW_THREADS
            if (done < 0) {
                raise_for(folder);
                return -1;
            }
            *made += done;
        }
    }
    int fd;
    Py_BEGIN_ALLOW_THREADS
    probe(file);
    fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    Py_END_ALLOW_THREADS
    if (fd < 0) {
        raise_for(file);
        return -1;
    }
    Py_ssize_t written = 0;
    int saved = 0;
    Py_buffer views[MAX_PARTS];
    struct iovec iov[MAX_PARTS];
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(calls) && !saved; i++) {
        Py_ssize_t count = gather(PyTuple_GET_ITEM(calls, i), views, iov);
        if (count < 0) {
            close(fd);
            return -1;
        }
        Py_ssize_t done;
        Py_BEGIN_ALLOW_THREADS
        done = write_all(fd, iov, (int)count);
        if (done < 0) saved = errno;
        Py_END_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < count; k++) PyBuffer_Release(&views[k]);
        if (done > 0) written += done;
    }
    Py_BEGIN_ALLOW_THREADS
    if (!saved && sync_file && fsync(fd) != 0) saved = errno;
    if (close(fd) != 0 && !saved) saved = errno;
    Py_END_ALLOW_THREADS
    if (saved) {
        errno = saved;
        raise_for(file);
        return -1;
    }
    return written;
}

static PyObject *write_time(PyObject *self, PyObject *args) {
    PyObject *files;
    int fsync_files, mkdirs = 1;
    if (!PyArg_ParseTuple(args, "Op|i", &files, &fsync_files, &mkdirs)) return NULL;
    if (!PyList_Check(files) && !PyTuple_Check(files))
        return PyErr_Format(PyExc_TypeError, "files must be a list or a tuple");
    Py_ssize_t written = 0;
    int made = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(files); i++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(files, i), *name, *calls;
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 ||
            !PyBytes_Check(name = PyTuple_GET_ITEM(entry, 0)) ||
            !PyTuple_Check(calls = PyTuple_GET_ITEM(entry, 1)))
            return PyErr_Format(PyExc_TypeError, "files hold (bytes path, tuple of calls)");
        Py_ssize_t done = write_one(PyBytes_AS_STRING(name), calls, fsync_files, mkdirs, &made);
        if (done < 0) return NULL;
        written += done;
    }
    return Py_BuildValue("(ni)", written, made);
}

static PyObject *format_ascii(PyObject *self, PyObject *args) {
    Py_buffer view;
    int components, width;
    if (!PyArg_ParseTuple(args, "y*ii", &view, &components, &width)) return NULL;
    Py_ssize_t count = view.len / (Py_ssize_t)sizeof(double);
    if (width < 8 || width > 40 || components < 1 || view.len % (Py_ssize_t)sizeof(double) ||
        count % components) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError,
                            "format_ascii: %zd bytes of doubles in rows of %d, width %d "
                            "(8 to 40)",
                            view.len, components, width);
    }
    char nines[48] = "9.";
    memset(nines + 2, '9', (size_t)(width - 7));
    strcpy(nines + 2 + (width - 7), "e99");
    double largest = strtod(nines, NULL);
    Py_ssize_t rows = count / components;
    Py_ssize_t line = components == 1 ? width + 1 : (Py_ssize_t)components * (width + 1) + 2;
    PyObject *out = PyBytes_FromStringAndSize(NULL, rows * line);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = foam_stream_numbers(view.buf, (long)rows, components, width, largest,
                             PyBytes_AS_STRING(out), (size_t)(rows * line));
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (!ok) {
        Py_DECREF(out);
        return PyErr_Format(PyExc_ValueError, "format_ascii: a number is not %d wide", width);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"write_time", write_time, METH_VARARGS, "Make a time folder's files as OFstream does."},
    {"format_ascii", format_ascii, METH_VARARGS, "Numbers as an ascii Ostream prints them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_foamio", NULL, -1, methods};

PyMODINIT_FUNC PyInit__foamio(void) { return PyModule_Create(&module); }
