/* files.h: the file calls of tierbench's C helpers.
 *
 * write_all: writev until every byte is down. Short writes happen (a signal,
 * more than 2 GiB, a nearly full tier); empty parts are skipped, so nothing to
 * write is not taken for a stalled write. Returns the bytes written, or -1
 * with errno set. Included by
 * foamio.c, the one helper (fe_proxy makes its calls from Python, one per
 * system call); tierbench.native rebuilds a helper when this changes.
 */
#ifndef TIERBENCH_FILES_H
#define TIERBENCH_FILES_H

#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

static Py_ssize_t write_all(int fd, struct iovec *iov, int count) {
    Py_ssize_t total = 0;
    for (;;) {
        while (count > 0 && iov->iov_len == 0) {
            iov++;
            count--;
        }
        if (count == 0) break;
        ssize_t done = writev(fd, iov, count);
        if (done < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (done == 0) {
            errno = EIO;
            return -1;
        }
        total += done;
        while (count > 0 && (size_t)done >= iov->iov_len) {
            done -= (ssize_t)iov->iov_len;
            iov++;
            count--;
        }
        if (count > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= (size_t)done;
        }
    }
    return total;
}

#endif
