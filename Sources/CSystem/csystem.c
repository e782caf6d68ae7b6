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

int pg_open_direct_write(const char *path) {
    return open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
}

#include <sqlite3.h>

int pg_sqlite_keep_wal(void *db) {
    // sqlite3_db_config is variadic: Swift cannot call it.
    return sqlite3_db_config((sqlite3 *)db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}

#include <sys/syscall.h>

int pg_pidfd_open(int pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
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
