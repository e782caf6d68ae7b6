/* LD_PRELOADed into a photogate daemon by control-reuse.sh. When the daemon opens its
 * connection's fusectl folder (just after its mount is made), this first unmounts that mount
 * (possible before INIT) and mounts another FUSE file system, the victim, which the kernel gives
 * the freed mount id and device number. At the daemon's exit it logs whether the victim's
 * connection was aborted and whether its mount is still listed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static int victim_dev = -1, victim_root = -1;

static void logf_(const char *fmt, ...) {
    const char *path = getenv("RT_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

static void ids(const char *p, const char *tag) {
    struct statx sx;
    if (statx(AT_FDCWD, p, AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) == 0)
        logf_("%s: mnt_id=%llu dev=%u:%u\n", tag, (unsigned long long)sx.stx_mnt_id, sx.stx_dev_major, sx.stx_dev_minor);
}

static void race(void) {
    const char *mp = getenv("RT_MP"), *victim = getenv("RT_VICTIM");
    if (!mp || !victim || getenv("RT_DONE")) return;
    setenv("RT_DONE", "1", 1);
    ids(mp, "ours");
    if (umount2(mp, 0)) { logf_("cannot unmount ours: %s\n", strerror(errno)); return; }
    victim_dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    char o[128];
    snprintf(o, sizeof o, "fd=%d,rootmode=40000,user_id=0,group_id=0", victim_dev);
    if (mount("victim", victim, "fuse.victim", MS_NOSUID | MS_NODEV, o)) { logf_("cannot mount the victim: %s\n", strerror(errno)); return; }
    victim_root = open(victim, O_PATH | O_CLOEXEC);  /* keeps the victim alive after a detach */
    ids(victim, "victim");
}

int open(const char *p, int flags, ...) {
    static int (*real)(const char *, int, ...);
    if (!real) real = dlsym(RTLD_NEXT, "open");
    va_list ap;
    va_start(ap, flags);
    int mode = va_arg(ap, int);
    va_end(ap);
    if (p && !strncmp(p, "/sys/fs/fuse/connections/", 25)) race();
    return real(p, flags, mode);
}
int open64(const char *p, int flags, ...) __attribute__((alias("open")));

__attribute__((destructor)) static void at_exit(void) {
    if (victim_dev < 0) return;
    struct pollfd pf = { .fd = victim_dev, .events = 0 };
    poll(&pf, 1, 0);
    char line[1024];
    int listed = 0;
    FILE *mi = fopen("/proc/self/mountinfo", "r");
    while (mi && fgets(line, sizeof line, mi)) if (strstr(line, "fuse.victim")) listed = 1;
    if (mi) fclose(mi);
    logf_("at exit: victim connection %s; victim mount %s\n", (pf.revents & POLLERR) ? "aborted" : "alive",
          listed ? "listed" : "gone");
}
