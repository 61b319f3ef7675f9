// allreduce.cpp: the smallest quorum program in C++ (include/quorum/quorum.hpp:
// RAII handles, errors as quorum::Error). Every rank contributes rank + 1;
// after the allreduce every rank holds 1 + 2 + ... + size; then a
// non-blocking allreduce overlaps some work, and a duplicate communicator
// (as a library would keep for itself) runs one of its own.
//
//   quorum-run -n 4 -- ./allreduce_cpp     exits 0 when every check holds
#include <cstdio>
#include <quorum/quorum.hpp>
#include <vector>

int main() {
  try {
    quorum::Comm comm;
    const int rank = comm.rank(), size = comm.size();
    const double want = size * (size + 1) / 2.0;

    std::vector<double> grad(1 << 16, rank + 1);
    comm.allreduce(grad.data(), grad.size());  // in place, sum
    for (double g : grad) {
      if (g != want) {
        std::fprintf(stderr, "rank %d: got %g, expected %g\n", rank, g, want);
        return 1;
      }
    }

    std::vector<float> in(4096, 1.0f), out(4096);
    quorum::Request req = comm.iallreduce(in.data(), out.data(), in.size());
    double busy = 0;
    for (int i = 0; i < 1000; ++i) busy += i;  // work while the allreduce runs
    req.wait();
    if (out[4095] != static_cast<float>(size) || busy < 0) return 1;

    quorum::Comm mine = comm.dup();
    int64_t ranks = 1;
    mine.allreduce(&ranks, 1);
    if (ranks != size) return 1;
    mine.finalize();

    if (rank == 0) std::printf("allreduce_cpp: %d ranks agree (%g)\n", size, want);
  } catch (const quorum::Error &e) {
    std::fprintf(stderr, "quorum error: %s\n", e.what());
    return 1;
  }
  return 0;
}
