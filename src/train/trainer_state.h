// The Trainer's private parts (trainer.h declares them): shared by the files that define its
// members (trainer.cpp, trainer_tensors.cpp, evaluate.cpp, checkpoint.cpp, named_io.cpp, ...).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stepgraph/trainer.h"

namespace sg {

// One compiled program: its plan, its transient memory and its lowered form.
struct Trainer::Variant {
  Shape input_shape;
  bool training = true;
  Program program;
  MemoryPlan plan;
  DeviceBuffer transient;
  std::unique_ptr<Executable> exe;
  TensorId X = kNone, y = kNone, valid = kNone, pred = kNone, loss = kNone;
  std::vector<void*> ptrs;
  std::vector<std::pair<std::string, TensorId>> terms;  // custom steps' and graph models' named loss terms
  std::vector<std::pair<std::string, TensorId>> coefficients;  // a custom step's (CustomStep::coefficients)
  // Graph models: the inputs (model order), the outputs (model order) and the targets (term order).
  std::vector<TensorId> inputs, outputs, targets;
  int64_t last_used = 0;  // for the bounded shape cache
  bool resident = false;  // batches gathered in the step from a device-resident data set
};

// A device-resident data set: one X and one y, or a graph model's arrays in slot order (its
// inputs, then its terms' targets), each [N, slot shape...].
struct Trainer::Resident {
  HostArray X, y;
  std::vector<HostArray> inputs, targets;
  int64_t batch = 0;
  GatherAttrs attrs;
};

// Tensors that live as long as the trainer: one buffer, fixed offsets, found by name.
struct Trainer::Persistent {
  struct Slot {
    size_t offset;
    TensorInfo info;
  };
  DeviceBuffer buffer;
  std::map<std::string, Slot> slots;
  std::vector<std::string> order;  // creation order (checkpoint order)
  std::vector<ParamSpec> specs;
};

// Token ids that the batch's X feeds to an embedding must be integers in [0, vocab): checked on
// the host before the step, with the CPU kernel's message (a CUDA kernel cannot stop a step).
// `what` names the rows in errors: "batch", "data 'copy'".
void check_token_ids(const Program& p, TensorId input, const HostArray& X, const std::string& what);

}  // namespace sg
