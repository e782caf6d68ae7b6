// Small pieces of glibc that Swift's Glibc module hides behind _GNU_SOURCE.
#ifndef PHOTOGATE_CSYSTEM_H
#define PHOTOGATE_CSYSTEM_H
#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np: close every descriptor >= from in the child.
int pg_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);

/// syncfs(2): writes back the whole filesystem holding fd (one journal commit for many files).
int pg_syncfs(int fd);

/// sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE): starts writing fd's dirty pages back, without
/// waiting, so a later syncfs or fsync has less to wait for.
int pg_start_writeback(int fd);
/// The same for the bytes [offset, offset + length) only.
int pg_start_writeback_range(int fd, long long offset, long long length);

/// 1 when `path` is on a FUSE filesystem (statfs f_type FUSE_SUPER_MAGIC), 0 when not, -1 when
/// statfs fails.
int pg_is_fuse(const char *path);

/// The f_type (superblock magic) of the filesystem `fd` is on, or -1 when fstatfs fails.
long pg_fs_type(int fd);

/// The calling thread's id (gettid(2)), as the kernel puts it in a FUSE request's pid.
int pg_gettid(void);

/// Names the calling thread (prctl PR_SET_NAME; the kernel keeps the first 15 bytes), as
/// /proc/PID/task/TID/comm, top -H and perf show it.
void pg_set_thread_name(const char *name);

/// malloc_trim(0) (malloc.h): gives the heap's free pages back to the kernel; 1 if it released any.
int pg_malloc_trim(void);

/// Extended attributes (sys/xattr.h).
int pg_fsetxattr(int fd, const char *name, const void *value, unsigned long size);
long pg_getxattr(const char *path, const char *name, void *value, unsigned long size);
int pg_fremovexattr(int fd, const char *name);
int pg_removexattr(const char *path, const char *name);

/// The regular file `name` in the folder `dir`, or in `dir`'s sub-folder `sub` when `sub` is not
/// NULL (made 0700 first when `flags` has O_CREAT), opened with `flags` (and `mode` when it is
/// created), O_CLOEXEC, following no symbolic link at `dir`'s last component, at `sub` or at
/// `name` (each is opened relative to the folder before it, with O_NOFOLLOW). Never blocks on a
/// FIFO. For the files photogate makes in a library's run/ folder (the bell, the daemons' logs,
/// the mount registry): a symbolic link left there never takes a write elsewhere. -1 with errno:
/// ELOOP (or ENOTDIR) for a symbolic link, EINVAL for something else than a regular file.
int pg_open_in_folder(const char *dir, const char *sub, const char *name, int flags, unsigned int mode);

/// For a connection (sqlite3 *) of a photogate library: no checkpoint when it closes
/// (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE), so the last connection to close leaves the WAL and its index
/// in place instead of syncing, copying and deleting them (the next process would then recreate
/// the WAL, sync its folder and, through GRDB, write a dummy transaction). 0 on success.
int pg_sqlite_keep_wal(void *db);
/// Lets the connection checkpoint the WAL into the database when it closes as the last
/// connection to it, from any process (SQLite's default; undoes pg_sqlite_keep_wal).
int pg_sqlite_checkpoint_on_close(void *db);
/// 1 when `path` (not followed) has a POSIX access ACL, else 0.
int pg_has_access_acl(const char *path);
/// Joins a new, empty, anonymous session keyring (keyctl KEYCTL_JOIN_SESSION_KEYRING): children
/// then inherit it instead of the caller's. Returns its serial, or -1.
long pg_join_new_session_keyring(void);
/// An anonymous in-memory file (memfd_create, close-on-exec), or -1.
int pg_memfd(const char *name);

/// pidfd_open(pid, 0): a descriptor (close-on-exec) for a running process, readable once it has
/// ended; -1 with errno set (ESRCH: no such process).
int pg_pidfd_open(int pid);
/// Waits until the process of `pidfd` has ended (1), at most `timeout_ms` (0: still running), and
/// through signals; -1 with errno on another error.
int pg_pidfd_wait(int pidfd, int timeout_ms);

/// The mount `fd` is on: its id as /proc/self/mountinfo numbers mounts, and its device (statx
/// STATX_MNT_ID with AT_STATX_DONT_SYNC: no request reaches a FUSE daemon, even one not serving
/// yet). 0 on success, -1 with errno set.
int pg_mount_identity(int fd, long long *mount_id, unsigned *dev_major, unsigned *dev_minor);

/// photogate run: SIGINT, SIGTERM, SIGHUP and SIGQUIT caught (from here until pg_relay_end) and
/// kept, each as one byte (its number) in a pipe whose read end is pg_relay_fd, for the caller to
/// relay to the sandboxed command; one ignored when this is called stays ignored (and is not
/// relayed). Call before spawning, so that a signal that comes meanwhile is kept. 0, or -1 with
/// errno.
int pg_relay_begin(void);
/// The read end (non-blocking, close-on-exec) of pg_relay_begin's pipe: one byte per signal
/// caught, its number. -1 outside pg_relay_begin ... pg_relay_end.
int pg_relay_fd(void);
/// 1 when `sig` is ignored (SIG_IGN) in this process.
int pg_signal_ignored(int sig);
/// Restores the dispositions pg_relay_begin found.
void pg_relay_end(void);

/// openat2(dirfd, path, flags | O_CLOEXEC, RESOLVE_NO_SYMLINKS, and RESOLVE_BENEATH from a folder
/// descriptor): fails with ELOOP if any part of `path` is a symbolic link (a folder on the way
/// swapped for one). Kernels without openat2 get openat with O_NOFOLLOW (the last part only).
/// -1 with errno.
int pg_openat_no_symlinks(int dirfd, const char *path, int flags);

/// The path of the file `fd` is open on (readlink of /proc/self/fd/N) into `buf`; its length, or
/// -1 with errno.
long pg_fd_path(int fd, char *buf, unsigned long size);

/// Opens an asset's original for reading (close-on-exec), the one way every reader opens one: a
/// file of the store following no symbolic link at its name (O_NOFOLLOW; the library is its
/// owner's), a referenced original (`reference`, import --reference: a path in folders others may
/// write, recorded with no link in it) following none anywhere on its path. -1 with errno.
int pg_open_original(const char *path, int reference);

/// Copies all of `src` (from its start) to `dst` (from its start), in the kernel where it can
/// (copy_file_range), else through a buffer; the number of bytes copied, or -1 with errno.
long long pg_copy_fd(int src, int dst);

/// rename(2) that fails with EEXIST rather than replace what is at `to` (renameat2 RENAME_NOREPLACE).
int pg_rename_noreplace(const char *from, const char *to);

#endif
