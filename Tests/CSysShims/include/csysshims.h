// Syscalls the mount tests call directly that Swift's Glibc module does not export.
#include <sys/types.h>
#include <sys/xattr.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <spawn.h>

static inline long cs_getxattr(const char *p, const char *n) { char b[64]; return getxattr(p, n, b, sizeof b); }
static inline long cs_listxattr(const char *p) { char b[256]; return listxattr(p, b, sizeof b); }
static inline int cs_setxattr(const char *p, const char *n) { return setxattr(p, n, "v", 1, 0); }
static inline dev_t cs_makedev(unsigned ma, unsigned mi) { return makedev(ma, mi); }
static inline int cs_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
// glibc >= 2.34: every descriptor from `from` up closed in the child. Declared here rather than
// through _GNU_SOURCE, which would change fd_set in this module and clash with Dispatch's.
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
static inline int cs_spawn_closefrom(posix_spawn_file_actions_t *a, int from) { return posix_spawn_file_actions_addclosefrom_np(a, from); }
