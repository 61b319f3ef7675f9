// reduce_kernels_bench.cpp: throughput of the host reduction kernels, next to
// memcpy of the same size in the same run (the machine's speed drifts between
// runs, so only same-run ratios mean anything).
//
// bytes_per_second counts the payload (count * element size) per call for
// every benchmark, so reduce and memcpy read side by side. Memory traffic
// differs: reduce_into reads two streams and writes one, memcpy reads one and
// writes one; a reduce at ~2/3 of memcpy's rate is at memory bandwidth.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "collectives/reduce/reduce_kernels.hpp"

namespace {

void fill(std::vector<unsigned char> &buf, unsigned char seed) {
  // Small positive values: stays finite whatever the dtype, and every page is
  // touched before timing (page faults are expensive on these VMs).
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = (i % 2 == 1) ? 0x3c : seed;
}

void reduce_into_bench(benchmark::State &state, quorum_dtype_t dtype, quorum_op_t op) {
  const size_t bytes = size_t(state.range(0));
  const size_t count = bytes / quorum::dtype_size(dtype);
  std::vector<unsigned char> acc(bytes), in(bytes);
  fill(acc, 1);
  fill(in, 2);
  for (auto _ : state) {
    if (quorum::reduce_into(acc.data(), in.data(), count, dtype, op) != QUORUM_OK) {
      state.SkipWithError("reduce_into failed");
      break;
    }
    benchmark::DoNotOptimize(acc.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

void reduce_out_bench(benchmark::State &state, quorum_dtype_t dtype, quorum_op_t op) {
  const size_t bytes = size_t(state.range(0));
  const size_t count = bytes / quorum::dtype_size(dtype);
  std::vector<unsigned char> out(bytes), a(bytes), b(bytes);
  fill(out, 0);
  fill(a, 1);
  fill(b, 2);
  for (auto _ : state) {
    if (quorum::reduce_out(out.data(), a.data(), b.data(), count, dtype, op) != QUORUM_OK) {
      state.SkipWithError("reduce_out failed");
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

void BM_Memcpy(benchmark::State &state) {
  const size_t bytes = size_t(state.range(0));
  std::vector<unsigned char> dst(bytes), src(bytes);
  fill(dst, 0);
  fill(src, 1);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
}

void BM_Float32SumInto(benchmark::State &state) {
  reduce_into_bench(state, QUORUM_FLOAT32, QUORUM_SUM);
}
void BM_Float32SumOut(benchmark::State &state) {
  reduce_out_bench(state, QUORUM_FLOAT32, QUORUM_SUM);
}
void BM_Float64SumInto(benchmark::State &state) {
  reduce_into_bench(state, QUORUM_FLOAT64, QUORUM_SUM);
}
void BM_Float16SumInto(benchmark::State &state) {
  reduce_into_bench(state, QUORUM_FLOAT16, QUORUM_SUM);
}
void BM_BFloat16SumInto(benchmark::State &state) {
  reduce_into_bench(state, QUORUM_BFLOAT16, QUORUM_SUM);
}
void BM_Float32MaxInto(benchmark::State &state) {
  reduce_into_bench(state, QUORUM_FLOAT32, QUORUM_MAX);
}
void BM_Int32SumInto(benchmark::State &state) {
  reduce_into_bench(state, QUORUM_INT32, QUORUM_SUM);
}

// 4 KiB (L1) to 64 MiB (memory), the range of allreduce chunks.
void sizes(benchmark::internal::Benchmark *b) {
  for (int64_t bytes : {int64_t(4) << 10, int64_t(256) << 10, int64_t(4) << 20, int64_t(64) << 20})
    b->Arg(bytes);
}

BENCHMARK(BM_Memcpy)->Apply(sizes);
BENCHMARK(BM_Float32SumInto)->Apply(sizes);
BENCHMARK(BM_Float32SumOut)->Apply(sizes);
BENCHMARK(BM_Float64SumInto)->Apply(sizes);
BENCHMARK(BM_Float16SumInto)->Apply(sizes);
BENCHMARK(BM_BFloat16SumInto)->Apply(sizes);
BENCHMARK(BM_Float32MaxInto)->Apply(sizes);
BENCHMARK(BM_Int32SumInto)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
