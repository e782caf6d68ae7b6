/* LD_PRELOADed into a photogate daemon by group-sync-kill.sh. The closes that arrive together
 * share one sync of the catalog's write-ahead log (`Library.syncLog`, SyncCoalescer): one of them
 * runs the fdatasync while the others wait for it or for the next. Once the file $RT_ARM exists,
 * the $RT_HOLD_AT-th such sync after it (default 3) never returns: the shim creates $RT_HELD and
 * waits there until the daemon is killed, so that the test kills it in the middle of a group.
 * Only the daemon's own log syncs are counted: an fdatasync of a descriptor of the log opened
 * read-only (SQLite's own descriptors of it are read-write). Logs to $RT_LOG.
 *
 * A kill keeps what the page cache holds, so it alone cannot show a close told "saved" before
 * its row was durable. So each counted sync first copies the log as it is (pread from the same
 * descriptor) to $RT_SNAP/wal.N, and logs "log sync N done" once the real fdatasync returned:
 * wal.N of the last sync done is what a power cut at the kill would have left of the log. */
#include "shim-common.h"
#include <pthread.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int seen = 0;

/* Copies the file behind fd, as it is now, to DIR/wal.N. */
static void snapshot(int fd, int n) {
    const char *dir = getenv("RT_SNAP");
    if (!dir) return;
    char p[4096];
    snprintf(p, sizeof p, "%s/wal.%d", dir, n);
    int out = open(p, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (out < 0) { logf_("snapshot %d: cannot create %s\n", n, p); return; }
    static char buf[1 << 16];
    off_t off = 0;
    for (;;) {
        ssize_t got = pread(fd, buf, sizeof buf, off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (write(out, buf, (size_t)got) != got) { logf_("snapshot %d: short write\n", n); break; }
        off += got;
    }
    close(out);
}

static int is_log_sync(int fd) {
    char p[64], t[4096];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, t, sizeof t - 1);
    if (n <= 0) return 0;
    t[n] = 0;
    static const char suffix[] = ".sqlite-wal";
    size_t len = (size_t)n, sl = sizeof suffix - 1;
    if (len < sl || strcmp(t + len - sl, suffix) != 0) return 0;
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_ACCMODE) == O_RDONLY;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = dlsym(RTLD_NEXT, "fdatasync");
    const char *arm = getenv("RT_ARM"), *held = getenv("RT_HELD");
    if (arm && held && is_log_sync(fd) && access(arm, F_OK) == 0) {
        const char *at = getenv("RT_HOLD_AT");
        int hold_at = at ? atoi(at) : 3;
        /* Under the lock: the copy is of the log as this sync begins (one sync runs at a time
         * anyway, SyncCoalescer), and the static buffer is shared. */
        pthread_mutex_lock(&lock);
        int mine = ++seen;
        snapshot(fd, mine);
        pthread_mutex_unlock(&lock);
        logf_("log sync %d after arming\n", mine);
        if (mine == hold_at - 1) {
            /* The sync before the held one waits (up to 3 s) for a close to commit its row after
             * the copy was taken: that close asks for a sync while this one runs, and must not be
             * told saved by it (it would be missing from the copy put back). */
            struct stat st;
            off_t at = fstat(fd, &st) == 0 ? st.st_size : 0;
            int grew = 0;
            for (int i = 0; i < 3000 && !grew; i++) {
                if (fstat(fd, &st) == 0 && st.st_size > at) grew = 1;
                else { struct timespec ms = { 0, 1000000 }; nanosleep(&ms, NULL); }
            }
            logf_("log sync %d: %s\n", mine, grew ? "a row was committed after its copy" : "no row after its copy in 3 s");
        }
        if (mine == hold_at) {
            int h = open(held, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
            if (h >= 0) close(h);
            logf_("holding log sync %d until the daemon is killed\n", mine);
            for (;;) pause();
        }
        int r = real(fd);
        int saved = errno;
        if (r == 0) logf_("log sync %d done\n", mine);
        errno = saved;
        return r;
    }
    return real(fd);
}
