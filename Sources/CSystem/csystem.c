#define _GNU_SOURCE
#include <spawn.h>
#include "csystem.h"

int pg_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
