/* partial_training.c: a training loop on the majority partial allreduce
 * (eager-SGD). Each rank's "gradient" pulls a shared parameter vector towards
 * a target of its own (w - t_r: the loss is the mean squared distance to the
 * targets, whose minimum is their mean); each step one rank is slow (it
 * sleeps 2 ms), and a round starts when the drawn initiator is ready, without
 * waiting for it. Late gradients ride in a later round (carry), every fifth
 * round is synchronous, and every rank applies the same round results, so the
 * replicas stay identical.
 *
 *   quorum-run -n 4 -- ./partial_training
 *   exits 0 when the replicas agree bit for bit and reached the minimum */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <quorum/quorum.h>

#define CHECK(call)                                                                            \
  do {                                                                                         \
    quorum_status_t s_ = (call);                                                               \
    if (s_ != QUORUM_OK) {                                                                     \
      fprintf(stderr, "%s failed: %s: %s\n", #call, quorum_strerror(s_), quorum_last_error()); \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

enum { N = 1000, STEPS = 200 };

static double target(int rank, int i) {
  return rank + (i % 3);
}

int main(void) {
  quorum_comm_t comm;
  CHECK(quorum_init(&comm));
  const int rank = quorum_comm_rank(comm), size = quorum_comm_size(comm);

  quorum_partial_opts_t opts = {0};
  opts.mode = QUORUM_PARTIAL_MAJORITY;
  opts.max_staleness = 4; /* a synchronous round at least every 5 */
  opts.carry = 1;         /* late gradients join a later round */
  opts.seed = 42;         /* the same on every rank: who initiates each round */
  quorum_partial_t partial;
  CHECK(quorum_partial_create(comm, N, QUORUM_FLOAT64, QUORUM_SUM, &opts, &partial));

  double *w = calloc(N, sizeof(double)), *grad = malloc(N * sizeof(double));
  double *sum = malloc(N * sizeof(double));
  if (!w || !grad || !sum) return 1;
  long fresh = 0;
  for (int step = 0; step < STEPS; ++step) {
    for (int i = 0; i < N; ++i) grad[i] = w[i] - target(rank, i);
    if (step % size == rank) { /* this step's slow rank */
      struct timespec ts = {0, 2 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    CHECK(quorum_partial_post(partial, grad));
    quorum_round_info_t info;
    CHECK(quorum_partial_wait(partial, sum, &info));
    fresh += info.fresh;
    /* The rate decays, as in training: a round that missed a rank pulls
     * towards the others' targets, by less and less. */
    const double lr = 0.01 + 0.5 * (1.0 - (double)step / STEPS);
    for (int i = 0; i < N; ++i) w[i] -= lr * sum[i] / size;
  }
  /* The carried gradients left: applied like any round's. */
  CHECK(quorum_partial_flush(partial, sum));
  for (int i = 0; i < N; ++i) w[i] -= 0.01 * sum[i] / size;
  CHECK(quorum_partial_destroy(partial));

  /* Replicas identical: every rank's vector equals rank 0's. */
  double *w0 = malloc(N * sizeof(double));
  if (!w0) return 1;
  memcpy(w0, w, N * sizeof(double));
  CHECK(quorum_bcast(comm, w0, N * sizeof(double), 0));
  const int identical = memcmp(w0, w, N * sizeof(double)) == 0;
  double err = 0;
  for (int i = 0; i < N; ++i) err = fmax(err, fabs(w[i] - ((size - 1) / 2.0 + (i % 3))));
  int ok = identical && err < 0.05;
  if (!ok) {
    fprintf(stderr, "rank %d: parameters %s rank 0's, %g from the minimum\n", rank,
            identical ? "equal" : "differ from", err);
  }
  int everyone_ok = 0;
  CHECK(quorum_allreduce(comm, &ok, &everyone_ok, 1, QUORUM_INT32, QUORUM_MIN));
  if (rank == 0) {
    printf(
        "partial_training: %d ranks, %d steps, %.2f fresh gradients per round, "
        "distance to the minimum %.2g, replicas %s\n",
        size, STEPS, (double)fresh / STEPS, err,
        everyone_ok ? "identical" : "DIFFER or far from it");
  }
  free(w);
  free(w0);
  free(grad);
  free(sum);
  CHECK(quorum_finalize(comm));
  return everyone_ok ? 0 : 1;
}
