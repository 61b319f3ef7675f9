// cpu_kernels.hpp: the element-wise and pooling loops of the cpu backend.
//
// Branch-free so the compiler vectorises them; built for AVX-512, AVX2 and a
// generic x86-64 with the best chosen at load time (target_clones), since
// random-sign activations make branchy loops mispredict half the time. The
// 2x2 max-pool's rows also have AVX-512 intrinsics, taken where the CPU has it.
#pragma once

#include <cstddef>

#include "trainer/backend.hpp"

namespace quorum::trainer::cpu_kernels {

void relu_forward(size_t n, const float *x, float *y);
void relu_backward(size_t n, const float *y, const float *dy, float *dx);
// With AVX-512 where the CPU has it (fm-s's rows of 14 and 7 outputs are too
// short for the compiler's 16-lane loops), else the portable loops below.
void maxpool2_forward(const PoolShape &s, const float *x, float *y);
// y is the forward output. Writes every element of dx (no separate zeroing).
void maxpool2_backward(const PoolShape &s, const float *x, const float *y, const float *dy,
                       float *dx);
// A relu followed by a 2x2 max-pool, in one pass and without the relu's output:
// y = each window's maximum where it is > 0, else 0; the backward routes dy as
// maxpool2_backward where y > 0 and writes 0 elsewhere. Bit for bit what the
// two layers give (NaN inputs aside).
void relu_maxpool2_forward(const PoolShape &s, const float *x, float *y);
void relu_maxpool2_backward(const PoolShape &s, const float *x, const float *y, const float *dy,
                            float *dx);
// Both in plain loops for the compiler to vectorise, with or without the relu
// (the calls above take AVX-512 where the CPU has it; tests check both).
void maxpool2_forward_portable(const PoolShape &s, const float *x, float *y, bool relu = false);
void maxpool2_backward_portable(const PoolShape &s, const float *x, const float *y, const float *dy,
                                float *dx, bool relu = false);
// relu_maxpool2_* with x and dx in oneDNN's nChw16c layout (channels in
// blocks of 16, innermost: [n][c / 16][h][w][16]; s.channels a multiple of 16),
// the conv layers' own, and y and dy in NCHW or, with y_blocked/dy_blocked,
// nChw16c too. The backward finds each window's maximum again from x (no y).
// Plain loops: one window position's 16 channels fill a vector, and an
// AVX-512 version (scatter and gather for the NCHW side) measured no faster;
// the pool is bound by reading the conv's output.
void relu_maxpool2_forward_nchw16c(const PoolShape &s, const float *x, float *y, bool y_blocked);
void relu_maxpool2_backward_nchw16c(const PoolShape &s, const float *x, const float *dy, float *dx,
                                    bool dy_blocked);
void bias_grad(int batch, int out, const float *dy, float *db);
void sgd_update(size_t n, float lr, float momentum, float weight_decay, float *params,
                const float *grads, float *velocity);
void scale(size_t n, float alpha, float *y);
// avg = decay * avg + rest * x (rest = 1 - decay, rounded as the caller's type).
void average_into(size_t n, float decay, float rest, float *avg, const float *x);

}  // namespace quorum::trainer::cpu_kernels
