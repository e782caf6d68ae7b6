#define _GNU_SOURCE
#include <spawn.h>
#include "csystem.h"

int pg_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

#include <fcntl.h>
#include <unistd.h>

int pg_syncfs(int fd) {
    return syncfs(fd);
}

int pg_start_writeback(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}
