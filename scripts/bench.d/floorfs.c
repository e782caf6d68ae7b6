/* floorfs: the least a FUSE file system must do to take photos the way photogate's add-only mount
 * does, for scripts/bench's `cp-floor` row (issue 39: what no answer of photogate's daemon can
 * beat on this machine). A flat folder: each file created goes to BACKING/tmp, is written there
 * (1 MiB requests, as photogate asks for), and at its close is made durable (fsync) and renamed
 * into BACKING/store before the close returns. With HASH=1 its SHA-256 is computed too, in the
 * cheapest way there is: from each write request's own buffer as it arrives (in order), where
 * photogate reads the bytes back from the page cache on another thread. No catalog, no limits, no
 * checks: the price of the FUSE round trips, the copies, the hash and the sync alone. A stored file
 * opened with O_TRUNC is saved the same way (a new temp, renamed over it at the close).
 * With LOG=1 each close also appends a record (its name and hash, 512 bytes) to BACKING/log after
 * the file's fsync and makes it durable with fdatasync before the close returns, the syncs shared
 * by the closes that ask at once as photogate's `SyncCoalescer` shares them: the least a catalog
 * row made durable after its file costs, without the catalog.
 *
 *   floorfs BACKING MOUNTPOINT [libfuse options, e.g. -f]   (HASH=0|1, LOG=0|1 in the environment)
 *
 * Built by scripts/bench against the libfuse photogate uses. */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

static char *backing;
static int hashing;
static int log_fd = -1;

/* Group commit of the log's fdatasync (as SyncCoalescer): a caller returns once a sync that began
 * after its append has succeeded, run by it or by another. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_cond = PTHREAD_COND_INITIALIZER;
static unsigned long log_asked, log_covered;
static int log_running;

static int log_append_durably(const char *name, const unsigned char *md, unsigned int mdlen) {
    char rec[512];
    memset(rec, ' ', sizeof rec);
    int n = snprintf(rec, sizeof rec, "%s ", name);
    for (unsigned i = 0; i < mdlen && n + 2 < (int)sizeof rec; i++) n += snprintf(rec + n, sizeof rec - n, "%02x", md[i]);
    rec[sizeof rec - 1] = '\n';
    if (write(log_fd, rec, sizeof rec) != (ssize_t)sizeof rec) return -EIO;
    int err = 0;
    pthread_mutex_lock(&log_lock);
    unsigned long mine = ++log_asked;
    while (log_covered < mine) {
        if (log_running) { pthread_cond_wait(&log_cond, &log_lock); continue; }
        log_running = 1;
        unsigned long covers = log_asked;
        pthread_mutex_unlock(&log_lock);
        int r = fdatasync(log_fd);
        pthread_mutex_lock(&log_lock);
        log_running = 0;
        if (r == 0 && covers > log_covered) log_covered = covers;
        pthread_cond_broadcast(&log_cond);
        if (r) { err = -errno; break; }
    }
    pthread_mutex_unlock(&log_lock);
    return err;
}

struct open_file {
    int fd;
    EVP_MD_CTX *ctx;
    off_t next;      /* bytes [0, next) went through the hash in order */
    int in_order;    /* no write out of order yet */
    int done;        /* made durable and moved into the store */
    char name[256];
};

static int path_of(char *out, size_t n, const char *where, const char *path) {
    const char *name = path[0] == '/' ? path + 1 : path;
    if (!*name || strchr(name, '/')) return -ENOENT;
    snprintf(out, n, "%s/%s/%s", backing, where, name);
    return 0;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    if (fi) {
        struct open_file *f = (struct open_file *)(uintptr_t)fi->fh;
        if (fstat(f->fd, st)) return -errno;
    } else if (!strcmp(path, "/")) {
        memset(st, 0, sizeof *st);
        st->st_mode = S_IFDIR | 0755;
        st->st_nlink = 2;
    } else {
        char p[4096];
        if (path_of(p, sizeof p, "store", path)) return -ENOENT;
        if (lstat(p, st)) {
            if (path_of(p, sizeof p, "tmp", path) || lstat(p, st)) return -ENOENT;
        }
    }
    st->st_blksize = 1 << 20;
    return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags) {
    (void)off; (void)fi; (void)flags;
    if (strcmp(path, "/")) return -ENOTDIR;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    char p[4096];
    snprintf(p, sizeof p, "%s/store", backing);
    DIR *d = opendir(p);
    if (!d) return -errno;
    struct dirent *e;
    while ((e = readdir(d))) if (e->d_name[0] != '.') fill(buf, e->d_name, NULL, 0, 0);
    closedir(d);
    return 0;
}

/* A new temp for `path` (created, or a save of a stored file), with its own handle. */
static int start_file(const char *path, mode_t mode, struct fuse_file_info *fi) {
    char p[4096];
    if (path_of(p, sizeof p, "tmp", path)) return -ENOENT;
    int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode & 0777);
    if (fd < 0) return -errno;
    struct open_file *f = calloc(1, sizeof *f);
    f->fd = fd;
    f->in_order = 1;
    snprintf(f->name, sizeof f->name, "%s", path + 1);
    if (hashing) {
        f->ctx = EVP_MD_CTX_new();
        EVP_DigestInit_ex(f->ctx, EVP_sha256(), NULL);
    }
    fi->fh = (uintptr_t)f;
    return 0;
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi) { return start_file(path, mode, fi); }

/* Opened to be written (an edit's save, O_TRUNC: the bench's only kind): a new temp that the
 * close renames over the stored file, as a new version. A stored file is not read back. */
static int fs_open(const char *path, struct fuse_file_info *fi) {
    char p[4096];
    struct stat st;
    if (path_of(p, sizeof p, "store", path) || lstat(p, &st)) return -ENOENT;
    if ((fi->flags & O_ACCMODE) == O_RDONLY || !(fi->flags & O_TRUNC)) return -EACCES;
    return start_file(path, st.st_mode, fi);
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    struct open_file *f = (struct open_file *)(uintptr_t)fi->fh;
    ssize_t n = pwrite(f->fd, buf, size, off);
    if (n < 0) return -errno;
    if (f->ctx && f->in_order) {
        if (off == f->next) {
            EVP_DigestUpdate(f->ctx, buf, (size_t)n);
            f->next += n;
        } else {
            f->in_order = 0;
        }
    }
    return (int)n;
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    (void)path;
    if (!fi) return size == 0 ? 0 : -EACCES;   /* O_TRUNC sent apart from its open: the save replaces it */
    struct open_file *f = (struct open_file *)(uintptr_t)fi->fh;
    if (ftruncate(f->fd, size)) return -errno;
    if (size != f->next) f->in_order = 0;
    return 0;
}

/* At the close: the hash (read back only if the writes were not in order), the sync, the move. */
static int fs_flush(const char *path, struct fuse_file_info *fi) {
    (void)path;
    struct open_file *f = (struct open_file *)(uintptr_t)fi->fh;
    if (f->done) return 0;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (f->ctx) {
        if (!f->in_order) {
            static __thread char rb[1 << 20];
            EVP_DigestInit_ex(f->ctx, EVP_sha256(), NULL);
            ssize_t n;
            off_t o = 0;
            while ((n = pread(f->fd, rb, sizeof rb, o)) > 0) { EVP_DigestUpdate(f->ctx, rb, (size_t)n); o += n; }
        }
        EVP_DigestFinal_ex(f->ctx, md, &mdlen);
    }
    if (fsync(f->fd)) return -errno;
    if (log_fd >= 0) {
        int r = log_append_durably(f->name, md, mdlen);
        if (r) return r;
    }
    char from[4096], to[4096];
    snprintf(from, sizeof from, "%s/tmp/%s", backing, f->name);
    snprintf(to, sizeof to, "%s/store/%s", backing, f->name);
    if (rename(from, to)) return -errno;
    f->done = 1;
    return 0;
}

static int fs_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    struct open_file *f = (struct open_file *)(uintptr_t)fi->fh;
    close(f->fd);
    if (f->ctx) EVP_MD_CTX_free(f->ctx);
    free(f);
    return 0;
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    conn->max_write = 1 << 20;
    conn->want |= FUSE_CAP_ATOMIC_O_TRUNC & conn->capable;
    cfg->attr_timeout = 1;
    cfg->entry_timeout = 1;
    cfg->negative_timeout = 0;
    return NULL;
}

static const struct fuse_operations ops = {
    .getattr = fs_getattr, .readdir = fs_readdir, .create = fs_create, .open = fs_open,
    .write = fs_write, .truncate = fs_truncate, .flush = fs_flush, .release = fs_release, .init = fs_init,
};

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: floorfs BACKING MOUNTPOINT [libfuse options]\n");
        return 64;
    }
    backing = realpath(argv[1], NULL);
    if (!backing) { perror(argv[1]); return 66; }
    char p[4096];
    snprintf(p, sizeof p, "%s/tmp", backing);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/store", backing);
    mkdir(p, 0700);
    const char *h = getenv("HASH");
    hashing = h && !strcmp(h, "1");
    const char *l = getenv("LOG");
    if (l && !strcmp(l, "1")) {
        snprintf(p, sizeof p, "%s/log", backing);
        log_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (log_fd < 0) { perror(p); return 73; }
    }
    argv[1] = argv[0];
    return fuse_main(argc - 1, argv + 1, &ops, NULL);
}
