// delay_compensation.cpp: DC-ASGD-a's correction, one pass per posted gradient.
#include "trainer/distributed/delay_compensation.hpp"

#include <cmath>

namespace quorum::trainer {

namespace {
constexpr float kMeanSquareDecay = 0.95f;  // DC-ASGD-a's m
constexpr float kEpsilon = 1e-7f;          // keeps lambda finite where g has been 0
}  // namespace

DelayCompensation::DelayCompensation(double lambda0, double carry_weight, size_t count)
    : scale_(static_cast<float>(lambda0 * carry_weight)),
      last_grad_(count),
      last_params_(count),
      mean_square_(count) {}

void DelayCompensation::before_post(float *grads, const float *params) {
  const size_t n = last_grad_.size();
  float *g_old = last_grad_.data(), *w_old = last_params_.data(), *ms = mean_square_.data();
  const float decay = first_ ? 0.0f : kMeanSquareDecay;
  for (size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    ms[i] = decay * ms[i] + (1.0f - decay) * g * g;
    if (pending_) {
      const float lambda = scale_ / (std::sqrt(ms[i]) + kEpsilon);
      grads[i] = g + lambda * g_old[i] * g_old[i] * (params[i] - w_old[i]);
    }
    g_old[i] = g;
    w_old[i] = params[i];
  }
  pending_ = false;
  first_ = false;
}

}  // namespace quorum::trainer
