// OpenSSL's libcrypto, for SHA-256 only: it uses the CPU's SHA extensions (SHA-NI) where present,
// about ten times the speed of portable code, and is on every Debian machine.
#include <openssl/evp.h>
