/* LD_PRELOADed into a photogate daemon by control-reuse.sh. When the daemon opens its
 * connection's fusectl folder (just after its mount is made), this first unmounts that mount
 * (possible before INIT) and mounts another FUSE file system, the victim, which the kernel gives
 * the freed mount id and device number. At the daemon's exit it logs whether the victim's
 * connection was aborted and whether its mount is still listed. */
#include "shim-common.h"

static int victim_root = -1;

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

__attribute__((destructor)) static void at_exit_(void) { report_victim("fuse.victim"); }
