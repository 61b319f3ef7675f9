// streaming_test.cpp: the non-temporal copy and reduction (reduce/streaming.hpp)
// against memcpy and reduce_out: every size class around the 16- and 64-byte
// steps, misaligned ends, every dtype and op bit for bit (the same kernels),
// averages, in-place and overlapping arguments.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "collectives/reduce/dtype.hpp"
#include "collectives/reduce/half.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "collectives/reduce/streaming.hpp"

namespace quorum {
namespace {

const quorum_dtype_t kDtypes[] = {QUORUM_FLOAT32,  QUORUM_FLOAT64, QUORUM_FLOAT16,
                                  QUORUM_BFLOAT16, QUORUM_INT32,   QUORUM_INT64};
const quorum_op_t kOps[] = {QUORUM_SUM, QUORUM_PROD, QUORUM_MIN, QUORUM_MAX, QUORUM_AVG};

// count finite values of dtype (small integers and halves: no NaN payloads).
std::vector<uint8_t> values(quorum_dtype_t dt, size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(-40, 40);
  const size_t es = dtype_size(dt);
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    const int v = pick(rng);
    const float f = static_cast<float>(v) * 0.5f;
    uint8_t *p = out.data() + i * es;
    switch (dt) {
      case QUORUM_FLOAT32:
        std::memcpy(p, &f, 4);
        break;
      case QUORUM_FLOAT64: {
        const double d = f;
        std::memcpy(p, &d, 8);
        break;
      }
      case QUORUM_FLOAT16: {
        const uint16_t h = float_to_half(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case QUORUM_BFLOAT16: {
        const uint16_t h = float_to_bf16(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case QUORUM_INT32: {
        const int32_t x = v;
        std::memcpy(p, &x, 4);
        break;
      }
      case QUORUM_INT64: {
        const int64_t x = v;
        std::memcpy(p, &x, 8);
        break;
      }
    }
  }
  return out;
}

TEST(Streaming, CopyEqualsMemcpyAtEverySizeAndAlignment) {
  std::vector<uint8_t> src(70000 + 64), dst(70000 + 128), want(dst.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t bytes : {0, 1, 15, 16, 17, 63, 64, 65, 127, 129, 1000, 4096, 70000}) {
    for (size_t dst_off : {0, 1, 8, 15, 16, 33}) {
      for (size_t src_off : {0, 3, 16}) {
        std::memset(dst.data(), 0xee, dst.size());
        want = dst;
        std::memcpy(want.data() + dst_off, src.data() + src_off, bytes);
        copy_streaming(dst.data() + dst_off, src.data() + src_off, bytes);
        ASSERT_EQ(dst, want) << bytes << " B, dst +" << dst_off << ", src +" << src_off;
      }
    }
  }
}

TEST(Streaming, ReduceEqualsReduceOutForEveryDtypeAndOp) {
  for (quorum_dtype_t dt : kDtypes) {
    const size_t es = dtype_size(dt);
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{2049}, size_t{100003}}) {
      const std::vector<uint8_t> a = values(dt, count + 1, 1), b = values(dt, count + 1, 2);
      for (quorum_op_t op : kOps) {
        for (size_t shift : {size_t{0}, es}) {  // output on and off its first alignment
          std::vector<uint8_t> want(count * es + 2 * es, 0xee), got = want;
          ASSERT_EQ(reduce_out(want.data() + shift, a.data(), b.data(), count, dt, op), QUORUM_OK);
          if (op == QUORUM_AVG && count > 0) {
            ASSERT_EQ(scale_average(want.data() + shift, count, dt, 3), QUORUM_OK);
          }
          ASSERT_EQ(reduce_out_streaming(got.data() + shift, a.data(), b.data(), count, dt, op, 3),
                    QUORUM_OK);
          ASSERT_EQ(got, want) << dtype_name(dt) << " op " << op << " count " << count;
        }
      }
    }
  }
}

TEST(Streaming, InPlaceFallsBackAndOverlapIsRefused) {
  const size_t n = 5000;
  std::vector<uint8_t> a = values(QUORUM_FLOAT32, n, 3), b = values(QUORUM_FLOAT32, n, 4);
  std::vector<uint8_t> want = a;
  ASSERT_EQ(reduce_into(want.data(), b.data(), n, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK);
  ASSERT_EQ(reduce_out_streaming(a.data(), a.data(), b.data(), n, QUORUM_FLOAT32, QUORUM_SUM),
            QUORUM_OK);
  EXPECT_EQ(a, want);
  EXPECT_EQ(
      reduce_out_streaming(a.data() + 4, a.data(), b.data(), n - 1, QUORUM_FLOAT32, QUORUM_SUM),
      QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(reduce_out_streaming(a.data(), b.data(), nullptr, n, QUORUM_FLOAT32, QUORUM_SUM),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(reduce_out_streaming(a.data(), b.data(), b.data() + 4, 1,
                                 static_cast<quorum_dtype_t>(77), QUORUM_SUM),
            QUORUM_ERR_INVALID_ARG);
}

}  // namespace
}  // namespace quorum
