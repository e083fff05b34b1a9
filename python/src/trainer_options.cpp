// The Trainer's keyword options (mode, shape_policy, ..., on_nan): parsed into TrainerOptions,
// shown by repr and returned by Trainer.options, in one place.
#include <nanobind/stl/string.h>

#include "common.h"

namespace sgpy {

sg::TrainerOptions trainer_options(const std::string& mode, const std::string& shape_policy, int max_shapes,
                                   const std::string& autotune, const std::string& precision,
                                   const std::string& attention, bool deterministic, bool fusion, bool concurrent,
                                   const std::string& plan_cache, const std::string& on_nan) {
  sg::TrainerOptions o;
  o.mode = sg::parse_exec_mode(mode);
  o.shape_policy = sg::parse_shape_policy(shape_policy);
  o.lower.autotune = sg::parse_autotune(autotune);
  o.lower.precision = sg::parse_precision(precision);
  o.lower.attention = sg::parse_attention_mode(attention);
  o.lower.deterministic = deterministic;
  o.lower.fusion = fusion;
  o.lower.concurrent = concurrent;
  o.lower.plan_cache = plan_cache;
  o.on_nan = sg::parse_nan_policy(on_nan);
  if (max_shapes < 1) throw sg::Error(sg::cat("max_shapes must be >= 1, got ", max_shapes));
  o.max_shapes = max_shapes;
  return o;
}

std::string options_repr(const sg::TrainerOptions& o) {
  return sg::cat("mode=", sg::exec_mode_name(o.mode), ", shape_policy=", sg::shape_policy_name(o.shape_policy),
                 ", max_shapes=", o.max_shapes, ", autotune=", sg::autotune_name(o.lower.autotune),
                 ", precision=", sg::precision_name(o.lower.precision),
                 o.lower.attention == sg::AttentionMode::FP32
                     ? ""
                     : sg::cat(", attention=", sg::attention_mode_name(o.lower.attention)),
                 o.lower.deterministic ? "" : ", deterministic=False", o.lower.fusion ? "" : ", fusion=False",
                 o.lower.concurrent ? "" : ", concurrent=False",
                 o.lower.plan_cache.empty() ? "" : sg::cat(", plan_cache=", o.lower.plan_cache),
                 o.on_nan == sg::NanPolicy::Stop ? "" : sg::cat(", on_nan=", sg::nan_policy_name(o.on_nan)));
}

nb::dict options_dict(const sg::TrainerOptions& o) {
  nb::dict d;
  d["mode"] = sg::exec_mode_name(o.mode);
  d["shape_policy"] = sg::shape_policy_name(o.shape_policy);
  d["max_shapes"] = o.max_shapes;
  d["autotune"] = sg::autotune_name(o.lower.autotune);
  d["precision"] = sg::precision_name(o.lower.precision);
  d["attention"] = sg::attention_mode_name(o.lower.attention);
  d["deterministic"] = o.lower.deterministic;
  d["fusion"] = o.lower.fusion;
  d["concurrent"] = o.lower.concurrent;
  d["plan_cache"] = o.lower.plan_cache;
  d["on_nan"] = sg::nan_policy_name(o.on_nan);
  return d;
}

}  // namespace sgpy
