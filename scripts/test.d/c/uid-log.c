/* LD_PRELOADed (through `photogate run --env LD_PRELOAD=...`) by run.sh: every process that loads
 * it appends "uid=N" to $UID_LOG_FILE (or /tmp/photogate-uid-log when unset). Had run handed the
 * command's environment to what runs before the sandbox, setpriv would log uid=0. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void log_uid(void) {
    const char *path = getenv("UID_LOG_FILE");
    int fd = open(path ? path : "/tmp/photogate-uid-log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return;
    char line[64];
    int n = snprintf(line, sizeof line, "uid=%u\n", (unsigned)getuid());
    if (n > 0) write(fd, line, (size_t)n);
    close(fd);
}
