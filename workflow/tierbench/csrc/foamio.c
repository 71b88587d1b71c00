/* _foamio: one write time of an uncollated OpenFOAM rank, in one call from Python.
 *
 * write_time(folder, dirs, files, fsync) -> bytes written
 *
 *   folder  bytes, the time folder's path (<processor>/<time>)
 *   dirs    tuple of bytes, suffixes of folder to make in order (b"", b"/uniform", ...)
 *   files   list or tuple of (bytes path, tuple of buffers): each file is
 *           created (or emptied) and gets its buffers back to back, in one
 *           writev when the kernel takes it all
 *   fsync   true: fsync every file before closing it
 *
 * The same system calls tierbench.foam makes in Python (mkdir, open with
 * O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC and mode 0666, writev, fsync, close), with
 * no interpreter between them: with 1-cell fields on tmpfs the Python around
 * the calls cost as much as the calls. Errors raise OSError naming the path,
 * as os.mkdir and os.open do. Built at run time by tierbench.native.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "files.h"

#define MAX_PARTS 64

static PyObject *raise_for(PyObject *path) {
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
    return NULL;
}

static PyObject *write_time(PyObject *self, PyObject *args) {
    PyObject *folder, *dirs, *files;
    int fsync_files;
    if (!PyArg_ParseTuple(args, "O!O!Op", &PyBytes_Type, &folder, &PyTuple_Type, &dirs, &files,
                          &fsync_files))
        return NULL;
    if (!PyList_Check(files) && !PyTuple_Check(files))
        return PyErr_Format(PyExc_TypeError, "files must be a list or a tuple");
    const char *base = PyBytes_AS_STRING(folder);
    Py_ssize_t base_len = PyBytes_GET_SIZE(folder);
    char path[PATH_MAX];

    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dirs); i++) {
        PyObject *sub = PyTuple_GET_ITEM(dirs, i);
        if (!PyBytes_Check(sub)) return PyErr_Format(PyExc_TypeError, "dirs hold bytes");
        Py_ssize_t sub_len = PyBytes_GET_SIZE(sub);
        if (base_len + sub_len >= PATH_MAX) return PyErr_Format(PyExc_ValueError, "path too long");
        memcpy(path, base, (size_t)base_len);
        memcpy(path + base_len, PyBytes_AS_STRING(sub), (size_t)sub_len);
        path[base_len + sub_len] = '\0';
        int failed;
        Py_BEGIN_ALLOW_THREADS
        failed = mkdir(path, 0777);
        Py_END_ALLOW_THREADS
        if (failed != 0) {
            PyObject *name = PyBytes_FromStringAndSize(path, base_len + sub_len);
            if (name) raise_for(name);
            Py_XDECREF(name);
            return NULL;
        }
    }

    Py_ssize_t written = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(files); i++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(files, i), *name, *parts;
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2 ||
            !PyBytes_Check(name = PyTuple_GET_ITEM(entry, 0)) ||
            !PyTuple_Check(parts = PyTuple_GET_ITEM(entry, 1)))
            return PyErr_Format(PyExc_TypeError, "files hold (bytes path, tuple of buffers)");
        Py_ssize_t count = PyTuple_GET_SIZE(parts);
        if (count > MAX_PARTS) return PyErr_Format(PyExc_ValueError, "more than %d parts", MAX_PARTS);
        Py_buffer views[MAX_PARTS];
        struct iovec iov[MAX_PARTS];
        Py_ssize_t held = 0;
        for (; held < count; held++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(parts, held), &views[held], PyBUF_SIMPLE) != 0)
                break;
            iov[held].iov_base = views[held].buf;
            iov[held].iov_len = (size_t)views[held].len;
        }
        if (held < count) {
            for (Py_ssize_t k = 0; k < held; k++) PyBuffer_Release(&views[k]);
            return NULL;
        }
        const char *file = PyBytes_AS_STRING(name);
        Py_ssize_t done;
        int saved = 0;
        Py_BEGIN_ALLOW_THREADS
        done = write_file(file, iov, (int)count, fsync_files);
        if (done < 0) saved = errno;
        Py_END_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < held; k++) PyBuffer_Release(&views[k]);
        if (saved) {
            errno = saved;
            return raise_for(name);
        }
        written += done;
    }
    return PyLong_FromSsize_t(written);
}

static PyMethodDef methods[] = {
    {"write_time", write_time, METH_VARARGS, "Make a time folder and write its files."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_foamio", NULL, -1, methods};

PyMODINIT_FUNC PyInit__foamio(void) { return PyModule_Create(&module); }
