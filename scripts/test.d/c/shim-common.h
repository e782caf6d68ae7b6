/* Shared by the LD_PRELOAD shims of scripts/test.d (included, not built alone): a log at
 * $RT_LOG, and at the daemon's exit a line saying what became of the victim file system the shim
 * mounted (its /dev/fuse descriptor in victim_dev, its mount found in mountinfo by `listed_as`). */
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

static int victim_dev = -1;

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

/* Logs "TAG: mnt_id=N dev=MAJOR:MINOR" of the mount at `p`. */
static void ids(const char *p, const char *tag) {
    struct statx sx;
    if (statx(AT_FDCWD, p, AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) == 0)
        logf_("%s: mnt_id=%llu dev=%u:%u\n", tag, (unsigned long long)sx.stx_mnt_id, sx.stx_dev_major, sx.stx_dev_minor);
}

/* "at exit: victim connection aborted|alive; victim mount listed|gone". */
static void report_victim(const char *listed_as) {
    if (victim_dev < 0) return;
    struct pollfd pf = { .fd = victim_dev, .events = 0 };
    poll(&pf, 1, 0);
    char line[1024];
    int listed = 0;
    FILE *mi = fopen("/proc/self/mountinfo", "r");
    while (mi && listed_as && fgets(line, sizeof line, mi)) if (strstr(line, listed_as)) listed = 1;
    if (mi) fclose(mi);
    logf_("at exit: victim connection %s; victim mount %s\n", (pf.revents & POLLERR) ? "aborted" : "alive",
          listed ? "listed" : "gone");
}
