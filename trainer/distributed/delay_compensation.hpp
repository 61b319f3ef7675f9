// delay_compensation.hpp: DC-ASGD's first-order correction of late gradients
// for the partial modes (--delay-compensation L).
//
// A gradient g that missed its round was computed at parameters w_then and
// rides in a later round (the carry), applied at w_now. DC-ASGD (Zheng et al.,
// "Asynchronous SGD with Delay Compensation", ICML 2017) approximates the
// gradient at w_now by its Taylor expansion with the Hessian replaced by the
// outer product's diagonal:
//   g(w_now) ~ g + lambda * g * g * (w_now - w_then)          (element-wise)
// with the adaptive lambda = L / sqrt(meansquare(g)) (DC-ASGD-a; meansquare an
// exponential average of g * g, decay 0.95). The carry itself adds W * g
// (--carry-weight); this component adds W times the correction term to the
// rank's next posted gradient, computed against the parameters that gradient
// was computed at. Host memory only.
#pragma once

#include <cstddef>
#include <vector>

namespace quorum::trainer {

class DelayCompensation {
 public:
  // lambda0: L above (> 0); carry_weight: W; count: gradient elements covered.
  DelayCompensation(double lambda0, double carry_weight, size_t count);

  // Before posting the gradient `grads` computed at `params` (count floats
  // each): if the previous posted gradient was late, adds its correction to
  // grads; then remembers grads (uncorrected) and params for the next call.
  void before_post(float *grads, const float *params);
  // After the round of the last post: own_fresh false means that gradient
  // missed it and rides in a later round, to be corrected at the next post.
  void after_round(bool own_fresh) { pending_ = !own_fresh; }
  bool pending() const { return pending_; }

 private:
  float scale_;  // lambda0 * carry_weight
  std::vector<float> last_grad_, last_params_, mean_square_;
  bool pending_ = false;
  bool first_ = true;
};

}  // namespace quorum::trainer
