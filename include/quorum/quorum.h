/* quorum.h: the stable C API of the quorum communication runtime.
 *
 * A communicator is created by quorum_init (bootstrap from the launcher's
 * environment: PMIx under mpirun/srun, QUORUM_* under quorum-run, else a single
 * process) or by quorum_init_oob (the caller supplies an allgather, e.g. built
 * on MPI_Allgather). Every call returns a quorum_status_t; quorum_last_error()
 * gives the detail of the last failure on the calling thread. Every blocking
 * call is bounded by QUORUM_TIMEOUT_MS. Buffers may be host or CUDA device
 * memory.
 *
 * Threads: any thread may call, but calls on one communicator (and on the
 * requests it handed out) must not overlap, nor calls on one partial
 * collective: a call made while another thread is inside one on the same
 * handle is refused with QUORUM_ERR_INVALID_ARG (saying so) and changes
 * nothing. Different communicators may be used by different threads at once.
 *
 * Released handles: a communicator after quorum_finalize, a partial
 * collective after quorum_partial_destroy or quorum_partial_free, a request
 * after the quorum_wait (or quorum_test that reported it done) that released
 * it: every later call with it is refused with QUORUM_ERR_INVALID_ARG, a
 * second finalize or destroy too. (The handles' few bytes are kept for this.)
 *
 * Failures: a rank that dies turns every pending and later call of the others
 * into QUORUM_ERR_PEER_FAILED naming it (within QUORUM_TIMEOUT_MS, normally
 * about a second); after such a failure quorum_finalize waits for the other
 * ranks only QUORUM_FINALIZE_GRACE_MS. */
#ifndef QUORUM_QUORUM_H
#define QUORUM_QUORUM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QUORUM_VERSION_MAJOR 0
#define QUORUM_VERSION_MINOR 1
#define QUORUM_VERSION_PATCH 0

typedef struct quorum_comm *quorum_comm_t;
typedef struct quorum_request *quorum_request_t;
typedef struct quorum_partial *quorum_partial_t;

typedef enum {
  QUORUM_OK = 0,
  QUORUM_ERR_INVALID_ARG,
  QUORUM_ERR_TIMEOUT,
  QUORUM_ERR_PEER_FAILED,
  QUORUM_ERR_MISMATCH,
  QUORUM_ERR_NO_MEMORY,
  QUORUM_ERR_TRANSPORT,
  QUORUM_ERR_BOOTSTRAP,
  QUORUM_ERR_UNSUPPORTED,
  QUORUM_ERR_INTERNAL
} quorum_status_t;

typedef enum {
  QUORUM_FLOAT32,
  QUORUM_FLOAT64,
  QUORUM_FLOAT16,
  QUORUM_BFLOAT16,
  QUORUM_INT32,
  QUORUM_INT64
} quorum_dtype_t;

typedef enum { QUORUM_SUM, QUORUM_PROD, QUORUM_MIN, QUORUM_MAX, QUORUM_AVG } quorum_op_t;

/* Pass as the send buffer to reduce in place in the receive buffer. */
#define QUORUM_IN_PLACE ((const void *)1)

/* An out-of-band allgather supplied by the caller, e.g. built on MPI_Allgather.
 * allgather must gather bytes_per_rank bytes from every rank into recv (rank
 * order) and return 0 on success. */
typedef struct {
  int rank, size;
  int (*allgather)(const void *send, void *recv, size_t bytes_per_rank, void *ctx);
  void *ctx;
} quorum_oob_t;

/* Version string "MAJOR.MINOR.PATCH". */
const char *quorum_version(void);

quorum_status_t quorum_init(quorum_comm_t *comm);
quorum_status_t quorum_init_oob(const quorum_oob_t *oob, quorum_comm_t *comm);
/* Closes the communicator and releases the handle. While requests from it are
 * live (not yet released by quorum_wait, or by a quorum_test that set *done)
 * it fails with QUORUM_ERR_INVALID_ARG naming how many and changes nothing:
 * the handle stays valid, to wait for them and finalize again. Any other
 * outcome (QUORUM_OK or a failed shutdown) releases the handle. */
quorum_status_t quorum_finalize(quorum_comm_t comm);
int quorum_comm_rank(quorum_comm_t comm);
int quorum_comm_size(quorum_comm_t comm);
/* Name of the transport the communicator runs on ("ucx", "inproc", "self"). */
const char *quorum_comm_transport(quorum_comm_t comm);
const char *quorum_strerror(quorum_status_t status);
const char *quorum_last_error(void);

/* Size in bytes of one element of dtype, or 0 for an unknown dtype. */
size_t quorum_dtype_size(quorum_dtype_t dtype);
/* Name of dtype ("float32", "float64", "float16", "bfloat16", "int32",
 * "int64"), or "unknown". The dtypes are the values from 0 up to the first
 * whose quorum_dtype_size is 0. */
const char *quorum_dtype_name(quorum_dtype_t dtype);

quorum_status_t quorum_allreduce(quorum_comm_t comm, const void *send, void *recv, size_t count,
                                 quorum_dtype_t dtype, quorum_op_t op);
quorum_status_t quorum_iallreduce(quorum_comm_t comm, const void *send, void *recv, size_t count,
                                  quorum_dtype_t dtype, quorum_op_t op, quorum_request_t *req);
/* quorum_test sets *done to 1 when the request completed; the request is then
 * released (as by quorum_wait) and the handle must not be used again (passed
 * again, a released handle fails with QUORUM_ERR_INVALID_ARG). */
quorum_status_t quorum_test(quorum_request_t req, int *done);
quorum_status_t quorum_wait(quorum_request_t req);
quorum_status_t quorum_bcast(quorum_comm_t comm, void *buf, size_t bytes, int root);
quorum_status_t quorum_barrier(quorum_comm_t comm);
quorum_status_t quorum_allgather(quorum_comm_t comm, const void *send, void *recv,
                                 size_t bytes_per_rank);
quorum_status_t quorum_reduce_scatter(quorum_comm_t comm, const void *send, void *recv,
                                      size_t count_per_rank, quorum_dtype_t dtype, quorum_op_t op);

/* Rooted and personalised collectives (host buffers; sizes in bytes except
 * reduce's count). quorum_reduce: the reduction of every rank's send lands in
 * the root's recv (recv unused elsewhere; QUORUM_IN_PLACE as the root's send).
 * quorum_gather: the root's recv gets every rank's block in rank order (recv
 * unused elsewhere; QUORUM_IN_PLACE as the root's send: its block is in place).
 * quorum_scatter: block j of the root's send lands in rank j's recv (send
 * unused elsewhere). quorum_alltoall: block j of send lands in rank j's recv
 * as block `rank` (send and recv do not overlap). quorum_alltoallv: send_bytes[j]
 * bytes at send + send_offsets[j] go to rank j, recv_bytes[j] bytes from rank j
 * land at recv + recv_offsets[j]; sizes that disagree between two ranks fail
 * with QUORUM_ERR_MISMATCH. */
quorum_status_t quorum_reduce(quorum_comm_t comm, const void *send, void *recv, size_t count,
                              quorum_dtype_t dtype, quorum_op_t op, int root);
quorum_status_t quorum_gather(quorum_comm_t comm, const void *send, void *recv,
                              size_t bytes_per_rank, int root);
quorum_status_t quorum_scatter(quorum_comm_t comm, const void *send, void *recv,
                               size_t bytes_per_rank, int root);
quorum_status_t quorum_alltoall(quorum_comm_t comm, const void *send, void *recv,
                                size_t bytes_per_rank);
quorum_status_t quorum_alltoallv(quorum_comm_t comm, const void *send, const size_t *send_bytes,
                                 const size_t *send_offsets, void *recv, const size_t *recv_bytes,
                                 const size_t *recv_offsets);
/* Non-blocking forms: the same arguments and checks, plus a request that
 * completes through quorum_wait / quorum_test (as quorum_iallreduce's). The
 * buffers must stay untouched until then; alltoallv's size and offset arrays
 * are read during the call and may be reused at once. Collectives, blocking
 * or not, must be started in the same order on every rank. */
quorum_status_t quorum_ireduce(quorum_comm_t comm, const void *send, void *recv, size_t count,
                               quorum_dtype_t dtype, quorum_op_t op, int root,
                               quorum_request_t *req);
quorum_status_t quorum_igather(quorum_comm_t comm, const void *send, void *recv,
                               size_t bytes_per_rank, int root, quorum_request_t *req);
quorum_status_t quorum_iscatter(quorum_comm_t comm, const void *send, void *recv,
                                size_t bytes_per_rank, int root, quorum_request_t *req);
quorum_status_t quorum_ialltoall(quorum_comm_t comm, const void *send, void *recv,
                                 size_t bytes_per_rank, quorum_request_t *req);
quorum_status_t quorum_ialltoallv(quorum_comm_t comm, const void *send, const size_t *send_bytes,
                                  const size_t *send_offsets, void *recv, const size_t *recv_bytes,
                                  const size_t *recv_offsets, quorum_request_t *req);

/* Sub-communicators, as MPI_Comm_split and MPI_Comm_dup make them. Collective
 * over comm (every rank calls it, in the same order as comm's collectives).
 * The ranks that pass one color >= 0 form a new communicator, ranked by key
 * (ties by their rank in comm); a rank that passes QUORUM_UNDEFINED joins none
 * and gets NULL. Every call and partial object works on the new communicator,
 * which has its own transport endpoints and progress; release it with
 * quorum_finalize (collective over its ranks), before or after comm. */
#define QUORUM_UNDEFINED (-1)
quorum_status_t quorum_comm_split(quorum_comm_t comm, int color, int key, quorum_comm_t *newcomm);
/* The same ranks in the same order, with tags of its own (a library's own
 * communicator). */
quorum_status_t quorum_comm_dup(quorum_comm_t comm, quorum_comm_t *newcomm);

/* Point-to-point: bytes from this rank to rank peer of comm, matched by
 * (source, tag); between two ranks, messages of one tag arrive in the order
 * they were sent. The receive names its source and the exact size sent (no
 * wildcards; a size that differs fails with QUORUM_ERR_MISMATCH). tag in
 * [0, 2^28); peer != this rank; host buffers. quorum_send returns once buf may
 * be reused; both are bounded by QUORUM_TIMEOUT_MS. The non-blocking forms
 * complete through quorum_wait / quorum_test. */
quorum_status_t quorum_send(quorum_comm_t comm, const void *buf, size_t bytes, int peer, int tag);
quorum_status_t quorum_recv(quorum_comm_t comm, void *buf, size_t bytes, int peer, int tag);
quorum_status_t quorum_isend(quorum_comm_t comm, const void *buf, size_t bytes, int peer, int tag,
                             quorum_request_t *req);
quorum_status_t quorum_irecv(quorum_comm_t comm, void *buf, size_t bytes, int peer, int tag,
                             quorum_request_t *req);

/* Collective: *ptr = bytes (equal on every rank, zeroed, page aligned). When
 * every rank is a process of this host (ucx with shared memory) the buffers
 * are symmetric: each rank can reach every rank's, so an allreduce whose send
 * and receive buffers every rank took from here (any offsets) moves each byte
 * once per rank instead of copying it in and out of a shared segment.
 * Elsewhere it is plain memory. Free with quorum_mem_free (local) once no
 * rank uses the buffer in a collective any more. bytes of 0 or above 2^56 (more
 * than any process can map) fail with QUORUM_ERR_INVALID_ARG; memory that
 * cannot be had (or mapped for every rank) with QUORUM_ERR_NO_MEMORY. */
quorum_status_t quorum_mem_alloc(quorum_comm_t comm, size_t bytes, void **ptr);
quorum_status_t quorum_mem_free(quorum_comm_t comm, void *ptr);

/* Partial collectives (solo and majority allreduce, after eager-SGD; and the
 * k-of-P quorum allreduce: a round activates once k ranks have arrived at it,
 * between solo (k = 1) and a synchronous allreduce (k = P)). */
typedef enum {
  QUORUM_PARTIAL_SOLO,
  QUORUM_PARTIAL_MAJORITY,
  QUORUM_PARTIAL_QUORUM
} quorum_partial_mode_t;
/* Zero-initialise the options (`= {0}` in C, `{}` in C++) and set the fields
 * by name: later versions add fields at the end, and zero in a new field keeps
 * the behaviour of the versions before it. */
typedef struct {
  quorum_partial_mode_t mode;
  unsigned max_staleness;       /* a synchronous round at least every max_staleness+1 rounds;
                                   0 = always synchronous */
  int carry;                    /* 1: late contributions ride in a later round (nothing lost);
                                   0: dropped, as in the reference */
  unsigned long long seed;      /* majority: shared seed that picks each round's initiator */
  unsigned activation_delay_us; /* a post that activates its round (solo: any; majority: the
                                   initiator's) sends the activation this long after it, so
                                   ranks posting meanwhile are fresh; 0 = at once (eager-SGD);
                                   at most 10 s */
  double carry_weight;          /* with carry: a late contribution rides in its later round
                                   multiplied by this, in (0, 1] (float32/float64 sum or avg
                                   only); 0 = 1, unweighted */
  unsigned k;                   /* QUORUM_PARTIAL_QUORUM: a round activates once k ranks have
                                   arrived at it (posted for it in time, or waited for it
                                   without a post), 1 <= k <= P (else QUORUM_ERR_INVALID_ARG);
                                   k = 1 is solo (only posts activate), k = P waits for every
                                   rank; must be 0 in the other modes */
} quorum_partial_opts_t;
typedef struct {
  unsigned long long round; /* round id that produced this result */
  int fresh;                /* how many ranks contributed a gradient posted for this round */
  int own_fresh;            /* 1 if this rank's post made it into this round */
  int initiator;            /* rank whose post activated the round (-1 for a synchronous round) */
} quorum_round_info_t;
/* Collective, in the same order on every rank. At most 256 partial objects
 * live on a communicator at once (their ids share 8 bits of every message
 * tag): one more fails with QUORUM_ERR_NO_MEMORY until one is destroyed. */
quorum_status_t quorum_partial_create(quorum_comm_t comm, size_t count, quorum_dtype_t dtype,
                                      quorum_op_t op, const quorum_partial_opts_t *opts,
                                      quorum_partial_t *partial);
quorum_status_t quorum_partial_post(quorum_partial_t partial, const void *contribution);
/* quorum_partial_post without the copy: when the contribution is all this
 * rank gives to its round (not late, nothing carried), the round reads it from
 * `contribution`, which must stay unchanged until the matching wait returns
 * (on one host, from quorum_mem_alloc, the round then copies nothing at all).
 * Otherwise it is copied as by quorum_partial_post. */
quorum_status_t quorum_partial_post_ref(quorum_partial_t partial, const void *contribution);
quorum_status_t quorum_partial_wait(quorum_partial_t partial, void *result,
                                    quorum_round_info_t *info);
/* quorum_partial_wait without the copy: *result points at the round's result
 * inside the object (host memory, count elements), valid until the next post,
 * wait, wait_ref, flush or destroy on it. Saves one pass over the vector per
 * step (it matters when ranks share memory bandwidth). */
quorum_status_t quorum_partial_wait_ref(quorum_partial_t partial, const void **result,
                                        quorum_round_info_t *info);
quorum_status_t quorum_partial_flush(quorum_partial_t partial, void *result);
/* How many rounds other ranks already activated that this rank's waits have
 * not returned yet (0 after a post: it is only meaningful between a wait and
 * the next post). A post now would miss all of them, so its contribution would
 * be carried (or dropped) with that lateness. A rank that is behind can
 * instead wait that many times without posting, applying each result, and
 * compute its next contribution on the newest one (eager-SGD's stale ranks
 * catching up). Never spans a synchronous round. */
quorum_status_t quorum_partial_rounds_behind(quorum_partial_t partial, unsigned long long *rounds);
/* Collective; frees the handle whatever the outcome. Destroy partial objects
 * before quorum_finalize: a finalize releases the ones still alive (locally,
 * with a warning), after which every call on them but this one is refused
 * (QUORUM_ERR_INVALID_ARG) and this one only frees the handle (also
 * QUORUM_ERR_INVALID_ARG). */
quorum_status_t quorum_partial_destroy(quorum_partial_t partial);
/* Local, not collective: frees the object and its handle without destroy's
 * collective part (rounds in flight are aborted, activations not drained).
 * For error paths, where peers may be gone or elsewhere; also quiet after
 * quorum_finalize. */
quorum_status_t quorum_partial_free(quorum_partial_t partial);

/* Extension: timing and staleness of the round the last quorum_partial_wait
 * returned on this rank (for benchmarks and monitoring). Times are
 * CLOCK_MONOTONIC nanoseconds, comparable between processes of one host. */
typedef struct {
  unsigned long long post_ns;       /* this rank's post for the round (0: none in time) */
  unsigned long long join_ns;       /* this rank joined the round (activation seen or sent) */
  unsigned long long complete_ns;   /* the round's data phase completed on this rank */
  int own_carried;                  /* this rank's late posts that ride in this round (carry) */
  unsigned long long own_staleness; /* their summed lateness, in rounds */
  long long carried;                /* late posts of all ranks that ride in this round */
  unsigned long long staleness;     /* their summed lateness, in rounds; carried and
                                       staleness are the same on every rank */
} quorum_round_stats_t;
quorum_status_t quorum_partial_last_round_stats(quorum_partial_t partial,
                                                quorum_round_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* QUORUM_QUORUM_H */
