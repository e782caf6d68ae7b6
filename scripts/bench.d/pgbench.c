// scripts/bench's measuring and data-making helper: one small C program, so that what is timed is
// the file system and not an interpreter. Built by scripts/bench with `cc -O2`.
//
//   pgbench gen-photos DIR COUNT MINBYTES MAXBYTES TEMPLATE SEED [sparse]  unique JPEG-headed files
//   pgbench gen-video PATH BYTES SEED                              an MP4 (ftyp, moov, big mdat)
//   pgbench seq PATH                                               read all with 1 MiB reads
//   pgbench rand PATH COUNT SEED                                   random aligned 4 KiB preads
//   pgbench orc LISTFILE                                           open, read all, close each path
//   pgbench statall LISTFILE                                       stat each path
//   pgbench appear PATH TIMEOUT_MS -- CMD ARGS...                  run CMD, then time until PATH exists
//   pgbench cpsync LISTFILE DSTDIR WRITERS                         durable copy: per file open, write,
//                                                                  fsync, close; WRITERS processes, file i
//                                                                  to writer i % WRITERS
//   pgbench save PATH SOURCE [fsync]                               an edit saved in place: SOURCE's bytes with
//                                                                  16 bytes before its last 32 made unique,
//                                                                  written with open(O_TRUNC), write, close
//
// Timings go to stdout as one line of `key=value` pairs (seconds, counts).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {  // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void die(const char *what, const char *path) {
    fprintf(stderr, "pgbench: %s %s: %s\n", what, path ? path : "", strerror(errno));
    exit(1);
}

static void write_all(int fd, const void *buf, size_t n, const char *path) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            die("write", path);
        }
        p += w;
        n -= (size_t)w;
    }
}

static unsigned char *random_pool(size_t size) {
    unsigned char *pool = malloc(size);
    if (!pool) die("malloc", NULL);
    for (size_t i = 0; i + 8 <= size; i += 8) {
        uint64_t v = rng();
        memcpy(pool + i, &v, 8);
    }
    return pool;
}

static unsigned char *read_whole(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) die("open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) die("stat", path);
    unsigned char *b = malloc((size_t)st.st_size);
    if (!b) die("malloc", NULL);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r <= 0) die("read", path);
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    return b;
}

// Each photo: the template JPEG (its metadata, GPS included, comes first), then random bytes, then
// a 32-byte tag naming the file: every file is unique, so import never sees duplicates.
static int gen_photos(const char *dir, long count, long minb, long maxb, const char *template, uint64_t seed, int sparse) {
    size_t tlen;
    unsigned char *t = read_whole(template, &tlen);
    rng_state ^= seed * 0x2545F4914F6CDD1Dull + 1;
    const size_t pool_size = 64u << 20;
    unsigned char *pool = random_pool(pool_size);
    char path[4096];
    for (long i = 0; i < count; i++) {
        long size = minb + (long)(rng() % (uint64_t)(maxb - minb + 1));
        snprintf(path, sizeof path, "%s/IMG_%06ld.jpg", dir, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) die("create", path);
        write_all(fd, t, tlen, path);
        long body = size - (long)tlen - 32;
        if (body < 0) body = 0;
        // Sparse photos: 64 KiB of random bytes, then a hole up to the tag (read at memory speed).
        long dense = sparse && body > (64 << 10) ? (64 << 10) : body;
        size_t off = (size_t)(rng() % (pool_size - (size_t)dense - 1));
        write_all(fd, pool + off, (size_t)dense, path);
        if (dense < body && lseek(fd, body - dense, SEEK_CUR) < 0) die("lseek", path);
        char tag[64];
        snprintf(tag, sizeof tag, "pgbench%016llx%09lx", (unsigned long long)seed, (unsigned long)i);
        write_all(fd, tag, 32, path);
        close(fd);
    }
    free(pool);
    free(t);
    return 0;
}

static void be32(unsigned char *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }

static int gen_video(const char *path, long long bytes, uint64_t seed) {
    rng_state ^= seed * 0x2545F4914F6CDD1Dull + 7;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("create", path);
    unsigned char head[64];
    size_t n = 0;
    be32(head + n, 24); memcpy(head + n + 4, "ftypisom", 8); be32(head + n + 12, 0x200);
    memcpy(head + n + 16, "isommp41", 8); n += 24;
    // An empty moov with a minimal movie header (version 0, 100 bytes).
    be32(head + n, 8 + 108); memcpy(head + n + 4, "moov", 4); n += 8;
    write_all(fd, head, n, path);
    unsigned char mvhd[108] = {0};
    be32(mvhd, 108); memcpy(mvhd + 4, "mvhd", 4);
    be32(mvhd + 20, 1000);            // timescale
    be32(mvhd + 28, 0x00010000);      // rate 1.0
    mvhd[32] = 1;                     // volume 1.0
    be32(mvhd + 44, 0x00010000); be32(mvhd + 60, 0x00010000); be32(mvhd + 76, 0x40000000);
    be32(mvhd + 104, 2);              // next track id
    write_all(fd, mvhd, sizeof mvhd, path);
    long long total = bytes - (long long)(n + sizeof mvhd);
    long long payload = total - 16;
    unsigned char mdat[16];
    be32(mdat, 1); memcpy(mdat + 4, "mdat", 4);
    uint64_t large = (uint64_t)total;
    for (int i = 0; i < 8; i++) mdat[8 + i] = (unsigned char)(large >> (56 - 8 * i));
    write_all(fd, mdat, 16, path);
    const size_t pool_size = 64u << 20;
    unsigned char *pool = random_pool(pool_size);
    while (payload > 0) {
        size_t chunk = payload > (1 << 20) ? (1 << 20) : (size_t)payload;
        size_t off = (size_t)(rng() % (pool_size - chunk));
        write_all(fd, pool + off, chunk, path);
        payload -= (long long)chunk;
    }
    free(pool);
    if (fsync(fd) != 0) die("fsync", path);
    close(fd);
    return 0;
}

static char buf[1 << 20];

static long long read_fd_all(int fd, const char *path) {
    long long total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0) {
            if (errno == EINTR) continue;
            die("read", path);
        }
        if (r == 0) break;
        total += r;
    }
    return total;
}

static int seq(const char *path) {
    double t0 = now();
    int fd = open(path, O_RDONLY);
    if (fd < 0) die("open", path);
    long long total = read_fd_all(fd, path);
    close(fd);
    double t = now() - t0;
    printf("seconds=%.6f bytes=%lld gbps=%.3f\n", t, total, total / t / 1e9);
    return 0;
}

static int rnd(const char *path, long count, uint64_t seed) {
    rng_state ^= seed * 0x2545F4914F6CDD1Dull + 3;
    int fd = open(path, O_RDONLY);
    if (fd < 0) die("open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) die("stat", path);
    uint64_t blocks = (uint64_t)st.st_size / 4096;
    double t0 = now();
    for (long i = 0; i < count; i++) {
        off_t off = (off_t)((rng() % blocks) * 4096);
        if (pread(fd, buf, 4096, off) != 4096) die("pread", path);
    }
    double t = now() - t0;
    close(fd);
    printf("seconds=%.6f reads=%ld per_second=%.0f\n", t, count, count / t);
    return 0;
}

static char **read_list(const char *listfile, long *n) {
    size_t len;
    unsigned char *text = read_whole(listfile, &len);
    long cap = 1024, count = 0;
    char **out = malloc(sizeof(char *) * (size_t)cap);
    char *p = (char *)text, *end = (char *)text + len;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        *nl = 0;
        if (nl > p) {
            if (count == cap) { cap *= 2; out = realloc(out, sizeof(char *) * (size_t)cap); }
            out[count++] = p;
        }
        p = nl + 1;
    }
    *n = count;
    return out;
}

static int orc(const char *listfile) {
    long n;
    char **paths = read_list(listfile, &n);
    long long total = 0;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        int fd = open(paths[i], O_RDONLY);
        if (fd < 0) die("open", paths[i]);
        total += read_fd_all(fd, paths[i]);
        close(fd);
    }
    double t = now() - t0;
    printf("seconds=%.6f files=%ld bytes=%lld files_per_second=%.1f gbps=%.3f\n", t, n, total, n / t, total / t / 1e9);
    return 0;
}

static int statall(const char *listfile) {
    long n;
    char **paths = read_list(listfile, &n);
    struct stat st;
    double t0 = now();
    for (long i = 0; i < n; i++)
        if (stat(paths[i], &st) != 0) die("stat", paths[i]);
    double t = now() - t0;
    printf("seconds=%.6f files=%ld\n", t, n);
    return 0;
}

// Runs a command (the CLI), then measures from its exit until PATH can be stat'ed.
static int appear(const char *path, long timeout_ms, char **argv) {
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) die("fork", NULL);
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0) dup2(dn, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    double t1 = now();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "pgbench: %s exited with %d\n", argv[0], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 1;
    }
    struct stat st;
    long polls = 0;
    for (;;) {
        polls++;
        if (stat(path, &st) == 0) break;
        if ((now() - t1) * 1000 > timeout_ms) {
            fprintf(stderr, "pgbench: %s did not appear within %ld ms\n", path, timeout_ms);
            return 1;
        }
        usleep(100);
    }
    double t2 = now();
    printf("cli_seconds=%.6f latency_seconds=%.6f polls=%ld\n", t1 - t0, t2 - t1, polls);
    return 0;
}

// Copies each listed file into DSTDIR (same base name) and fsyncs it before closing: what a
// copy that wants each file on disk when it returns does. Errors name the path and the errno.
static int copy_one(const char *src, const char *dstdir, int do_fsync) {
    char dst[4096];
    const char *base = strrchr(src, '/');
    snprintf(dst, sizeof dst, "%s/%s", dstdir, base ? base + 1 : src);
    int in = open(src, O_RDONLY);
    if (in < 0) die("open", src);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) die("create", dst);
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0) {
            if (errno == EINTR) continue;
            die("read", src);
        }
        if (r == 0) break;
        write_all(out, buf, (size_t)r, dst);
    }
    if (do_fsync && fsync(out) != 0) die("fsync", dst);
    if (close(out) != 0) die("close", dst);
    close(in);
    return 0;
}

static int cpsync(const char *listfile, const char *dstdir, long writers) {
    long n;
    char **paths = read_list(listfile, &n);
    if (writers < 1) writers = 1;
    double t0 = now();
    for (long w = 0; w < writers; w++) {
        pid_t pid = fork();
        if (pid < 0) die("fork", NULL);
        if (pid == 0) {
            for (long i = w; i < n; i += writers) copy_one(paths[i], dstdir, 1);
            _exit(0);
        }
    }
    int failed = 0, status;
    for (long w = 0; w < writers; w++) {
        while (wait(&status) < 0) {
            if (errno != EINTR) die("wait", NULL);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    double t = now() - t0;
    if (failed) {
        fprintf(stderr, "pgbench: a writer failed\n");
        return 1;
    }
    printf("seconds=%.6f files=%ld writers=%ld\n", t, n, writers);
    return 0;
}

// Saves an edit in place, as an editor that rewrites the file does: open(O_WRONLY | O_TRUNC),
// write the new bytes, (fsync,) close. The bytes are SOURCE's with 16 bytes before its last 32
// (the generated photos' random tail, after the JPEG's end of image) set to the time and pid, so
// every save is new content. Errors (EACCES at open, a refusal at close) name the errno.
static int save(const char *path, const char *source, int do_fsync) {
    size_t len;
    unsigned char *b = read_whole(source, &len);
    if (len >= 48) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t a = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, p = (uint64_t)getpid();
        memcpy(b + len - 48, &a, 8);
        memcpy(b + len - 40, &p, 8);
    }
    double t0 = now();
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd < 0) die("open", path);
    write_all(fd, b, len, path);
    if (do_fsync && fsync(fd) != 0) die("fsync", path);
    if (close(fd) != 0) die("close", path);
    double t = now() - t0;
    printf("seconds=%.6f bytes=%zu\n", t, len);
    free(b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 8 && strcmp(argv[1], "gen-photos") == 0)
        return gen_photos(argv[2], atol(argv[3]), atol(argv[4]), atol(argv[5]), argv[6], strtoull(argv[7], NULL, 10),
                          argc >= 9 && strcmp(argv[8], "sparse") == 0);
    if (argc >= 5 && strcmp(argv[1], "gen-video") == 0) return gen_video(argv[2], atoll(argv[3]), strtoull(argv[4], NULL, 10));
    if (argc >= 3 && strcmp(argv[1], "seq") == 0) return seq(argv[2]);
    if (argc >= 5 && strcmp(argv[1], "rand") == 0) return rnd(argv[2], atol(argv[3]), strtoull(argv[4], NULL, 10));
    if (argc >= 3 && strcmp(argv[1], "orc") == 0) return orc(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "statall") == 0) return statall(argv[2]);
    if (argc >= 6 && strcmp(argv[1], "appear") == 0 && strcmp(argv[4], "--") == 0) return appear(argv[2], atol(argv[3]), argv + 5);
    if (argc >= 5 && strcmp(argv[1], "cpsync") == 0) return cpsync(argv[2], argv[3], atol(argv[4]));
    if (argc >= 4 && strcmp(argv[1], "save") == 0) return save(argv[2], argv[3], argc >= 5 && strcmp(argv[4], "fsync") == 0);
    fprintf(stderr, "usage: see the comment at the top of pgbench.c\n");
    return 64;
}
