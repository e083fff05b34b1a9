// A graph model's batch from Python: dicts by name of host arrays (numpy, CPU tensors: copied to
// the host and uploaded) or of CUDA tensors (copied device to device into the slots, as one-array
// batches are). The checks of names and shapes are the engine's (Trainer::set_batch_device).
#include <algorithm>
#include <climits>
#include <tuple>

#include "common.h"

namespace sgpy {

namespace {


sg::HostArray host_named(const Imported& a, const std::string& label) {
  return a.is_integer() ? host_labels(a, label, INT32_MAX, true) : host_f32(a, label);
}

// A CUDA tensor as the engine takes it: float32 or int32 (int64, torch.long, is converted on the
// device by its own framework), C-contiguous, on the trainer's device.
Imported device_named(const PyTrainer& s, Imported a, const std::string& label, sg::DeviceArray* out) {
  if (!s.cuda)
    throw InputError(label + ": the trainer runs on cpu, so it takes host arrays (numpy or CPU tensors), got " +
                     a.describe());
  if (a.device_id != s.device_id)
    throw InputError(sg::cat(label, ": the trainer runs on cuda:", s.device_id, ", got ", a.describe()));
  if (a.is(kInt, 64)) {
    nb::object conv;
    if (nb::hasattr(a.source, "astype")) conv = a.source.attr("astype")("int32");
    else if (nb::hasattr(a.source, "int")) conv = a.source.attr("int")();
    else throw InputError(label + ": expected int32 labels, got " + a.describe() + " (convert with .astype('int32'))");
    a = import_array(conv, label);
  }
  if (!a.is(kFloat, 32) && !a.is(kInt, 32))
    throw InputError(label + ": expected float32 values or int32 labels, got " + a.describe() +
                     " (convert on the device first: .float() / .astype('float32'))");
  if (!a.c_contiguous())
    throw InputError(label + ": a CUDA tensor must be C-contiguous (row-major), got " + a.describe() +
                     " with other strides (use .contiguous() / cupy.ascontiguousarray)");
  out->data = a.array.data();
  out->dtype = a.is(kInt, 32) ? sg::DType::I32 : sg::DType::F32;
  out->shape.clear();
  for (size_t i = 0; i < a.ndim(); ++i) out->shape.push_back(a.dim(i));
  return a;
}

nb::dict as_dict(nb::handle arrays, const std::string& what) {
  if (!nb::isinstance<nb::dict>(arrays))
    throw InputError(what + ": this trainer's model has named inputs: expected a dict of arrays by name, got " +
                     py_type_name(arrays));
  return nb::cast<nb::dict>(arrays);
}

}  // namespace

sg::NamedArrays named_arrays(nb::handle arrays, const std::string& what) {
  sg::NamedArrays out;
  for (auto [k, v] : as_dict(arrays, what)) {
    const std::string name = nb::cast<std::string>(k);
    const std::string label = what + "['" + name + "']";
    Imported a = import_array(v, label);
    if (a.on_device)
      throw InputError(label + ": expected a host array (numpy or a CPU tensor), got " + a.describe() +
                       " (CUDA tensors are taken by one_step and set_batch only)");
    out.emplace(name, host_named(a, label));
  }
  return out;
}

NamedBatch named_batch(const PyTrainer& s, nb::handle X, nb::handle y, const std::string& fn) {
  NamedBatch b;
  struct Entry {
    std::string where, label, name;  // "inputs['x']", "one_step: inputs['x']", "x"
    bool target;
    Imported a;
  };
  std::vector<Entry> entries;
  for (const auto& [what, arrays, target] : {std::make_tuple(std::string("inputs"), X, false),
                                              std::make_tuple(std::string("targets"), y, true)})
    for (auto [k, v] : as_dict(arrays, fn + ": " + what)) {
      const std::string name = nb::cast<std::string>(k), where = what + "['" + name + "']";
      entries.push_back({where, fn + ": " + where, name, target, import_array(v, fn + ": " + where)});
    }
  for (const Entry& e : entries) b.device = b.device || e.a.on_device;
  for (const Entry& e : entries)
    if (e.a.on_device != b.device) {
      const Entry& other = *std::find_if(entries.begin(), entries.end(), [&](const Entry& o) { return o.a.on_device; });
      throw InputError(fn + ": " + other.where + " is " + other.a.describe() + " but " + e.where + " is " +
                       e.a.describe() + ": pass every array as a CUDA tensor or every one as a host array");
    }
  for (Entry& e : entries) {
    if (!b.device) {
      (e.target ? b.host_targets : b.host_inputs).emplace(e.name, host_named(e.a, e.label));
      continue;
    }
    sg::DeviceArray d;
    b.keep.push_back(device_named(s, e.a, e.label, &d));
    (e.target ? b.device_targets : b.device_inputs).emplace(e.name, d);
  }
  return b;
}

void feed_named(sg::Trainer& t, const NamedBatch& b) {
  if (!b.device) return t.set_batch(b.host_inputs, b.host_targets);
  cuda_device_synchronize();  // the producer's framework may still be writing on its own stream
  t.set_batch_device(b.device_inputs, b.device_targets);
  t.backend().synchronize();  // the caller may free or overwrite the tensors at once
}

}  // namespace sgpy
