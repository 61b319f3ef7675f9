// reduce_kernels.cpp: the element-wise reduction loops and their dispatch.
//
// Each (dtype, op) pair gets its own plain loop over restrict pointers, which
// GCC vectorises; the loops are cloned for AVX-512, AVX2 and the baseline ISA
// and the dynamic loader picks the best one (one binary runs anywhere). The
// collectives library is built at the project's optimisation level (-O2 in
// debugoptimized builds), where GCC only vectorises loops of known trip count,
// so this file raises itself to -O3. It also drops -ftrapping-math: no FP
// trap is ever enabled, and the 16-bit conversions and NaN-aware MIN/MAX only
// vectorise when the compiler may compute both sides of a select.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "no-trapping-math")
#endif

#include "collectives/reduce/reduce_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "collectives/reduce/half.hpp"
#include "runtime/knobs.hpp"
#include "runtime/memory.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define QUORUM_HAVE_F16C_PATH 1
#endif

// No clones under ThreadSanitizer: their ifunc resolvers run before the TSan
// runtime is initialised and crash the process at load time.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute) && \
    !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define QUORUM_KERNEL_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef QUORUM_KERNEL_CLONES
#define QUORUM_KERNEL_CLONES
#endif

namespace quorum {

Knob<bool> knob_reduce_f16c("QUORUM_REDUCE_F16C", true,
                            "float16 reductions convert with the CPU's F16C instructions when it "
                            "has them (false: portable code, same results)");

namespace {

// Codecs: how an element is stored and in which type it is computed.
template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static T load(T x) { return x; }
  static T store(T x) { return x; }
};
struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t x) { return half_to_float(x); }
  static uint16_t store(float x) { return float_to_half(x); }
};
struct BFloat16 {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t x) { return bf16_to_float(x); }
  static uint16_t store(float x) { return float_to_bf16(x); }
};

// Operators on the compute type. Integers go through the unsigned type so that
// overflow wraps (two's complement) instead of being undefined.
template <typename T>
struct SumOp {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return T(U(a) + U(b));
    } else {
      return a + b;
    }
  }
};
template <typename T>
struct ProdOp {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return T(U(a) * U(b));
    } else {
      return a * b;
    }
  }
};
// Floating MIN/MAX: NaN in, NaN out (one of the NaN inputs); on equality the
// sign decides, so min(-0, +0) == min(+0, -0) == -0. Written as selects
// between loaded values so that the loops if-convert and vectorise.
template <typename T>
struct MinOp {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      const T nan = a != a ? a : b;
      const T zeros = -((-a) + (-b));  // -0 if either zero is -0
      T r = b < a ? b : a;
      r = (a == b && a == T(0)) ? zeros : r;
      return (a != a || b != b) ? nan : r;
    }
  }
};
template <typename T>
struct MaxOp {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      const T nan = a != a ? a : b;
      const T zeros = a + b;  // +0 unless both zeros are -0
      T r = a < b ? b : a;
      r = (a == b && a == T(0)) ? zeros : r;
      return (a != a || b != b) ? nan : r;
    }
  }
};

// Type-erased entry points of one (dtype, op) pair.
struct Kernels {
  void (*into)(void *x, const void *y, size_t n);                // x = x op y, disjoint
  void (*out)(void *o, const void *a, const void *b, size_t n);  // o = a op b, o disjoint
  void (*self)(void *x, size_t n);                               // x = x op x
};

// The clones are ordinary functions with restrict parameters (ifuncs are
// never inlined, so the aliasing promise reaches the loop intact).
#define QUORUM_REDUCE_KERNELS(NAME, CODEC, OP)                                                    \
  QUORUM_KERNEL_CLONES void into_##NAME(CODEC::Storage *__restrict x,                             \
                                        const CODEC::Storage *__restrict y, size_t n) {           \
    using Op = OP<CODEC::Compute>;                                                                \
    for (size_t i = 0; i < n; ++i)                                                                \
      x[i] = CODEC::store(Op::apply(CODEC::load(x[i]), CODEC::load(y[i])));                       \
  }                                                                                               \
  QUORUM_KERNEL_CLONES void out_##NAME(CODEC::Storage *__restrict o,                              \
                                       const CODEC::Storage *__restrict a,                        \
                                       const CODEC::Storage *__restrict b, size_t n) {            \
    using Op = OP<CODEC::Compute>;                                                                \
    for (size_t i = 0; i < n; ++i)                                                                \
      o[i] = CODEC::store(Op::apply(CODEC::load(a[i]), CODEC::load(b[i])));                       \
  }                                                                                               \
  void self_##NAME(CODEC::Storage *x, size_t n) {                                                 \
    using Op = OP<CODEC::Compute>;                                                                \
    for (size_t i = 0; i < n; ++i)                                                                \
      x[i] = CODEC::store(Op::apply(CODEC::load(x[i]), CODEC::load(x[i])));                       \
  }                                                                                               \
  constexpr Kernels kernels_##NAME = {                                                            \
      [](void *x, const void *y, size_t n) {                                                      \
        into_##NAME(static_cast<CODEC::Storage *>(x), static_cast<const CODEC::Storage *>(y), n); \
      },                                                                                          \
      [](void *o, const void *a, const void *b, size_t n) {                                       \
        out_##NAME(static_cast<CODEC::Storage *>(o), static_cast<const CODEC::Storage *>(a),      \
                   static_cast<const CODEC::Storage *>(b), n);                                    \
      },                                                                                          \
      [](void *x, size_t n) { self_##NAME(static_cast<CODEC::Storage *>(x), n); }};

#define QUORUM_REDUCE_KERNELS_ALL_OPS(TNAME, CODEC)                                  \
  QUORUM_REDUCE_KERNELS(TNAME##_sum, CODEC, SumOp)                                   \
  QUORUM_REDUCE_KERNELS(TNAME##_prod, CODEC, ProdOp)                                 \
  QUORUM_REDUCE_KERNELS(TNAME##_min, CODEC, MinOp)                                   \
  QUORUM_REDUCE_KERNELS(TNAME##_max, CODEC, MaxOp)                                   \
  QUORUM_KERNEL_CLONES void scale_##TNAME(CODEC::Storage *__restrict x, size_t n,    \
                                          CODEC::Compute divisor) {                  \
    for (size_t i = 0; i < n; ++i) x[i] = CODEC::store(CODEC::load(x[i]) / divisor); \
  }

using F32 = Native<float>;
using F64 = Native<double>;
using I32 = Native<int32_t>;
using I64 = Native<int64_t>;

QUORUM_REDUCE_KERNELS_ALL_OPS(f32, F32)
QUORUM_REDUCE_KERNELS_ALL_OPS(f64, F64)
QUORUM_REDUCE_KERNELS_ALL_OPS(f16, Half)
QUORUM_REDUCE_KERNELS_ALL_OPS(bf16, BFloat16)
QUORUM_REDUCE_KERNELS_ALL_OPS(i32, I32)
QUORUM_REDUCE_KERNELS_ALL_OPS(i64, I64)

#if QUORUM_HAVE_F16C_PATH
// float16 on CPUs with F16C: the compiler does not vectorise 16-bit float
// conversions by itself, so the reduction runs in L1-sized chunks: convert
// both operands to float32 with 8-wide F16C instructions, apply the float32
// kernel of the same op (identical semantics: the portable path also computes
// in float32 and rounds to nearest-even), convert back.
__attribute__((target("avx2,f16c"))) void f16c_to_float(const uint16_t *in, float *out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i))));
  for (; i < n; ++i) out[i] = _cvtsh_ss(in[i]);
}

__attribute__((target("avx2,f16c"))) void f16c_to_half(const float *in, uint16_t *out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT);
}

constexpr size_t kStageElems = 1024;  // 4 KiB of float32 per operand

template <const Kernels *F32>
void staged_f16_out(void *o, const void *a, const void *b, size_t n) {
  alignas(64) float fa[kStageElems];
  alignas(64) float fb[kStageElems];
  auto *ho = static_cast<uint16_t *>(o);
  auto *ha = static_cast<const uint16_t *>(a);
  auto *hb = static_cast<const uint16_t *>(b);
  for (size_t done = 0; done < n; done += kStageElems) {
    const size_t m = std::min(kStageElems, n - done);
    f16c_to_float(ha + done, fa, m);
    f16c_to_float(hb + done, fb, m);
    F32->into(fa, fb, m);
    f16c_to_half(fa, ho + done, m);
  }
}

// x op= y: the same staging with x as both input and output (each block is
// read whole before it is written).
template <const Kernels *F32>
void staged_f16_into(void *x, const void *y, size_t n) {
  staged_f16_out<F32>(x, x, y, n);
}

template <const Kernels *F32>
void staged_f16_self(void *x, size_t n) {
  alignas(64) float fx[kStageElems];
  auto *hx = static_cast<uint16_t *>(x);
  for (size_t done = 0; done < n; done += kStageElems) {
    const size_t m = std::min(kStageElems, n - done);
    f16c_to_float(hx + done, fx, m);
    F32->self(fx, m);
    f16c_to_half(fx, hx + done, m);
  }
}

void staged_f16_scale(uint16_t *x, size_t n, float divisor) {
  alignas(64) float fx[kStageElems];
  for (size_t done = 0; done < n; done += kStageElems) {
    const size_t m = std::min(kStageElems, n - done);
    f16c_to_float(x + done, fx, m);
    scale_f32(fx, m, divisor);
    f16c_to_half(fx, x + done, m);
  }
}

#define QUORUM_STAGED_F16(OPNAME)                                                    \
  constexpr Kernels kernels_f16c_##OPNAME = {staged_f16_into<&kernels_f32_##OPNAME>, \
                                             staged_f16_out<&kernels_f32_##OPNAME>,  \
                                             staged_f16_self<&kernels_f32_##OPNAME>};
QUORUM_STAGED_F16(sum)
QUORUM_STAGED_F16(prod)
QUORUM_STAGED_F16(min)
QUORUM_STAGED_F16(max)

bool use_f16c() {
  // (__builtin_cpu_supports knows "avx2", which includes the OS check for
  // AVX state, but not "f16c" in every compiler: read CPUID leaf 1 for it.)
  static const bool cpu_has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return cpu_has && knob_reduce_f16c.get();
}
#else
bool use_f16c() {
  return false;
}
#endif

#define QUORUM_SELECT_OP(TNAME)       \
  switch (op) {                       \
    case QUORUM_SUM:                  \
    case QUORUM_AVG:                  \
      return &kernels_##TNAME##_sum;  \
    case QUORUM_PROD:                 \
      return &kernels_##TNAME##_prod; \
    case QUORUM_MIN:                  \
      return &kernels_##TNAME##_min;  \
    case QUORUM_MAX:                  \
      return &kernels_##TNAME##_max;  \
  }                                   \
  return nullptr;

// nullptr for an unknown dtype or op.
const Kernels *select_kernels(quorum_dtype_t dtype, quorum_op_t op) {
  switch (dtype) {
    case QUORUM_FLOAT32:
      QUORUM_SELECT_OP(f32)
    case QUORUM_FLOAT64:
      QUORUM_SELECT_OP(f64)
    case QUORUM_FLOAT16:
#if QUORUM_HAVE_F16C_PATH
      if (use_f16c()) {
        QUORUM_SELECT_OP(f16c)
      }
#endif
      QUORUM_SELECT_OP(f16)
    case QUORUM_BFLOAT16:
      QUORUM_SELECT_OP(bf16)
    case QUORUM_INT32:
      QUORUM_SELECT_OP(i32)
    case QUORUM_INT64:
      QUORUM_SELECT_OP(i64)
  }
  return nullptr;
}

constexpr const char *kSubsystem = "reduce";

Status check_args(size_t count, quorum_dtype_t dtype, quorum_op_t op, const char *what) {
  if (!valid_dtype(dtype))
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem, "{}: unknown dtype {}", what, int(dtype));
  if (!valid_op(op))
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem, "{}: unknown op {}", what, int(op));
  if (count > std::numeric_limits<size_t>::max() / dtype_size(dtype))
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem, "{}: count {} of {} overflows size_t", what,
                count, dtype_name(dtype));
  return kOk;
}

bool aligned(const void *p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// Byte-misaligned buffers (element types need natural alignment) are reduced
// chunk by chunk in aligned stack buffers. Each chunk reads both inputs before
// it writes, so out may also be exactly a or b here.
constexpr size_t kBounceBytes = 4096;

void bounce_reduce(const Kernels &k, size_t esize, void *out, const void *a, const void *b,
                   size_t count) {
  alignas(64) unsigned char ba[kBounceBytes];
  alignas(64) unsigned char bb[kBounceBytes];
  const size_t per_chunk = kBounceBytes / esize;
  auto *o = static_cast<unsigned char *>(out);
  auto *pa = static_cast<const unsigned char *>(a);
  auto *pb = static_cast<const unsigned char *>(b);
  for (size_t done = 0; done < count; done += per_chunk) {
    const size_t n = std::min(per_chunk, count - done);
    const size_t off = done * esize;
    std::memcpy(ba, pa + off, n * esize);
    std::memcpy(bb, pb + off, n * esize);
    k.into(ba, bb, n);
    std::memcpy(o + off, ba, n * esize);
  }
}

}  // namespace

Status reduce_into(void *inout, const void *in, size_t count, quorum_dtype_t dtype,
                   quorum_op_t op) {
  QUORUM_CHECK(check_args(count, dtype, op, "reduce_into"));
  if (count == 0) return kOk;
  if (inout == nullptr || in == nullptr)
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem, "reduce_into: null buffer (count {})", count);
  const size_t esize = dtype_size(dtype);
  const Kernels &k = *select_kernels(dtype, op);
  if (!aligned(inout, esize) || !aligned(in, esize)) {
    if (inout != in && ranges_overlap(inout, count * esize, in, count * esize))
      return fail(QUORUM_ERR_INVALID_ARG, kSubsystem,
                  "reduce_into: buffers overlap partially ({} x {})", count, dtype_name(dtype));
    bounce_reduce(k, esize, inout, inout, in, count);
  } else if (inout == in) {
    k.self(inout, count);
  } else if (ranges_overlap(inout, count * esize, in, count * esize)) {
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem,
                "reduce_into: buffers overlap partially ({} x {})", count, dtype_name(dtype));
  } else {
    k.into(inout, in, count);
  }
  return kOk;
}

Status reduce_out(void *out, const void *a, const void *b, size_t count, quorum_dtype_t dtype,
                  quorum_op_t op) {
  QUORUM_CHECK(check_args(count, dtype, op, "reduce_out"));
  if (count == 0) return kOk;
  if (out == nullptr || a == nullptr || b == nullptr)
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem, "reduce_out: null buffer (count {})", count);
  // Every op is commutative bit for bit (NaN payloads aside), so out == b is
  // the same as reducing a into out.
  if (out == a) return reduce_into(out, b, count, dtype, op);
  if (out == b) return reduce_into(out, a, count, dtype, op);
  const size_t esize = dtype_size(dtype);
  const size_t bytes = count * esize;
  if (ranges_overlap(out, bytes, a, bytes) || ranges_overlap(out, bytes, b, bytes))
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem,
                "reduce_out: output overlaps an input partially ({} x {})", count,
                dtype_name(dtype));
  const Kernels &k = *select_kernels(dtype, op);
  if (!aligned(out, esize) || !aligned(a, esize) || !aligned(b, esize)) {
    bounce_reduce(k, esize, out, a, b, count);
  } else {
    k.out(out, a, b, count);
  }
  return kOk;
}

namespace {

template <typename Storage, typename Compute>
void scale_maybe_misaligned(void (*scale)(Storage *, size_t, Compute), void *buf, size_t count,
                            Compute divisor) {
  if (aligned(buf, sizeof(Storage))) {
    scale(static_cast<Storage *>(buf), count, divisor);
    return;
  }
  alignas(64) Storage bounce[kBounceBytes / sizeof(Storage)];
  constexpr size_t per_chunk = kBounceBytes / sizeof(Storage);
  auto *p = static_cast<unsigned char *>(buf);
  for (size_t done = 0; done < count; done += per_chunk) {
    const size_t n = std::min(per_chunk, count - done);
    std::memcpy(bounce, p + done * sizeof(Storage), n * sizeof(Storage));
    scale(bounce, n, divisor);
    std::memcpy(p + done * sizeof(Storage), bounce, n * sizeof(Storage));
  }
}

}  // namespace

Status scale_average(void *buf, size_t count, quorum_dtype_t dtype, int nranks) {
  QUORUM_CHECK(check_args(count, dtype, QUORUM_AVG, "scale_average"));
  if (nranks < 1)
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem, "scale_average: nranks {} < 1", nranks);
  if (count == 0 || nranks == 1) return kOk;
  if (buf == nullptr)
    return fail(QUORUM_ERR_INVALID_ARG, kSubsystem, "scale_average: null buffer (count {})", count);
  switch (dtype) {
    case QUORUM_FLOAT32:
      scale_maybe_misaligned(&scale_f32, buf, count, float(nranks));
      break;
    case QUORUM_FLOAT64:
      scale_maybe_misaligned(&scale_f64, buf, count, double(nranks));
      break;
    case QUORUM_FLOAT16:
#if QUORUM_HAVE_F16C_PATH
      if (use_f16c()) {
        scale_maybe_misaligned(&staged_f16_scale, buf, count, float(nranks));
        break;
      }
#endif
      scale_maybe_misaligned(&scale_f16, buf, count, float(nranks));
      break;
    case QUORUM_BFLOAT16:
      scale_maybe_misaligned(&scale_bf16, buf, count, float(nranks));
      break;
    case QUORUM_INT32:
      scale_maybe_misaligned(&scale_i32, buf, count, int32_t(nranks));
      break;
    case QUORUM_INT64:
      scale_maybe_misaligned(&scale_i64, buf, count, int64_t(nranks));
      break;
  }
  return kOk;
}

}  // namespace quorum
