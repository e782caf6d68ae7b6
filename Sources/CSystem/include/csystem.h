// Small pieces of glibc that Swift's Glibc module hides behind _GNU_SOURCE.
#ifndef PHOTOGATE_CSYSTEM_H
#define PHOTOGATE_CSYSTEM_H
#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np: close every descriptor >= from in the child.
int pg_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);

#endif
