// half.hpp: IEEE binary16 (float16) and bfloat16 <-> float32 conversions.
//
// Both 16-bit types are stored as uint16_t bit patterns. Reductions convert to
// float, compute, and round back to nearest-even: for +, *, / of two 16-bit
// values, float has at least 2p+2 significand bits, so this double rounding
// gives the correctly rounded 16-bit result. NaN stays NaN (made quiet, sign
// kept); overflow rounds to infinity. The code is branch-light so that the
// reduction loops around it vectorise, and it never relies on float
// subnormals surviving denormals-are-zero modes on the way to float.
#pragma once

#include <cstdint>
#include <cstring>

namespace quorum {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float half_to_float(uint16_t h) {
  // After F. Giesen's half_to_float_fast: shift exponent+mantissa into place,
  // rebias; infinities/NaN get the remaining exponent bias, subnormals are
  // renormalised with one float subtraction of normal numbers.
  constexpr uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (uint32_t(h) & 0x7fffu) << 13;
  const uint32_t exp = o & shifted_exp;
  o += (127u - 15u) << 23;
  // Both candidates are computed unconditionally and then selected, so that
  // the compiler can if-convert (and vectorise) without speculating float ops.
  const uint32_t inf_nan = o + ((128u - 16u) << 23);
  const uint32_t subnormal = float_bits(bits_float(o + (1u << 23)) - bits_float(113u << 23));
  o = exp == shifted_exp ? inf_nan : o;
  o = exp == 0 ? subnormal : o;
  return bits_float(o | ((uint32_t(h) & 0x8000u) << 16));
}

inline uint16_t float_to_half(float f) {
  // After F. Giesen's float_to_half_fast3_rtne.
  constexpr uint32_t f32_infty = 255u << 23;
  constexpr uint32_t f16_max = (127u + 16u) << 23;  // first float that is Inf in half
  constexpr uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = float_bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  // All three candidates are computed, then selected (see half_to_float).
  const uint32_t inf_nan = (u > f32_infty) ? 0x7e00u : 0x7c00u;  // NaN -> quiet NaN, else Inf
  // Half subnormal or zero: adding the magic aligns the 10 mantissa bits at the
  // bottom and the FPU rounds to nearest-even. (Large u make this float sum
  // Inf/NaN, but then the result is not selected.)
  const uint32_t subnormal = float_bits(bits_float(u) + bits_float(denorm_magic)) - denorm_magic;
  // Normal: rebias the exponent and round to nearest-even on the integer bits.
  const uint32_t normal = (u + ((15u - 127u) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  uint32_t o = u < (113u << 23) ? subnormal : normal;
  o = u >= f16_max ? inf_nan : o;
  return uint16_t(o | (sign >> 16));
}

inline float bf16_to_float(uint16_t b) {
  return bits_float(uint32_t(b) << 16);
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace quorum
