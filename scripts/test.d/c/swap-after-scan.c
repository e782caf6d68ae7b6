/* LD_PRELOADed into `photogate import` by import-race.sh. When the importer creates its temp
 * copy in the library (an open with O_CREAT|O_EXCL of a path under $RT_TMPDIR), that is, after
 * it scanned the source and before it copies it, the source $RT_SOURCE is rewritten in place with
 * the bytes of $RT_WITH (same size, same inode): a file changed between the scan and the copy,
 * as a watcher on the library's tmp/ did it (issue 34). Once.
 * And when the importer opens $RT_FIFO_AT (a regular file when the walk saw it), it is replaced by
 * a FIFO first: a file swapped between the walk's stat and the open. */
#include "shim-common.h"

static void fifo_at(const char *path) {
    const char *at = getenv("RT_FIFO_AT");
    if (!at || !path || strcmp(path, at) || getenv("RT_FIFOED")) return;
    setenv("RT_FIFOED", "1", 1);
    unlink(at);
    mkfifo(at, 0600);
    logf_("made %s a FIFO\n", at);
}

static void swap_once(const char *path, int flags) {
    const char *dir = getenv("RT_TMPDIR"), *src = getenv("RT_SOURCE"), *with = getenv("RT_WITH");
    if (!dir || !src || !with || getenv("RT_SWAPPED") || !path) return;
    if ((flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL) || strncmp(path, dir, strlen(dir))) return;
    setenv("RT_SWAPPED", "1", 1);
    int in = open(with, O_RDONLY | O_CLOEXEC), out = open(src, O_WRONLY | O_CLOEXEC);
    char buf[1 << 16];
    ssize_t n, at = 0;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0) { pwrite(out, buf, (size_t)n, at); at += n; }
    if (in >= 0) close(in);
    if (out >= 0) { fsync(out); close(out); }
    logf_("swapped %s after the scan (%zd bytes)\n", src, at);
}

/* Both of libc's names for open(2), one body: the shim's work, then the real call. */
static int hooked(const char *sym, const char *path, int flags, va_list ap) {
    int (*real)(const char *, int, ...) = dlsym(RTLD_NEXT, sym);
    mode_t mode = (flags & O_CREAT) ? (mode_t)va_arg(ap, int) : 0;
    int saved = errno;
    fifo_at(path);
    swap_once(path, flags);
    errno = saved;
    return real(path, flags, mode);
}

int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int fd = hooked("open", path, flags, ap);
    va_end(ap);
    return fd;
}

int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    int fd = hooked("open64", path, flags, ap);
    va_end(ap);
    return fd;
}
