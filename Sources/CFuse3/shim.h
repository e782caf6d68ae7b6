// The libfuse3 low-level API as Swift can import it.
// FUSE_USE_VERSION must be set here (a system library target takes no -D): 312 makes
// fuse_session_loop_mt a real function. Differences between libfuse 3.14 and 3.17 are hidden
// behind the cfuse_* helpers below so one Swift source builds against both.
#ifndef PHOTOGATE_CFUSE3_SHIM_H
#define PHOTOGATE_CFUSE3_SHIM_H

#include <sys/vfs.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/statvfs.h>

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

static const int CFUSE_O_PATH = 010000000;
static const int CFUSE_O_NOFOLLOW = 0400000;

static inline struct fuse_args cfuse_args(int argc, char **argv) {
    struct fuse_args a = FUSE_ARGS_INIT(argc, argv);
    return a;
}

static inline struct fuse_session *cfuse_session_new(struct fuse_args *args,
        const struct fuse_lowlevel_ops *ops, void *userdata) {
    return fuse_session_new(args, ops, sizeof(*ops), userdata);
}

static inline struct fuse_bufvec cfuse_bufvec_fd(size_t size, int fd, off_t pos) {
    struct fuse_bufvec v = FUSE_BUFVEC_INIT(size);
    v.buf[0].flags = (enum fuse_buf_flags)(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    v.buf[0].fd = fd;
    v.buf[0].pos = pos;
    return v;
}

static inline struct fuse_bufvec cfuse_bufvec_mem(size_t size, void *mem) {
    struct fuse_bufvec v = FUSE_BUFVEC_INIT(size);
    v.buf[0].mem = mem;
    return v;
}

static inline int cfuse_minor_version(void) { return FUSE_MINOR_VERSION; }

/// fuse_session_loop_mt is a macro in some builds (no versioned symbols): call it from C.
static inline int cfuse_session_loop_mt(struct fuse_session *se, struct fuse_loop_config *config) {
    return fuse_session_loop_mt(se, config);
}

/// FUSE_CAP_DIRECT_IO_ALLOW_MMAP (libfuse >= 3.16): MAP_SHARED on files opened with direct I/O.
/// 0 where this libfuse does not know it (asking for 0 asks for nothing).
static inline uint64_t cfuse_cap_direct_io_allow_mmap(void) {
#ifdef FUSE_CAP_DIRECT_IO_ALLOW_MMAP
    return FUSE_CAP_DIRECT_IO_ALLOW_MMAP;
#else
    return 0;
#endif
}

/// Ask for a capability if the kernel offers it. Returns 1 when it is now wanted.
static inline int cfuse_want(struct fuse_conn_info *conn, uint64_t flag) {
#if FUSE_MINOR_VERSION >= 17
    return fuse_set_feature_flag(conn, flag) ? 1 : 0;
#else
    if (conn->capable & (unsigned)flag) { conn->want |= (unsigned)flag; return 1; }
    return 0;
#endif
}

/// 1 when the kernel (and this libfuse) offer the capability.
static inline int cfuse_capable(const struct fuse_conn_info *conn, uint64_t flag) {
#if FUSE_MINOR_VERSION >= 17
    return (conn->capable_ext & flag) ? 1 : 0;
#else
    return (conn->capable & (unsigned)flag) ? 1 : 0;
#endif
}

static inline void cfuse_unwant(struct fuse_conn_info *conn, uint64_t flag) {
#if FUSE_MINOR_VERSION >= 17
    fuse_unset_feature_flag(conn, flag);
#else
    conn->want &= ~((unsigned)flag);
#endif
}

static inline uint64_t cfuse_cap_passthrough(void) {
#ifdef FUSE_CAP_PASSTHROUGH
    return FUSE_CAP_PASSTHROUGH;
#else
    return 0;
#endif
}

static inline int cfuse_passthrough_available(void) {
#ifdef FUSE_CAP_PASSTHROUGH
    return 1;
#else
    return 0;
#endif
}

static inline void cfuse_set_max_stack_depth(struct fuse_conn_info *conn, unsigned depth) {
#ifdef FUSE_CAP_PASSTHROUGH
    conn->max_backing_stack_depth = depth;
#else
    (void)conn; (void)depth;
#endif
}

/// Register fd as the backing file of an open request; returns a backing id (> 0) or <= 0.
static inline int cfuse_passthrough_open(fuse_req_t req, int fd) {
#ifdef FUSE_CAP_PASSTHROUGH
    return fuse_passthrough_open(req, fd);
#else
    (void)req; (void)fd; return 0;
#endif
}

static inline int cfuse_passthrough_close(fuse_req_t req, int backing_id) {
#ifdef FUSE_CAP_PASSTHROUGH
    return fuse_passthrough_close(req, backing_id);
#else
    (void)req; (void)backing_id; return 0;
#endif
}

static inline void cfuse_fi_set_backing_id(struct fuse_file_info *fi, int id) {
#ifdef FUSE_CAP_PASSTHROUGH
    fi->backing_id = id;
#else
    (void)fi; (void)id;
#endif
}

#endif
