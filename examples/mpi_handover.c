/* mpi_handover.c: an MPI program hands MPI_COMM_WORLD over to quorum through
 * quorum_init_oob (the out-of-band allgather is MPI_Allgather), then checks a
 * quorum allreduce against MPI_Allreduce.
 *
 *   mpirun -n 4 ./mpi_handover            exits 0 when both agree */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include <quorum/quorum.h>

static int mpi_allgather(const void *send, void *recv, size_t bytes_per_rank, void *ctx) {
  MPI_Comm comm = *(MPI_Comm *)ctx;
  return MPI_Allgather(send, (int)bytes_per_rank, MPI_BYTE, recv, (int)bytes_per_rank, MPI_BYTE,
                       comm) == MPI_SUCCESS
             ? 0
             : 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm world = MPI_COMM_WORLD;
  int rank, size;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);

  quorum_oob_t oob = {rank, size, mpi_allgather, &world};
  quorum_comm_t comm;
  quorum_status_t s = quorum_init_oob(&oob, &comm);
  if (s != QUORUM_OK) {
    fprintf(stderr, "rank %d: quorum_init_oob: %s\n", rank, quorum_last_error());
    MPI_Abort(world, 1);
  }

  enum { N = 100000 };
  float *mine = malloc(N * sizeof(float)), *ours = malloc(N * sizeof(float));
  float *theirs = malloc(N * sizeof(float));
  for (int i = 0; i < N; ++i) mine[i] = (float)((rank * 7 + i) % 13);
  s = quorum_allreduce(comm, mine, ours, N, QUORUM_FLOAT32, QUORUM_SUM);
  if (s != QUORUM_OK) {
    fprintf(stderr, "rank %d: quorum_allreduce: %s\n", rank, quorum_last_error());
    MPI_Abort(world, 1);
  }
  MPI_Allreduce(mine, theirs, N, MPI_FLOAT, MPI_SUM, world);
  int wrong = 0;
  for (int i = 0; i < N; ++i) wrong += ours[i] != theirs[i];
  int total_wrong = 0;
  MPI_Allreduce(&wrong, &total_wrong, 1, MPI_INT, MPI_SUM, world);
  if (rank == 0) {
    printf("quorum over %s on %d ranks: %d of %d elements differ from MPI_Allreduce\n",
           quorum_comm_transport(comm), size, total_wrong, N * size);
  }
  quorum_finalize(comm);
  free(mine);
  free(ours);
  free(theirs);
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 1;
}
