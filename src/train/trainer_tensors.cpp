// The trainer's persistent tensors by name (parameters, constants, optimizer state and the step
// scalars: one buffer, fixed offsets), read and written between host and device: params,
// set_params, state, the learning rate, the step counter and the non-finite watch.
#include <cmath>

#include "train/trainer_state.h"

namespace sg {

std::map<std::string, HostArray> Trainer::state() const {
  SG_REQUIRE(persistent_, "state: call compile first");
  std::map<std::string, HostArray> out;
  for (const std::string& name : persistent_->order) out[name] = read_tensor(name);
  return out;
}

HostArray Trainer::read_tensor(const std::string& name) const {
  settle();
  SG_REQUIRE(persistent_, "the trainer has no parameters yet: call compile first");
  auto it = persistent_->slots.find(name);
  SG_REQUIRE(it != persistent_->slots.end(), "no tensor named '", name, "'");
  HostArray a(it->second.info.dtype, it->second.info.shape);
  backend_->download(a.raw(), persistent_->buffer.data() + it->second.offset, a.nbytes());
  return a;
}

void Trainer::write_tensor(const std::string& name, const HostArray& a) {
  settle();
  auto it = persistent_->slots.find(name);
  SG_ASSERT(it != persistent_->slots.end());
  SG_ASSERT(a.dtype() == it->second.info.dtype && a.shape() == it->second.info.shape);
  backend_->upload(persistent_->buffer.data() + it->second.offset, a.raw(), a.nbytes());
  if (it->second.info.role != Role::Constant) return;
  // What the step-invariant prefix computed from the old value is stale (a checkpoint load).
  for (auto* vs : {&train_variants_, &eval_variants_})
    for (auto& kv : *vs) kv.second->exe->recompute_invariants();
  if (resident_variant_) resident_variant_->exe->recompute_invariants();
}

std::map<std::string, HostArray> Trainer::params() const {
  SG_REQUIRE(persistent_, "params: the trainer has no parameters yet: call compile first");
  std::map<std::string, HostArray> out;
  for (const ParamSpec& s : persistent_->specs) out[s.name] = read_tensor(s.name);
  return out;
}

void Trainer::set_params(const std::map<std::string, HostArray>& values) {
  SG_REQUIRE(persistent_, "set_params: the trainer has no parameters yet: call compile first");
  for (const auto& [name, a] : values) {
    auto it = persistent_->slots.find(name);
    bool is_param = it != persistent_->slots.end() && it->second.info.role == Role::Parameter;
    if (!is_param) {
      std::string known;
      for (const ParamSpec& s : persistent_->specs) known += (known.empty() ? "" : ", ") + s.name;
      throw Error(cat("set_params: no parameter named '", name, "' (parameters: ", known, ")"));
    }
    SG_REQUIRE(a.dtype() == DType::F32 && a.shape() == it->second.info.shape, "set_params: '", name,
               "' must be f32 ", shape_str(it->second.info.shape), ", got ", dtype_name(a.dtype()),
               " ", shape_str(a.shape()));
  }
  for (const auto& [name, a] : values) write_tensor(name, a);
}

void Trainer::set_lr(double lr) {
  SG_REQUIRE(std::isfinite(lr) && lr > 0, "set_lr: learning rate must be a positive number, got ", lr);
  SG_REQUIRE(persistent_, "set_lr: call compile first");
  HostArray h = read_tensor(kHyperTensor);
  h.data<float>()[hyper::kBaseLr] = static_cast<float>(lr);
  write_tensor(kHyperTensor, h);
}

double Trainer::lr() const {
  if (!persistent_) return optimizer_->lr();
  return read_tensor(kHyperTensor).data<float>()[hyper::kBaseLr];
}

NonFiniteSteps Trainer::nonfinite_steps() const {
  if (!persistent_ || !persistent_->slots.count(kWatchTensor)) return {};
  const HostArray w = read_tensor(kWatchTensor);
  return {w.data<int32_t>()[0], w.data<int32_t>()[1]};
}

int64_t Trainer::step() const {
  if (!persistent_) return 0;
  return read_tensor(kStepTensor).data<int32_t>()[0];
}

std::vector<TensorInfo> Trainer::persistent_tensors() const {
  SG_REQUIRE(persistent_, "call compile first, so the trainer knows its tensors");
  std::vector<TensorInfo> out;
  for (const std::string& name : persistent_->order) out.push_back(persistent_->slots.at(name).info);
  return out;
}

}  // namespace sg
