/* LD_PRELOADed into a photogate daemon by edit-release.sh. The kernel sends FUSE_RELEASE after
 * close(2) has returned, and another of the daemon's threads may serve the app's next open first.
 * This forces that order once: while the file $RT_ARM exists, the next RELEASE the daemon reads
 * is held (and $RT_ARM removed) until the OPEN read after it has been answered, or for 2 s if it
 * is not answered by then (a daemon that waits for the release). Logs what happened to $RT_LOG. */
#include "shim-common.h"
#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

enum { OP_OPEN = 14, OP_RELEASE = 18 };

static int fuse_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t answered = PTHREAD_COND_INITIALIZER;
static int holding = 0, open_seen = 0, open_answered = 0;
static uint64_t open_unique = 0;

static int is_fuse(int fd) {
    if (fd == fuse_fd) return 1;
    if (fuse_fd >= 0) return 0;
    char p[64], t[32];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, t, sizeof t - 1);
    if (n != 9 || memcmp(t, "/dev/fuse", 9)) return 0;
    fuse_fd = fd;
    return 1;
}

ssize_t read(int fd, void *buf, size_t count) {
    static ssize_t (*real)(int, void *, size_t);
    if (!real) real = dlsym(RTLD_NEXT, "read");
    ssize_t n = real(fd, buf, count);
    if (n < 40 || !is_fuse(fd)) return n;
    int saved = errno;
    uint32_t opcode;
    uint64_t unique;
    memcpy(&opcode, (char *)buf + 4, 4);
    memcpy(&unique, (char *)buf + 8, 8);
    const char *arm = getenv("RT_ARM");
    pthread_mutex_lock(&lock);
    if (opcode == OP_OPEN && holding && !open_seen) {
        open_seen = 1;
        open_unique = unique;
    } else if (opcode == OP_RELEASE && !holding && arm && unlink(arm) == 0) {
        holding = 1;
        open_seen = open_answered = 0;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2;
        int r = 0;
        while (!open_answered && r == 0) r = pthread_cond_timedwait(&answered, &lock, &until);
        logf_("release held: %s\n", open_answered ? "until the open after it was answered"
                                    : open_seen ? "2 s, the open after it unanswered" : "2 s, no open after it");
        holding = 0;
    }
    pthread_mutex_unlock(&lock);
    errno = saved;
    return n;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    static ssize_t (*real)(int, const struct iovec *, int);
    if (!real) real = dlsym(RTLD_NEXT, "writev");
    if (cnt > 0 && iov[0].iov_len >= 16 && is_fuse(fd)) {
        uint64_t unique;
        memcpy(&unique, (char *)iov[0].iov_base + 8, 8);
        pthread_mutex_lock(&lock);
        if (holding && open_seen && unique == open_unique) {
            open_answered = 1;
            pthread_cond_broadcast(&answered);
        }
        pthread_mutex_unlock(&lock);
    }
    return real(fd, iov, cnt);
}
