/* Built as a program (not a shim) by run.sh. `keyring plant CMD...`: joins a new session keyring,
 * adds a user key "photogate-test" holding a secret to it, and runs CMD with that keyring as its
 * session's (as root's login or unit session has one). `keyring find`: exits 3 when a key of
 * that description is in the session keyring (readable or not), 0 when not. */
#define _GNU_SOURCE
#include <linux/keyctl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "plant")) {
        if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, (char *)0) < 0) { perror("join"); return 2; }
        const char secret[] = "TOPSECRET-ROOT";
        if (syscall(SYS_add_key, "user", "photogate-test", secret, sizeof secret - 1, KEY_SPEC_SESSION_KEYRING) < 0) { perror("add_key"); return 2; }
        execvp(argv[2], argv + 2);
        perror("exec");
        return 2;
    }
    if (argc == 2 && !strcmp(argv[1], "find")) {
        long k = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", "photogate-test", 0);
        return k >= 0 ? 3 : 0;
    }
    return 2;
}
