/* c_api_test.c: the public header compiles as C11 and the C API works for a
 * single process: init, every collective, errors with their messages. */
#include <quorum/quorum.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              quorum_last_error());                                                            \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

int main(void) {
  quorum_comm_t comm;
  CHECK(quorum_init(&comm) == QUORUM_OK);
  CHECK(quorum_comm_rank(comm) == 0);
  CHECK(quorum_comm_size(comm) == 1);
  CHECK(strcmp(quorum_version(), "0.1.0") == 0);

  float in[4] = {1, 2, 3, 4}, out[4] = {0};
  CHECK(quorum_allreduce(comm, in, out, 4, QUORUM_FLOAT32, QUORUM_SUM) == QUORUM_OK);
  CHECK(out[3] == 4.0f);
  quorum_request_t req;
  CHECK(quorum_iallreduce(comm, QUORUM_IN_PLACE, out, 4, QUORUM_FLOAT32, QUORUM_MAX, &req) ==
        QUORUM_OK);
  CHECK(quorum_wait(req) == QUORUM_OK);
  /* A released handle is refused, not read after it was freed. */
  CHECK(quorum_wait(req) == QUORUM_ERR_INVALID_ARG);
  CHECK(strstr(quorum_last_error(), "is not live") != NULL);
  int done = 0;
  CHECK(quorum_test(req, &done) == QUORUM_ERR_INVALID_ARG && done == 0);
  CHECK(quorum_iallreduce(comm, QUORUM_IN_PLACE, out, 4, QUORUM_FLOAT32, QUORUM_MAX, &req) ==
        QUORUM_OK);
  while (!done) CHECK(quorum_test(req, &done) == QUORUM_OK);
  CHECK(quorum_test(req, &done) == QUORUM_ERR_INVALID_ARG);
  CHECK(quorum_wait(req) == QUORUM_ERR_INVALID_ARG);
  /* A request not yet waited for keeps finalize from freeing the handle. */
  CHECK(quorum_iallreduce(comm, QUORUM_IN_PLACE, out, 4, QUORUM_FLOAT32, QUORUM_SUM, &req) ==
        QUORUM_OK);
  CHECK(quorum_finalize(comm) == QUORUM_ERR_INVALID_ARG);
  CHECK(strstr(quorum_last_error(), "1 request is still in flight") != NULL);
  CHECK(quorum_barrier(comm) == QUORUM_OK);
  CHECK(quorum_wait(req) == QUORUM_OK);
  CHECK(quorum_barrier(comm) == QUORUM_OK);
  char buf[8] = "abc";
  CHECK(quorum_bcast(comm, buf, 4, 0) == QUORUM_OK);
  char all[8];
  CHECK(quorum_allgather(comm, buf, all, 4) == QUORUM_OK && strcmp(all, "abc") == 0);
  int rs_in[3] = {5, 6, 7}, rs_out[3] = {0};
  CHECK(quorum_reduce_scatter(comm, rs_in, rs_out, 3, QUORUM_INT32, QUORUM_SUM) == QUORUM_OK);
  CHECK(rs_out[2] == 7);
  CHECK(quorum_dtype_size(QUORUM_BFLOAT16) == 2);
  void *shared = NULL;
  CHECK(quorum_mem_alloc(comm, 1 << 20, &shared) == QUORUM_OK && shared != NULL);
  CHECK(((float *)shared)[1000] == 0.0f);
  ((float *)shared)[1000] = 2.5f;
  CHECK(quorum_allreduce(comm, QUORUM_IN_PLACE, shared, 1 << 18, QUORUM_FLOAT32, QUORUM_SUM) ==
        QUORUM_OK);
  CHECK(((float *)shared)[1000] == 2.5f);
  CHECK(quorum_mem_free(comm, shared) == QUORUM_OK);
  CHECK(quorum_mem_free(comm, shared) == QUORUM_ERR_INVALID_ARG);
  CHECK(quorum_mem_alloc(comm, 0, &shared) == QUORUM_ERR_INVALID_ARG);
  /* Sizes whose rounding would wrap around: refused, no buffer handed out. */
  CHECK(quorum_mem_alloc(comm, (size_t)-1, &shared) == QUORUM_ERR_INVALID_ARG && shared == NULL);
  CHECK(strstr(quorum_last_error(), "18446744073709551615 B") != NULL);
  CHECK(quorum_mem_alloc(comm, (size_t)-1 / 2, &shared) == QUORUM_ERR_INVALID_ARG &&
        shared == NULL);

  /* Errors are status codes with a message, never a crash. */
  CHECK(quorum_allreduce(comm, NULL, out, 4, QUORUM_FLOAT32, QUORUM_SUM) == QUORUM_ERR_INVALID_ARG);
  CHECK(strstr(quorum_last_error(), "NULL send buffer") != NULL);
  CHECK(quorum_bcast(comm, buf, 4, 3) == QUORUM_ERR_INVALID_ARG);
  CHECK(quorum_allreduce(NULL, in, out, 4, QUORUM_FLOAT32, QUORUM_SUM) == QUORUM_ERR_INVALID_ARG);
  CHECK(quorum_wait(NULL) == QUORUM_ERR_INVALID_ARG);
  CHECK(strcmp(quorum_strerror(QUORUM_ERR_TIMEOUT), "operation timed out") == 0);
  CHECK(quorum_finalize(comm) == QUORUM_OK);
  printf("c_api_test: ok\n");
  return 0;
}
