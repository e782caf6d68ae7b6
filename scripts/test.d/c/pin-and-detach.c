/* LD_PRELOADed into a photogate daemon by pin-detach.sh. Right after the daemon's mount(2) of
 * RT_MP: a child (the pinner) holds the new mount's root, the mount is detached lazily (its
 * connection lives on, held by the pinner), and a victim FUSE file system of the same type and
 * source is mounted at RT_VICTIM and left unserved. On SIGUSR1 the pinner asks the detached mount
 * for its statfs (a request only the daemon can answer) and exits. Logs the daemon's pid and the
 * pinner's (the pinner is a copy of the daemon: its command line is the daemon's, so a search by
 * command line cannot tell them apart). At the daemon's exit this logs whether the victim's
 * connection was aborted and whether its mount is still listed. */
#include "shim-common.h"
#include <signal.h>
#include <sys/vfs.h>

int mount(const char *src, const char *tgt, const char *type, unsigned long flags, const void *data) {
    static int (*real)(const char *, const char *, const char *, unsigned long, const void *);
    if (!real) real = dlsym(RTLD_NEXT, "mount");
    int r = real(src, tgt, type, flags, data);
    const char *mp = getenv("RT_MP"), *victim = getenv("RT_VICTIM");
    if (r || !mp || !victim || getenv("RT_DONE") || !tgt || strcmp(tgt, mp)) return r;
    int saved = errno;
    setenv("RT_DONE", "1", 1);
    ids(mp, "ours");
    int pin = open(mp, O_PATH | O_CLOEXEC);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pid_t pinner = fork();
    if (pinner == 0) {
        /* Only the pin: no copy of the daemon's /dev/fuse or anything else. */
        dup2(pin, 3);
        close_range(4, ~0U, 0);
        sigprocmask(SIG_BLOCK, &usr1, NULL);
        int sig;
        sigwait(&usr1, &sig);
        struct statfs sf;
        fstatfs(3, &sf);
        _exit(0);
    }
    close(pin);
    logf_("daemon: %d\npinner: %d\n", (int)getpid(), (int)pinner);
    if (umount2(mp, MNT_DETACH)) logf_("cannot detach ours: %s\n", strerror(errno));
    victim_dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    char o[128];
    snprintf(o, sizeof o, "fd=%d,rootmode=40000,user_id=0,group_id=0", victim_dev);
    if (real(src, victim, type, flags, o)) logf_("cannot mount the victim: %s\n", strerror(errno));
    else ids(victim, "victim");
    errno = saved;
    return r;
}

__attribute__((destructor)) static void at_exit_(void) { report_victim(getenv("RT_VICTIM")); }
