// Lion, a built-in optimizer written as a user-defined one (custom_optimizer.h): its update
// rule, registered on first use, with the CPU reference here and the CUDA kernel in
// src/backend/cuda/kernels/lion_kernels.cu.
#include <mutex>

#include "optim/lion_math.h"
#include "optim/update_rules.h"

namespace sg {

namespace {

// As lion_kernel: each product rounded on its own.
void lion_cpu(const UpdateArgs& a) {
  if (a.sched[sched::kSkip] != 0.0f) return;  // a skipped step (train.on_nan skip)
  const LionConstants c = lion_constants(a);
  const float lr = a.sched[sched::kLr], decay = 1.0f - lr * a.hyper[hyper::kWeightDecay];
  for (const UpdateTensor& t : a.tensors) {
    float* m = t.state[0];
    for (int64_t i = 0; i < t.size; ++i) {
      const float gi = t.grad[i], mi = m[i];
      const float bm = c.beta1 * mi, bg = c.one_minus_beta1 * gi;
      const float u = bm + bg;
      const float s = u > 0.0f ? 1.0f : (u < 0.0f ? -1.0f : 0.0f);
      const float pd = t.param[i] * decay, step = lr * s;
      t.param[i] = pd - step;
      const float km = c.beta2 * mi, kg = c.one_minus_beta2 * gi;
      m[i] = km + kg;
    }
  }
}

const char* lion_rule() {
  static std::once_flag once;
  std::call_once(once, [] {
    UpdateRuleDef d;
    d.name = "lion";
    d.state = {{"m", 0.0}};
    d.cpu = lion_cpu;
    d.honours_skip = true;
#ifdef STEPGRAPH_HAVE_CUDA
    d.cuda = cuda::lion_update;
#endif
    register_update_rule(std::move(d));
  });
  return "lion";
}

}  // namespace

Lion::Lion(double lr, double beta1, double beta2, double weight_decay, Schedule s)
    : CustomOptimizer(lion_rule(), lr, weight_decay, s, {beta1, beta2}) {
  SG_REQUIRE(beta1 >= 0 && beta1 < 1, "lion: beta1 must be in [0, 1), got ", beta1);
  SG_REQUIRE(beta2 >= 0 && beta2 < 1, "lion: beta2 must be in [0, 1), got ", beta2);
}

std::string Lion::describe() const {
  return cat("lion(lr=", lr_, ", betas=(", constants()[0], ", ", constants()[1], "), weight_decay=", weight_decay_,
             ", schedule=", schedule_.describe(), clip_text(), ")");
}

}  // namespace sg
