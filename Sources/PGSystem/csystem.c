#define _GNU_SOURCE
#include <spawn.h>
#include "csystem.h"
#include <errno.h>

int pg_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

#include <fcntl.h>
#include <unistd.h>
#include <malloc.h>

int pg_syncfs(int fd) {
    return syncfs(fd);
}

#include <sys/vfs.h>

int pg_is_fuse(const char *path) {
    struct statfs s;
    if (statfs(path, &s) != 0) return -1;
    return s.f_type == 0x65735546 ? 1 : 0;   /* FUSE_SUPER_MAGIC */
}

#include <sys/syscall.h>

#include <sys/prctl.h>

void pg_set_thread_name(const char *name) {
    prctl(PR_SET_NAME, name, 0, 0, 0);
}

int pg_gettid(void) {
    return (int)syscall(SYS_gettid);
}

long pg_fs_type(int fd) {
    struct statfs s;
    if (fstatfs(fd, &s) != 0) return -1;
    return (long)s.f_type;
}

int pg_malloc_trim(void) {
    return malloc_trim(0);
}

int pg_start_writeback(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

int pg_start_writeback_range(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

#include <sys/xattr.h>

int pg_fsetxattr(int fd, const char *name, const void *value, unsigned long size) {
    return fsetxattr(fd, name, value, size, 0);
}

long pg_getxattr(const char *path, const char *name, void *value, unsigned long size) {
    return getxattr(path, name, value, size);
}

int pg_fremovexattr(int fd, const char *name) {
    return fremovexattr(fd, name);
}

int pg_removexattr(const char *path, const char *name) {
    return removexattr(path, name);
}

#include <sys/stat.h>

int pg_open_in_folder(const char *dir, const char *sub, const char *name, int flags, unsigned int mode) {
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0) return -1;
    if (sub != NULL) {
        if ((flags & O_CREAT) && mkdirat(d, sub, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            close(d);
            errno = e;
            return -1;
        }
        int s = openat(d, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(d);
        if (s < 0) {
            errno = e;
            return -1;
        }
        d = s;
    }
    int fd = openat(d, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, (mode_t)mode);
    int e = errno;
    close(d);
    if (fd < 0) {
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (!(flags & O_NONBLOCK)) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

#include <sqlite3.h>

int pg_sqlite_keep_wal(void *db) {
    // sqlite3_db_config is variadic: Swift cannot call it.
    // The WAL file stays when the last connection closes (emptied, not deleted: see
    // journal_size_limit in Library.configuration), so that the next process finds it and opens
    // without a write of its own (GRDB makes one when the file is missing).
    int persist = 1;
    sqlite3_file_control((sqlite3 *)db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    return sqlite3_db_config((sqlite3 *)db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}

int pg_sqlite_checkpoint_on_close(void *db) {
    return sqlite3_db_config((sqlite3 *)db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, (int *)0);
}

#include <sys/syscall.h>

int pg_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

#include <poll.h>
#include <time.h>

int pg_pidfd_wait(int pidfd, int timeout_ms) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long spent = (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000;
        int left = spent >= timeout_ms ? 0 : (int)(timeout_ms - spent);
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int n = poll(&p, 1, left);
        if (n > 0) return 1;
        if (n == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

#include <sys/stat.h>

int pg_mount_identity(int fd, long long *mount_id, unsigned *dev_major, unsigned *dev_minor) {
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) != 0) return -1;
    if (!(stx.stx_mask & STATX_MNT_ID)) { errno = ENOSYS; return -1; }
    *mount_id = (long long)stx.stx_mnt_id;
    *dev_major = stx.stx_dev_major;
    *dev_minor = stx.stx_dev_minor;
    return 0;
}

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

// --- photogate run: termination signals relayed to the sandboxed command -----------------------
// Only the catching is here: a signal handler must be async-signal-safe, and this one does nothing
// but write the signal's number to a pipe. Reading that pipe, waiting for bubblewrap and relaying
// (and reading bubblewrap's --info-fd JSON) is Swift's (photogate's RunSpawn.swift).

static const int pg_relayed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define PG_RELAYED (int)(sizeof pg_relayed / sizeof pg_relayed[0])
static int pg_relay_pipe[2] = {-1, -1};
static struct sigaction pg_relay_old[PG_RELAYED];
static sigset_t pg_relay_old_mask;

static void pg_relay_handler(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (pg_relay_pipe[1] >= 0) { ssize_t r = write(pg_relay_pipe[1], &b, 1); (void)r; }
    errno = saved;
}

int pg_relay_begin(void) {
    if (pg_relay_pipe[0] >= 0) { errno = EBUSY; return -1; }
    if (pipe2(pg_relay_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pg_relay_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < PG_RELAYED; i++) {
        sigaction(pg_relayed[i], NULL, &pg_relay_old[i]);
        // Ignored when run started (a shell's background job ignores SIGINT and SIGQUIT, so that a
        // ^C at the terminal does not reach it): left ignored, here and in the command.
        if (pg_relay_old[i].sa_handler == SIG_IGN) continue;
        sigaction(pg_relayed[i], &sa, NULL);
    }
    // A caller may have them blocked (a test runner, a supervisor; the mask survives exec): then
    // they would stay pending and never be relayed. This thread takes them.
    sigset_t relayed;
    sigemptyset(&relayed);
    for (int i = 0; i < PG_RELAYED; i++) sigaddset(&relayed, pg_relayed[i]);
    pthread_sigmask(SIG_UNBLOCK, &relayed, &pg_relay_old_mask);
    return 0;
}

void pg_relay_end(void) {
    if (pg_relay_pipe[0] < 0) return;
    pthread_sigmask(SIG_SETMASK, &pg_relay_old_mask, NULL);
    for (int i = 0; i < PG_RELAYED; i++) sigaction(pg_relayed[i], &pg_relay_old[i], NULL);
    close(pg_relay_pipe[0]);
    close(pg_relay_pipe[1]);
    pg_relay_pipe[0] = pg_relay_pipe[1] = -1;
}

int pg_signal_ignored(int sig) {
    struct sigaction old;
    return sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
}

int pg_relay_fd(void) {
    return pg_relay_pipe[0];
}

#include <linux/openat2.h>
#include <stdio.h>

int pg_openat_no_symlinks(int dirfd, const char *path, int flags) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (unsigned long long)(flags | O_CLOEXEC);
    how.resolve = RESOLVE_NO_SYMLINKS | (dirfd == AT_FDCWD ? 0 : RESOLVE_BENEATH);
    long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd < 0 && errno == ENOSYS) return openat(dirfd, path, flags | O_CLOEXEC | O_NOFOLLOW);
    return (int)fd;
}

long pg_fd_path(int fd, char *buf, unsigned long size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, size - 1);
    if (n < 0) return -1;
    if ((unsigned long)n >= size - 1) { errno = ENAMETOOLONG; return -1; }
    buf[n] = '\0';
    return (long)n;
}

int pg_open_original(const char *path, int reference) {
    // O_NONBLOCK: a FIFO put in a referenced original's place must not hold the opener (the
    // caller refuses what is not a regular file); it changes nothing for regular files.
    if (reference) return pg_openat_no_symlinks(AT_FDCWD, path, O_RDONLY | O_NONBLOCK);
    return open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
}

long long pg_copy_fd(int src, int dst) {
    loff_t in = 0, out = 0;
    for (;;) {
        ssize_t n = copy_file_range(src, &in, dst, &out, 1 << 30, 0);
        if (n > 0) continue;
        if (n == 0) return (long long)in;
        if (errno == EINTR) continue;
        // Not across these filesystems (or not at all): copied through a buffer from where it got to.
        if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) break;
        return -1;
    }
    char buf[1 << 16];
    for (;;) {
        ssize_t n = pread(src, buf, sizeof buf, in);
        if (n < 0) { if (errno == EINTR) continue; return -1; }
        if (n == 0) return (long long)in;
        ssize_t done = 0;
        while (done < n) {
            ssize_t w = pwrite(dst, buf + done, (size_t)(n - done), out + done);
            if (w < 0) { if (errno == EINTR) continue; return -1; }
            done += w;
        }
        in += n;
        out += n;
    }
}

#include <sys/xattr.h>

int pg_has_access_acl(const char *path) {
    return lgetxattr(path, "system.posix_acl_access", NULL, 0) > 0 ? 1 : 0;
}

#include <linux/keyctl.h>

long pg_join_new_session_keyring(void) {
    return syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, (char *)0);
}

#include <sys/mman.h>

int pg_memfd(const char *name) {
    return (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC);
}

int pg_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}
