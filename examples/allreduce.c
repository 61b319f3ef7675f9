/* allreduce.c: the smallest quorum program in C. Every rank contributes
 * rank + 1 in each element of a float vector; after the allreduce every rank
 * holds 1 + 2 + ... + size. Then ranks split into even and odd halves and sum
 * their ranks there, and each rank passes a token to the next one.
 *
 *   quorum-run -n 4 -- ./allreduce       (or mpirun -n 4, srun --mpi=pmix -n 4)
 *   exits 0 when every check holds */
#include <stdio.h>
#include <stdlib.h>

#include <quorum/quorum.h>

#define CHECK(call)                                                                            \
  do {                                                                                         \
    quorum_status_t s_ = (call);                                                               \
    if (s_ != QUORUM_OK) {                                                                     \
      fprintf(stderr, "%s failed: %s: %s\n", #call, quorum_strerror(s_), quorum_last_error()); \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

int main(void) {
  quorum_comm_t comm;
  CHECK(quorum_init(&comm));
  int rank = quorum_comm_rank(comm), size = quorum_comm_size(comm);

  enum { N = 1 << 16 };
  float *grad = malloc(N * sizeof(float));
  if (!grad) return 1;
  for (int i = 0; i < N; ++i) grad[i] = (float)(rank + 1);
  CHECK(quorum_allreduce(comm, QUORUM_IN_PLACE, grad, N, QUORUM_FLOAT32, QUORUM_SUM));
  float want = (float)size * (float)(size + 1) / 2;
  for (int i = 0; i < N; ++i) {
    if (grad[i] != want) {
      fprintf(stderr, "rank %d: element %d is %g, expected %g\n", rank, i, grad[i], want);
      return 1;
    }
  }
  free(grad);

  /* Even and odd ranks, each its own communicator. */
  quorum_comm_t half;
  CHECK(quorum_comm_split(comm, rank % 2, rank, &half));
  long long sum = rank;
  CHECK(quorum_allreduce(half, QUORUM_IN_PLACE, &sum, 1, QUORUM_INT64, QUORUM_SUM));
  long long want_half = 0;
  for (int r = rank % 2; r < size; r += 2) want_half += r;
  if (sum != want_half) {
    fprintf(stderr, "rank %d: sum over its half is %lld, expected %lld\n", rank, sum, want_half);
    return 1;
  }
  CHECK(quorum_finalize(half));

  /* A token around the ring: send to the next rank, receive from the previous. */
  if (size > 1) {
    int token = rank, got = -1;
    quorum_request_t req;
    CHECK(quorum_irecv(comm, &got, sizeof got, (rank + size - 1) % size, 0, &req));
    CHECK(quorum_send(comm, &token, sizeof token, (rank + 1) % size, 0));
    CHECK(quorum_wait(req));
    if (got != (rank + size - 1) % size) {
      fprintf(stderr, "rank %d: token %d from the previous rank\n", rank, got);
      return 1;
    }
  }
  if (rank == 0) printf("allreduce: %d ranks agree (%g in every element)\n", size, want);
  CHECK(quorum_finalize(comm));
  return 0;
}
