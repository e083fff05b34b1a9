#include <algorithm>
#include <cmath>

#include "stepgraph/nn.h"
#include "stepgraph/rng.h"

namespace sg {

std::string Init::str() const {
  switch (kind) {
    case Kind::He: return "he";
    case Kind::Xavier: return "xavier";
    case Kind::Normal: return cat("normal(", std, ")");
    case Kind::Zeros: return "zeros";
    case Kind::Ones: return "ones";
    case Kind::Constant: return cat("constant(", std, ")");
  }
  return "?";
}

HostArray init_parameter(const ParamSpec& spec, uint64_t seed) {
  HostArray a(DType::F32, spec.shape);
  float* v = a.data<float>();
  Rng rng(mix_seed(seed, spec.name));
  const int64_t n = a.numel();
  switch (spec.init.kind) {
    case Init::Kind::He: {
      double std = std::sqrt(2.0 / static_cast<double>(spec.fan_in));
      for (int64_t k = 0; k < n; ++k) v[k] = static_cast<float>(std * rng.normal());
      break;
    }
    case Init::Kind::Xavier: {
      double lim = std::sqrt(6.0 / static_cast<double>(spec.fan_in + spec.fan_out));
      for (int64_t k = 0; k < n; ++k) v[k] = static_cast<float>(rng.uniform(-lim, lim));
      break;
    }
    case Init::Kind::Normal:
      for (int64_t k = 0; k < n; ++k) v[k] = static_cast<float>(spec.init.std * rng.normal());
      break;
    case Init::Kind::Zeros: break;
    case Init::Kind::Ones: std::fill(v, v + n, 1.0f); break;
    case Init::Kind::Constant: std::fill(v, v + n, static_cast<float>(spec.init.std)); break;
  }
  return a;
}

TensorId GraphBuilder::parameter(const void* owner, const std::string& local,
                                 const std::string& name, const Shape& shape, Init init,
                                 int64_t fan_in, int64_t fan_out, bool trainable) {
  auto key = std::make_pair(owner, local);
  auto it = owned_.find(key);
  if (it != owned_.end()) {
    SG_REQUIRE(p_.tensor(it->second).shape == shape, "shared parameter '",
               p_.tensor(it->second).name, "' has shape ", shape_str(p_.tensor(it->second).shape),
               " but is reused where ", shape_str(shape), " is needed");
    return it->second;
  }
  TensorId t = p_.add_tensor({name, shape, DType::F32, trainable ? Role::Parameter : Role::Constant});
  owned_[key] = t;
  specs_.push_back({name, shape, init, fan_in, fan_out});
  return t;
}

std::string GraphBuilder::unique_name(const std::string& base) const {
  if (p_.find(base) == kNone) return base;
  for (int k = 1;; ++k)
    if (p_.find(cat(base, "#", k)) == kNone) return cat(base, "#", k);
}

TensorId GraphBuilder::tensor(const std::string& base, Shape shape, Role role, DType dtype) {
  return p_.add_tensor({unique_name(base), std::move(shape), dtype, role});
}

}  // namespace sg
