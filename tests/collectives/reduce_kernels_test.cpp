// reduce_kernels_test.cpp: every dtype x op of the host reduction kernels
// against naive reference loops written independently here (16-bit types are
// checked against a table-driven round-to-nearest-even oracle, integers
// against 128-bit arithmetic), plus odd counts, misaligned and aliased
// buffers, NaN/zero-sign rules, integer wrap-around, averages and argument
// errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "collectives/reduce/half.hpp"
#include "collectives/reduce/reduce_kernels.hpp"
#include "runtime/status.hpp"

namespace quorum {
namespace {

const quorum_dtype_t kDtypes[] = {QUORUM_FLOAT32,  QUORUM_FLOAT64, QUORUM_FLOAT16,
                                  QUORUM_BFLOAT16, QUORUM_INT32,   QUORUM_INT64};
const quorum_op_t kOps[] = {QUORUM_SUM, QUORUM_PROD, QUORUM_MIN, QUORUM_MAX, QUORUM_AVG};

// ---- 16-bit oracle: decode exactly into double, round by table lookup ----

double decode_f16(uint16_t h) {
  const int exp = (h >> 10) & 31, man = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 31) return man ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(man, -24);
  return sign * std::ldexp(1024 + man, exp - 25);
}

double decode_bf16(uint16_t b) {
  const int exp = (b >> 7) & 255, man = b & 127;
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  if (exp == 255) return man ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(man, -133);
  return sign * std::ldexp(128 + man, exp - 134);
}

// Rounds a double to the nearest 16-bit value, ties to the even pattern.
class Rounder16 {
 public:
  Rounder16(double (*decode)(uint16_t), uint16_t max_finite, uint16_t inf)
      : inf_(inf), max_finite_(max_finite) {
    for (uint32_t bits = 0; bits <= max_finite; ++bits) table_.push_back(decode(uint16_t(bits)));
    const double ulp = table_[max_finite] - table_[max_finite - 1];
    overflow_ = table_[max_finite] + ulp / 2;
  }
  uint16_t round(double x) const {
    if (std::isnan(x)) return uint16_t(inf_ | 0x40);  // some NaN; compared as "is NaN"
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double ax = std::fabs(x);
    if (ax >= overflow_) return uint16_t(sign | inf_);
    if (ax >= table_[max_finite_]) return uint16_t(sign | max_finite_);
    const size_t hi = std::upper_bound(table_.begin(), table_.end(), ax) - table_.begin();
    const size_t lo = hi - 1;
    if (table_[lo] == ax) return uint16_t(sign | lo);
    const double dlo = ax - table_[lo], dhi = table_[hi] - ax;
    size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return uint16_t(sign | pick);
  }

 private:
  std::vector<double> table_;
  uint16_t inf_, max_finite_;
  double overflow_ = 0;
};

const Rounder16 &f16_rounder() {
  static const Rounder16 r(decode_f16, 0x7bff, 0x7c00);
  return r;
}
const Rounder16 &bf16_rounder() {
  static const Rounder16 r(decode_bf16, 0x7f7f, 0x7f80);
  return r;
}

// ---- reference semantics on one element ----

template <typename F>
F ref_float(F a, F b, quorum_op_t op) {
  switch (op) {
    case QUORUM_SUM:
    case QUORUM_AVG:
      return a + b;
    case QUORUM_PROD:
      return a * b;
    case QUORUM_MIN:
    case QUORUM_MAX: {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<F>::quiet_NaN();
      if (a == 0 && b == 0) {
        const bool neg = op == QUORUM_MIN ? (std::signbit(a) || std::signbit(b))
                                          : (std::signbit(a) && std::signbit(b));
        return neg ? F(-0.0) : F(0.0);
      }
      return op == QUORUM_MIN ? std::min(a, b) : std::max(a, b);
    }
  }
  return 0;
}

template <typename I>
I ref_int(I a, I b, quorum_op_t op) {
  // 128-bit arithmetic, then reduction modulo 2^bits: two's complement wrap.
  const __int128 wa = a, wb = b;
  switch (op) {
    case QUORUM_SUM:
    case QUORUM_AVG:
      return I(std::make_unsigned_t<I>((unsigned __int128)(wa + wb)));
    case QUORUM_PROD:
      return I(std::make_unsigned_t<I>((unsigned __int128)(wa * wb)));
    case QUORUM_MIN:
      return a < b ? a : b;
    case QUORUM_MAX:
      return a < b ? b : a;
  }
  return 0;
}

uint16_t ref_16(uint16_t a, uint16_t b, quorum_op_t op, bool bf16) {
  const double da = bf16 ? decode_bf16(a) : decode_f16(a);
  const double db = bf16 ? decode_bf16(b) : decode_f16(b);
  const Rounder16 &r = bf16 ? bf16_rounder() : f16_rounder();
  if (op == QUORUM_MIN || op == QUORUM_MAX) {
    if (std::isnan(da) || std::isnan(db)) return r.round(NAN);
    if (da == 0 && db == 0) {
      const bool neg = op == QUORUM_MIN ? ((a | b) & 0x8000) : ((a & b) & 0x8000);
      return neg ? 0x8000 : 0;
    }
    return (op == QUORUM_MIN) == (da < db) ? a : b;
  }
  // One operation of two 16-bit values in double then one rounding: correctly
  // rounded (double has more than 2p+2 bits).
  return r.round(op == QUORUM_PROD ? da * db : da + db);
}

template <typename T>
T load(const unsigned char *p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void store(unsigned char *p, size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

// Writes the reference of a[i] op b[i] into out (element i).
void ref_element(quorum_dtype_t dt, quorum_op_t op, const unsigned char *a, const unsigned char *b,
                 unsigned char *out, size_t i) {
  switch (dt) {
    case QUORUM_FLOAT32:
      store(out, i, ref_float(load<float>(a, i), load<float>(b, i), op));
      break;
    case QUORUM_FLOAT64:
      store(out, i, ref_float(load<double>(a, i), load<double>(b, i), op));
      break;
    case QUORUM_FLOAT16:
      store(out, i, ref_16(load<uint16_t>(a, i), load<uint16_t>(b, i), op, false));
      break;
    case QUORUM_BFLOAT16:
      store(out, i, ref_16(load<uint16_t>(a, i), load<uint16_t>(b, i), op, true));
      break;
    case QUORUM_INT32:
      store(out, i, ref_int(load<int32_t>(a, i), load<int32_t>(b, i), op));
      break;
    case QUORUM_INT64:
      store(out, i, ref_int(load<int64_t>(a, i), load<int64_t>(b, i), op));
      break;
  }
}

bool is_nan(quorum_dtype_t dt, const unsigned char *p, size_t i) {
  switch (dt) {
    case QUORUM_FLOAT32:
      return std::isnan(load<float>(p, i));
    case QUORUM_FLOAT64:
      return std::isnan(load<double>(p, i));
    case QUORUM_FLOAT16:
      return std::isnan(decode_f16(load<uint16_t>(p, i)));
    case QUORUM_BFLOAT16:
      return std::isnan(decode_bf16(load<uint16_t>(p, i)));
    default:
      return false;
  }
}

// Index of the first element that differs (NaN matches any NaN; everything
// else bit for bit), or npos.
size_t first_difference(quorum_dtype_t dt, const unsigned char *want, const unsigned char *got,
                        size_t count) {
  const size_t es = dtype_size(dt);
  for (size_t i = 0; i < count; ++i) {
    if (is_nan(dt, want, i) && is_nan(dt, got, i)) continue;
    if (std::memcmp(want + i * es, got + i * es, es) != 0) return i;
  }
  return std::string::npos;
}

std::string hex(quorum_dtype_t dt, const unsigned char *p, size_t i) {
  const size_t es = dtype_size(dt);
  uint64_t v = 0;
  std::memcpy(&v, p + i * es, es);
  return fmt::format("0x{:0{}x}", v, 2 * es);
}

// Random values with the special cases mixed in (NaN, +-Inf, +-0, subnormals,
// extremes), so that every rule is exercised by the bulk comparison too.
void fill_random(quorum_dtype_t dt, unsigned char *p, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> exp(-30, 30);
  std::uniform_int_distribution<int> pick(0, 19);
  auto real = [&](const auto &specials) {
    using F = typename std::decay_t<decltype(specials)>::value_type;
    const int k = pick(rng);
    if (k < int(specials.size())) return specials[k];
    return F(std::ldexp(unit(rng), exp(rng)));
  };
  for (size_t i = 0; i < count; ++i) {
    switch (dt) {
      case QUORUM_FLOAT32: {
        using L = std::numeric_limits<float>;
        static const std::vector<float> specials = {L::quiet_NaN(), L::infinity(), -L::infinity(),
                                                    0.0f,           -0.0f,         L::denorm_min(),
                                                    L::max(),       -L::max()};
        store(p, i, real(specials));
        break;
      }
      case QUORUM_FLOAT64: {
        using L = std::numeric_limits<double>;
        static const std::vector<double> specials = {
            L::quiet_NaN(), L::infinity(),   -L::infinity(), 0.0,
            -0.0,           L::denorm_min(), L::max(),       -L::max()};
        store(p, i, real(specials));
        break;
      }
      case QUORUM_FLOAT16:
      case QUORUM_BFLOAT16: {
        // Half the elements are arbitrary bit patterns (every class of value),
        // half are moderate numbers so that sums and products stay finite.
        uint16_t bits = uint16_t(rng());
        if (rng() & 1) {
          const float f = float(std::ldexp(unit(rng), exp(rng) / 4));
          bits = dt == QUORUM_FLOAT16 ? float_to_half(f) : float_to_bf16(f);
        }
        store(p, i, bits);
        break;
      }
      case QUORUM_INT32: {
        const int k = pick(rng);
        const int32_t special[] = {INT32_MAX, INT32_MIN, -1, 0};
        store(p, i, k < 4 ? special[k] : int32_t(k < 12 ? rng() : rng() % 2001 - 1000));
        break;
      }
      case QUORUM_INT64: {
        const int k = pick(rng);
        const int64_t special[] = {INT64_MAX, INT64_MIN, -1, 0};
        store(p, i, k < 4 ? special[k] : int64_t(k < 12 ? rng() : rng() % 2001 - 1000));
        break;
      }
    }
  }
}

struct Buffers {
  Buffers(quorum_dtype_t dt, size_t count, uint64_t seed) : es(dtype_size(dt)), n(count) {
    a.resize(n * es + 64);
    b.resize(n * es + 64);
    fill_random(dt, a.data(), n, seed);
    fill_random(dt, b.data(), n, seed * 7919 + 1);
    want.resize(n * es + 64);
  }
  void expect(quorum_dtype_t dt, quorum_op_t op) {
    for (size_t i = 0; i < n; ++i) ref_element(dt, op, a.data(), b.data(), want.data(), i);
  }
  size_t es, n;
  std::vector<unsigned char> a, b, want;
};

std::string label(quorum_dtype_t dt, quorum_op_t op, size_t count) {
  return fmt::format("{} {} count={}", dtype_name(dt), op_name(op), count);
}

#define EXPECT_SAME_ELEMENTS(dt, want, got, count, what)                                         \
  do {                                                                                           \
    const size_t at_ = first_difference(dt, want, got, count);                                   \
    EXPECT_EQ(at_, std::string::npos) << what << ": first differing element " << at_ << " want " \
                                      << hex(dt, want, at_) << " got " << hex(dt, got, at_);     \
  } while (0)

// ---- every dtype x op x count, both entry points ----

TEST(ReduceKernels, EveryDtypeAndOpMatchesReference) {
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000003)}) {
    for (quorum_dtype_t dt : kDtypes) {
      Buffers buf(dt, count, 1234 + count + dt);
      // Buffers are allocated once per dtype: page faults dominate otherwise.
      const std::vector<unsigned char> a0 = buf.a, b0 = buf.b;
      std::vector<unsigned char> inout(buf.a.size()), out(buf.a.size());
      for (quorum_op_t op : kOps) {
        buf.expect(dt, op);
        // reduce_into: a copy of a is reduced in place with b.
        std::copy(buf.a.begin(), buf.a.end(), inout.begin());
        ASSERT_EQ(reduce_into(inout.data(), buf.b.data(), count, dt, op), QUORUM_OK);
        EXPECT_SAME_ELEMENTS(dt, buf.want.data(), inout.data(), count,
                             "reduce_into " << label(dt, op, count));
        // reduce_out into a separate buffer.
        out[count * buf.es] = 0xee;
        ASSERT_EQ(reduce_out(out.data(), buf.a.data(), buf.b.data(), count, dt, op), QUORUM_OK);
        EXPECT_SAME_ELEMENTS(dt, buf.want.data(), out.data(), count,
                             "reduce_out " << label(dt, op, count));
        // Nothing past the end is written.
        EXPECT_EQ(out[count * buf.es], 0xee) << label(dt, op, count);
      }
      // The inputs are untouched.
      EXPECT_EQ(buf.a, a0) << dtype_name(dt);
      EXPECT_EQ(buf.b, b0) << dtype_name(dt);
    }
  }
}

// x op identity == x, bit for bit, for every dtype and op (NaN-free inputs).
TEST(ReduceKernels, IdentityLeavesEveryValueUnchanged) {
  const size_t count = 1001;
  for (quorum_dtype_t dt : kDtypes) {
    Buffers buf(dt, count, 99 + dt);
    for (quorum_op_t op : kOps) {
      std::vector<unsigned char> id(buf.a.size(), 0xab), x = buf.a;
      fill_identity(id.data(), count, dt, op);
      EXPECT_EQ(id[count * buf.es], 0xab) << "wrote past the end: " << label(dt, op, count);
      ASSERT_EQ(reduce_into(x.data(), id.data(), count, dt, op), QUORUM_OK);
      EXPECT_SAME_ELEMENTS(dt, buf.a.data(), x.data(), count, "identity " << label(dt, op, count));
    }
  }
}

TEST(ReduceKernels, MisalignedBuffers) {
  // Element offsets (vector-misaligned but naturally aligned) and byte offsets
  // (not even naturally aligned: the bounce path), across several chunks.
  const size_t count = 10007;
  for (quorum_dtype_t dt : kDtypes) {
    const size_t es = dtype_size(dt);
    Buffers buf(dt, count, 99 + dt);
    for (quorum_op_t op : {QUORUM_SUM, QUORUM_MAX}) {
      buf.expect(dt, op);
      for (size_t shift : {size_t(1), es, es + 1, es * 3 + (es > 1 ? es - 1 : 0)}) {
        std::vector<unsigned char> sa(count * es + 64), sb(count * es + 64), so(count * es + 64);
        unsigned char *pa = sa.data() + shift, *pb = sb.data() + (shift * 3) % 16,
                      *po = so.data() + (shift + 5) % 16;
        std::memcpy(pa, buf.a.data(), count * es);
        std::memcpy(pb, buf.b.data(), count * es);
        ASSERT_EQ(reduce_out(po, pa, pb, count, dt, op), QUORUM_OK);
        EXPECT_SAME_ELEMENTS(dt, buf.want.data(), po, count,
                             "reduce_out shift " << shift << " " << label(dt, op, count));
        ASSERT_EQ(reduce_into(pa, pb, count, dt, op), QUORUM_OK);
        EXPECT_SAME_ELEMENTS(dt, buf.want.data(), pa, count,
                             "reduce_into shift " << shift << " " << label(dt, op, count));
      }
    }
  }
}

TEST(ReduceKernels, AliasedOperands) {
  const size_t count = 1001;
  for (quorum_dtype_t dt : kDtypes) {
    const size_t es = dtype_size(dt);
    for (quorum_op_t op : kOps) {
      Buffers buf(dt, count, 5 + dt);
      buf.expect(dt, op);
      // out == a
      std::vector<unsigned char> x = buf.a;
      ASSERT_EQ(reduce_out(x.data(), x.data(), buf.b.data(), count, dt, op), QUORUM_OK);
      EXPECT_SAME_ELEMENTS(dt, buf.want.data(), x.data(), count, "out==a " << label(dt, op, count));
      // out == b
      x = buf.b;
      ASSERT_EQ(reduce_out(x.data(), buf.a.data(), x.data(), count, dt, op), QUORUM_OK);
      EXPECT_SAME_ELEMENTS(dt, buf.want.data(), x.data(), count, "out==b " << label(dt, op, count));
      // a == b, out separate; and inout == in (both mean x op x)
      std::vector<unsigned char> self_want(count * es);
      for (size_t i = 0; i < count; ++i)
        ref_element(dt, op, buf.a.data(), buf.a.data(), self_want.data(), i);
      std::vector<unsigned char> out(count * es);
      ASSERT_EQ(reduce_out(out.data(), buf.a.data(), buf.a.data(), count, dt, op), QUORUM_OK);
      EXPECT_SAME_ELEMENTS(dt, self_want.data(), out.data(), count,
                           "a==b " << label(dt, op, count));
      x = buf.a;
      ASSERT_EQ(reduce_into(x.data(), x.data(), count, dt, op), QUORUM_OK);
      EXPECT_SAME_ELEMENTS(dt, self_want.data(), x.data(), count,
                           "inout==in " << label(dt, op, count));
      // The same through the byte-misaligned path.
      std::vector<unsigned char> shifted(count * es + 1);
      std::memcpy(shifted.data() + 1, buf.a.data(), count * es);
      ASSERT_EQ(reduce_into(shifted.data() + 1, shifted.data() + 1, count, dt, op), QUORUM_OK);
      EXPECT_SAME_ELEMENTS(dt, self_want.data(), shifted.data() + 1, count,
                           "misaligned inout==in " << label(dt, op, count));
    }
  }
}

TEST(ReduceKernels, PartialOverlapIsRefused) {
  std::vector<float> v(100, 1.0f);
  clear_last_error();
  EXPECT_EQ(reduce_into(v.data(), v.data() + 1, 50, QUORUM_FLOAT32, QUORUM_SUM),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("overlap"), std::string::npos) << last_error();
  EXPECT_EQ(reduce_out(v.data() + 1, v.data(), v.data() + 60, 30, QUORUM_FLOAT32, QUORUM_SUM),
            QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(reduce_out(v.data() + 45, v.data() + 50, v.data(), 30, QUORUM_FLOAT32, QUORUM_SUM),
            QUORUM_ERR_INVALID_ARG);
  // Inputs may overlap each other (they are only read).
  std::vector<float> out(30);
  EXPECT_EQ(reduce_out(out.data(), v.data() + 50, v.data() + 40, 30, QUORUM_FLOAT32, QUORUM_SUM),
            QUORUM_OK);
  EXPECT_EQ(out[29], 2.0f);
  // Byte-misaligned overlap is refused as well.
  auto *bytes = reinterpret_cast<unsigned char *>(v.data());
  EXPECT_EQ(reduce_into(bytes + 1, bytes + 3, 10, QUORUM_FLOAT32, QUORUM_SUM),
            QUORUM_ERR_INVALID_ARG);
  // Adjacent (touching, not overlapping) ranges are fine.
  EXPECT_EQ(v, std::vector<float>(100, 1.0f)) << "a refused call wrote data";
  EXPECT_EQ(reduce_into(v.data(), v.data() + 50, 50, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(v[0], 2.0f);
  EXPECT_EQ(v[50], 1.0f);
}

TEST(ReduceKernels, InvalidArguments) {
  float x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1};
  const auto bad_dtype = static_cast<quorum_dtype_t>(42);
  const auto bad_op = static_cast<quorum_op_t>(-1);
  clear_last_error();
  EXPECT_EQ(reduce_into(x, y, 4, bad_dtype, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("dtype"), std::string::npos) << last_error();
  EXPECT_EQ(reduce_into(x, y, 4, QUORUM_FLOAT32, bad_op), QUORUM_ERR_INVALID_ARG);
  EXPECT_NE(std::string(last_error()).find("op"), std::string::npos) << last_error();
  EXPECT_EQ(reduce_out(x, x, y, 4, bad_dtype, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(reduce_out(x, x, y, 4, QUORUM_INT32, bad_op), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(scale_average(x, 4, bad_dtype, 2), QUORUM_ERR_INVALID_ARG);
  // An invalid dtype is refused even when there is nothing to do.
  EXPECT_EQ(reduce_into(nullptr, nullptr, 0, bad_dtype, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
  // Null buffers with elements; a count whose byte size overflows.
  EXPECT_EQ(reduce_into(nullptr, y, 4, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(reduce_into(x, nullptr, 4, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(reduce_out(x, nullptr, y, 4, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(reduce_out(nullptr, x, y, 4, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(scale_average(nullptr, 4, QUORUM_FLOAT32, 2), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(reduce_into(x, y, SIZE_MAX / 2, QUORUM_FLOAT64, QUORUM_SUM), QUORUM_ERR_INVALID_ARG);
  // Failed calls left the data alone.
  EXPECT_EQ(x[0], 1.0f);
  // count == 0 with null pointers is a valid no-op.
  EXPECT_EQ(reduce_into(nullptr, nullptr, 0, QUORUM_FLOAT32, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(reduce_out(nullptr, nullptr, nullptr, 0, QUORUM_INT64, QUORUM_MAX), QUORUM_OK);
  EXPECT_EQ(scale_average(nullptr, 0, QUORUM_FLOAT16, 3), QUORUM_OK);
}

// ---- explicit rules ----

TEST(ReduceKernels, IntegerOverflowWrapsTwosComplement) {
  int32_t a32[] = {INT32_MAX, INT32_MIN, INT32_MIN, 65536};
  const int32_t b32[] = {1, -1, -1, 65536};
  ASSERT_EQ(reduce_into(a32, b32, 2, QUORUM_INT32, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(a32[0], INT32_MIN);
  EXPECT_EQ(a32[1], INT32_MAX);
  ASSERT_EQ(reduce_into(a32 + 2, b32 + 2, 2, QUORUM_INT32, QUORUM_PROD), QUORUM_OK);
  EXPECT_EQ(a32[2], INT32_MIN);  // INT32_MIN * -1 wraps to itself
  EXPECT_EQ(a32[3], 0);          // 2^32 mod 2^32
  int64_t a64[] = {INT64_MAX, INT64_MIN, int64_t(1) << 62};
  const int64_t b64[] = {INT64_MAX, -1, 4};
  int64_t out[3];
  ASSERT_EQ(reduce_out(out, a64, b64, 2, QUORUM_INT64, QUORUM_SUM), QUORUM_OK);
  EXPECT_EQ(out[0], -2);
  EXPECT_EQ(out[1], INT64_MAX);
  ASSERT_EQ(reduce_out(out, a64, b64, 3, QUORUM_INT64, QUORUM_PROD), QUORUM_OK);
  EXPECT_EQ(out[0], 1);  // (2^63-1)^2 mod 2^64
  EXPECT_EQ(out[1], INT64_MIN);
  EXPECT_EQ(out[2], 0);
}

TEST(ReduceKernels, MinMaxPropagateNanAndOrderSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float a[] = {nan, 1.0f, nan, -0.0f, 0.0f, -0.0f, 0.0f, 3.0f, -INFINITY};
  const float b[] = {1.0f, nan, nan, 0.0f, -0.0f, -0.0f, 0.0f, 3.0f, 2.0f};
  float mn[9], mx[9];
  ASSERT_EQ(reduce_out(mn, a, b, 9, QUORUM_FLOAT32, QUORUM_MIN), QUORUM_OK);
  ASSERT_EQ(reduce_out(mx, a, b, 9, QUORUM_FLOAT32, QUORUM_MAX), QUORUM_OK);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(std::isnan(mn[i])) << i;
    EXPECT_TRUE(std::isnan(mx[i])) << i;
  }
  // min(-0,+0) == min(+0,-0) == -0; max gives +0 either way.
  EXPECT_TRUE(mn[3] == 0 && std::signbit(mn[3]));
  EXPECT_TRUE(mn[4] == 0 && std::signbit(mn[4]));
  EXPECT_TRUE(mx[3] == 0 && !std::signbit(mx[3]));
  EXPECT_TRUE(mx[4] == 0 && !std::signbit(mx[4]));
  EXPECT_TRUE(std::signbit(mn[5]) && std::signbit(mx[5]));
  EXPECT_TRUE(!std::signbit(mn[6]) && !std::signbit(mx[6]));
  EXPECT_EQ(mn[7], 3.0f);
  EXPECT_EQ(mx[7], 3.0f);
  EXPECT_EQ(mn[8], -INFINITY);
  EXPECT_EQ(mx[8], 2.0f);
  // The same rules hold for 16-bit types: NaN in, NaN out.
  uint16_t h[] = {0x7e00, 0x3c00, 0x8000}, g[] = {0x3c00, 0x7c01, 0x0000};
  ASSERT_EQ(reduce_into(h, g, 3, QUORUM_FLOAT16, QUORUM_MIN), QUORUM_OK);
  EXPECT_TRUE(std::isnan(half_to_float(h[0])));
  EXPECT_TRUE(std::isnan(half_to_float(h[1])));
  EXPECT_EQ(h[2], 0x8000);
}

TEST(ReduceKernels, HalfRoundsToNearestEven) {
  // float16: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> even (1.0);
  // 1 + 3*2^-11 is halfway to 1 + 2^-9 -> even (0x3c02); 65504 + 16 -> Inf.
  uint16_t a[] = {0x3c00, 0x3c01, 0x7bff, 0x0001, 0x0001, 0x0001, 0x7bff};
  const uint16_t b[] = {float_to_half(0x1p-11f),
                        0x1000 /* 2^-11 */,
                        0x4c00 /* 16 */,
                        0x3800 /* 0.5 */,
                        0x3e00 /* 1.5 */,
                        0x0001,
                        0x4000 /* 2 */};
  EXPECT_EQ(b[0], 0x1000);
  uint16_t sum[7], prod[7];
  ASSERT_EQ(reduce_out(sum, a, b, 7, QUORUM_FLOAT16, QUORUM_SUM), QUORUM_OK);
  ASSERT_EQ(reduce_out(prod, a, b, 7, QUORUM_FLOAT16, QUORUM_PROD), QUORUM_OK);
  EXPECT_EQ(sum[0], 0x3c00);
  EXPECT_EQ(sum[1], 0x3c02);
  EXPECT_EQ(sum[2], 0x7c00);
  EXPECT_EQ(prod[3], 0x0000);  // 2^-25: tie between 0 and the smallest subnormal
  EXPECT_EQ(prod[4], 0x0002);  // 1.5 * 2^-24: tie between 0x0001 and 0x0002
  EXPECT_EQ(sum[5], 0x0002);   // subnormal + subnormal
  EXPECT_EQ(prod[6], 0x7c00);  // overflow
  // bfloat16: 1 + 2^-8 ties to 1.0; 1 + 3*2^-8 ties to 0x3f82; max*2 -> Inf.
  uint16_t c[] = {0x3f80, 0x3f81, 0x7f7f};
  const uint16_t d[] = {0x3b80 /* 2^-8 */, 0x3b80, 0x4000 /* 2 */};
  uint16_t bsum[3], bprod[3];
  ASSERT_EQ(reduce_out(bsum, c, d, 3, QUORUM_BFLOAT16, QUORUM_SUM), QUORUM_OK);
  ASSERT_EQ(reduce_out(bprod, c, d, 3, QUORUM_BFLOAT16, QUORUM_PROD), QUORUM_OK);
  EXPECT_EQ(bsum[0], 0x3f80);
  EXPECT_EQ(bsum[1], 0x3f82);
  EXPECT_EQ(bprod[2], 0x7f80);
}

TEST(HalfConversion, RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = uint16_t(bits);
    const float f = half_to_float(h);
    const double want = decode_f16(h);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << std::hex << bits;
    } else {
      ASSERT_EQ(double(f), want) << std::hex << bits;
      ASSERT_EQ(float_to_half(f), h) << std::hex << bits;
    }
    const float fb = bf16_to_float(h);
    if (std::isnan(decode_bf16(h))) {
      EXPECT_TRUE(std::isnan(fb)) << std::hex << bits;
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(fb)))) << std::hex << bits;
    } else {
      ASSERT_EQ(double(fb), decode_bf16(h)) << std::hex << bits;
      ASSERT_EQ(float_to_bf16(fb), h) << std::hex << bits;
    }
  }
}

TEST(HalfConversion, FloatRoundingMatchesOracle) {
  // Random float bit patterns (all classes) and values near the 16-bit range.
  std::mt19937 rng(7);
  for (int i = 0; i < 400000; ++i) {
    uint32_t bits = rng();
    if (i % 2) bits = (bits & 0x807fffffu) | ((100u + rng() % 50u) << 23);
    const float f = bits_float(bits);
    const uint16_t h = float_to_half(f), hb = float_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(h)));
      EXPECT_TRUE(std::isnan(bf16_to_float(hb)));
      continue;
    }
    ASSERT_EQ(h, f16_rounder().round(f)) << std::hex << bits;
    ASSERT_EQ(hb, bf16_rounder().round(f)) << std::hex << bits;
  }
}

TEST(ReduceKernels, Float16PortableAndF16cPathsMatchReference) {
  // float16 has two implementations (F16C instructions where the CPU has
  // them, portable code otherwise, chosen by QUORUM_REDUCE_F16C); both must
  // give the reference results, including through the misaligned bounce path,
  // self-reduction and the average scaling.
  const size_t count = 5003;
  Buffers buf(QUORUM_FLOAT16, count, 4242);
  for (const char *f16c : {"0", "1"}) {
    knob_reduce_f16c.set_override(std::string(f16c));
    for (quorum_op_t op : kOps) {
      SCOPED_TRACE(testing::Message() << "QUORUM_REDUCE_F16C=" << f16c << " op " << op_name(op));
      buf.expect(QUORUM_FLOAT16, op);
      std::vector<unsigned char> x = buf.a;
      ASSERT_EQ(reduce_into(x.data(), buf.b.data(), count, QUORUM_FLOAT16, op), QUORUM_OK);
      EXPECT_SAME_ELEMENTS(QUORUM_FLOAT16, buf.want.data(), x.data(), count, "into");
      std::vector<unsigned char> out(count * 2);
      ASSERT_EQ(reduce_out(out.data(), buf.a.data(), buf.b.data(), count, QUORUM_FLOAT16, op),
                QUORUM_OK);
      EXPECT_SAME_ELEMENTS(QUORUM_FLOAT16, buf.want.data(), out.data(), count, "out");
      std::vector<unsigned char> shifted(count * 2 + 1);
      std::memcpy(shifted.data() + 1, buf.a.data(), count * 2);
      ASSERT_EQ(reduce_into(shifted.data() + 1, buf.b.data(), count, QUORUM_FLOAT16, op),
                QUORUM_OK);
      EXPECT_SAME_ELEMENTS(QUORUM_FLOAT16, buf.want.data(), shifted.data() + 1, count, "shifted");
      std::vector<unsigned char> self_want(count * 2);
      for (size_t i = 0; i < count; ++i)
        ref_element(QUORUM_FLOAT16, op, buf.a.data(), buf.a.data(), self_want.data(), i);
      x = buf.a;
      ASSERT_EQ(reduce_into(x.data(), x.data(), count, QUORUM_FLOAT16, op), QUORUM_OK);
      EXPECT_SAME_ELEMENTS(QUORUM_FLOAT16, self_want.data(), x.data(), count, "self");
    }
    std::vector<unsigned char> avg = buf.a, want(count * 2);
    for (size_t i = 0; i < count; ++i)
      store(want.data(), i, f16_rounder().round(decode_f16(load<uint16_t>(avg.data(), i)) / 5));
    ASSERT_EQ(scale_average(avg.data(), count, QUORUM_FLOAT16, 5), QUORUM_OK);
    EXPECT_SAME_ELEMENTS(QUORUM_FLOAT16, want.data(), avg.data(), count, "scale " << f16c);
  }
  knob_reduce_f16c.set_override(std::nullopt);
}

// ---- averages ----

TEST(ReduceKernels, AvgReducesAsSumThenScales) {
  const int nranks = 3;
  for (quorum_dtype_t dt : kDtypes) {
    const size_t count = 1003, es = dtype_size(dt);
    Buffers buf(dt, count, 77 + dt);
    std::vector<unsigned char> avg = buf.a, sum = buf.a;
    ASSERT_EQ(reduce_into(avg.data(), buf.b.data(), count, dt, QUORUM_AVG), QUORUM_OK);
    ASSERT_EQ(reduce_into(sum.data(), buf.b.data(), count, dt, QUORUM_SUM), QUORUM_OK);
    EXPECT_SAME_ELEMENTS(dt, sum.data(), avg.data(), count, dtype_name(dt));
    // Reference for the scaling, element by element (also through a
    // byte-misaligned copy).
    std::vector<unsigned char> want(count * es);
    for (size_t i = 0; i < count; ++i) {
      switch (dt) {
        case QUORUM_FLOAT32:
          store(want.data(), i, load<float>(sum.data(), i) / 3.0f);
          break;
        case QUORUM_FLOAT64:
          store(want.data(), i, load<double>(sum.data(), i) / 3.0);
          break;
        case QUORUM_FLOAT16:
          store(want.data(), i, f16_rounder().round(decode_f16(load<uint16_t>(sum.data(), i)) / 3));
          break;
        case QUORUM_BFLOAT16:
          store(want.data(), i,
                bf16_rounder().round(decode_bf16(load<uint16_t>(sum.data(), i)) / 3));
          break;
        case QUORUM_INT32:
          store(want.data(), i, int32_t(load<int32_t>(sum.data(), i) / 3));
          break;
        case QUORUM_INT64:
          store(want.data(), i, int64_t(load<int64_t>(sum.data(), i) / 3));
          break;
      }
    }
    std::vector<unsigned char> shifted(count * es + 3);
    std::memcpy(shifted.data() + 3, avg.data(), count * es);
    ASSERT_EQ(scale_average(avg.data(), count, dt, nranks), QUORUM_OK);
    EXPECT_SAME_ELEMENTS(dt, want.data(), avg.data(), count, dtype_name(dt));
    ASSERT_EQ(scale_average(shifted.data() + 3, count, dt, nranks), QUORUM_OK);
    EXPECT_SAME_ELEMENTS(dt, want.data(), shifted.data() + 3, count, dtype_name(dt));
  }
}

TEST(ReduceKernels, IntegerAverageTruncatesTowardZero) {
  int32_t v[] = {7, -7, 8, -1, INT32_MIN};
  ASSERT_EQ(scale_average(v, 5, QUORUM_INT32, 2), QUORUM_OK);
  EXPECT_EQ(v[0], 3);
  EXPECT_EQ(v[1], -3);
  EXPECT_EQ(v[2], 4);
  EXPECT_EQ(v[3], 0);
  EXPECT_EQ(v[4], INT32_MIN / 2);
  int64_t w[] = {10, -10};
  ASSERT_EQ(scale_average(w, 2, QUORUM_INT64, 4), QUORUM_OK);
  EXPECT_EQ(w[0], 2);
  EXPECT_EQ(w[1], -2);
}

TEST(ReduceKernels, ScaleAverageRejectsBadRankCount) {
  float v[] = {6.0f};
  EXPECT_EQ(scale_average(v, 1, QUORUM_FLOAT32, 0), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(scale_average(v, 1, QUORUM_FLOAT32, -2), QUORUM_ERR_INVALID_ARG);
  EXPECT_EQ(v[0], 6.0f);
  ASSERT_EQ(scale_average(v, 1, QUORUM_FLOAT32, 1), QUORUM_OK);
  EXPECT_EQ(v[0], 6.0f);
}

// ---- names and sizes ----

TEST(Dtype, SizesAndNames) {
  EXPECT_EQ(quorum_dtype_size(QUORUM_FLOAT32), 4u);
  EXPECT_EQ(quorum_dtype_size(QUORUM_FLOAT64), 8u);
  EXPECT_EQ(quorum_dtype_size(QUORUM_FLOAT16), 2u);
  EXPECT_EQ(quorum_dtype_size(QUORUM_BFLOAT16), 2u);
  EXPECT_EQ(quorum_dtype_size(QUORUM_INT32), 4u);
  EXPECT_EQ(quorum_dtype_size(QUORUM_INT64), 8u);
  EXPECT_EQ(quorum_dtype_size(static_cast<quorum_dtype_t>(6)), 0u);
  EXPECT_EQ(quorum_dtype_size(static_cast<quorum_dtype_t>(-1)), 0u);
  EXPECT_STREQ(dtype_name(QUORUM_BFLOAT16), "bfloat16");
  EXPECT_STREQ(quorum_dtype_name(QUORUM_FLOAT16), "float16");
  EXPECT_STREQ(quorum_dtype_name(QUORUM_INT64), "int64");
  EXPECT_STREQ(quorum_dtype_name(static_cast<quorum_dtype_t>(6)), "unknown");
  EXPECT_STREQ(dtype_name(static_cast<quorum_dtype_t>(9)), "unknown");
  EXPECT_STREQ(op_name(QUORUM_AVG), "avg");
  EXPECT_STREQ(op_name(static_cast<quorum_op_t>(9)), "unknown");
  EXPECT_TRUE(valid_dtype(QUORUM_INT64));
  EXPECT_FALSE(valid_dtype(static_cast<quorum_dtype_t>(6)));
  EXPECT_TRUE(valid_op(QUORUM_MIN));
  EXPECT_FALSE(valid_op(static_cast<quorum_op_t>(5)));
}

}  // namespace
}  // namespace quorum
