// Whole runs from a configuration (the CLI's train and eval): the Python layer passes the
// configuration as JSON text (from a dict) or a path, and gets the summary back as JSON text.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <optional>
#include <ostream>
#include <streambuf>

#include "common.h"
#include "stepgraph/config.h"
#include "stepgraph/run.h"

namespace sgpy {

namespace {

using namespace nb::literals;

// A line-buffered stream into Python's sys.stdout (taking the GIL for each line), so progress
// shows up where Python code prints (notebooks, pytest's capture).
class PyStdoutBuf : public std::streambuf {
 public:
  ~PyStdoutBuf() override { flush_lines(true); }

 protected:
  int overflow(int c) override {
    if (c != traits_type::eof()) {
      buf_.push_back(static_cast<char>(c));
      if (c == '\n') flush_lines(false);
    }
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    buf_.append(s, static_cast<size_t>(n));
    if (std::memchr(s, '\n', static_cast<size_t>(n))) flush_lines(false);
    return n;
  }
  int sync() override {
    flush_lines(true);
    return 0;
  }

 private:
  void flush_lines(bool all) {
    size_t end = all ? buf_.size() : buf_.rfind('\n');
    if (end == std::string::npos || end == 0) return;
    if (!all) ++end;
    std::string text = buf_.substr(0, end);
    buf_.erase(0, end);
    nb::gil_scoped_acquire gil;
    try {
      nb::object out = nb::module_::import_("sys").attr("stdout");
      if (!out.is_none()) {
        out.attr("write")(text);
        out.attr("flush")();
      }
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("stepgraph: writing progress to sys.stdout");
    }
  }
  std::string buf_;
};

class NullBuf : public std::streambuf {
 protected:
  int overflow(int c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

sg::RunConfig config_from(const std::optional<std::string>& json_text, const std::optional<std::string>& path) {
  return as_input_error([&] {
    if (path) return sg::load_config(*path);
    if (!json_text) return sg::parse_config(sg::default_config());
    return sg::parse_config_text(*json_text, "");
  });
}

struct Output {
  explicit Output(bool verbose) : os(verbose ? static_cast<std::streambuf*>(&py) : &null) {}
  PyStdoutBuf py;
  NullBuf null;
  std::ostream os;
};

}  // namespace

void bind_run(nb::module_& m) {
  m.def("_activation_names", &sg::activation_names, "Every activation's name (the stubs' ActivationName).");
  m.def("_default_config", [] { return sg::default_config().dump(); },
        "The embedded default configuration (an MLP on the digits data) as JSON text.");

  m.def("load_digits", [] {
        sg::Dataset d = sg::load_digits();
        return nb::make_tuple(to_numpy(std::move(d.X)), to_numpy(std::move(d.y)));
      },
      "The handwritten digits (1797 8x8 images, pixels scaled to 0..1, 10 classes) embedded in stepgraph: "
      "(X float32 [1797, 64], y int32 [1797]).");
  m.def("make_antiderivative",
        [](int64_t functions, int64_t sensors, int64_t points, uint64_t seed) {
          return as_input_error([&] { return to_dict(sg::make_antiderivative(functions, sensors, points, seed)); });
        },
        "functions"_a = 1000, "sensors"_a = 100, "points"_a = 10, "seed"_a = 0,
        "The DeepONet antiderivative set (the config source \"antiderivative\"): {'u': float32 [N, sensors] "
        "(a random smooth function at the sensors), 'y': float32 [N, 1] (query points), 'G': float32 [N, 1] "
        "(the integral of u from 0 to y)}, N = functions * points.");
  m.def("_parse_config",
        [](std::optional<std::string> json_text, std::optional<std::string> path) {
          return config_from(json_text, path).json.dump();
        },
        "json_text"_a.none(), "path"_a.none(),
        "Checks a configuration and returns it with the defaults filled in, as JSON text.");

  m.def("_train",
        [](std::optional<std::string> json_text, std::optional<std::string> path, std::optional<int64_t> steps,
           std::optional<std::string> device, std::optional<uint64_t> seed, std::string out_dir, std::string resume,
           bool overwrite, bool weights_only, bool json, bool verbose, std::string tensorboard,
           std::optional<nb::object> callback, std::optional<std::string> on_nan) {
          sg::RunConfig cfg = config_from(json_text, path);
          if (on_nan) as_input_error([&] { cfg.trainer.on_nan = sg::parse_nan_policy(*on_nan); });
          if (device && *device != "auto" && *device != "cpu" && *device != "cuda")
            throw InputError("unknown device '" + *device + "': expected auto, cpu or cuda");
          if (steps && *steps <= 0) throw InputError(sg::cat("steps must be positive, got ", *steps));
          sg::RunOptions o;
          o.steps = steps;
          o.device = device;
          o.seed = seed;
          o.out_dir = std::move(out_dir);
          o.resume = std::move(resume);
          o.overwrite = overwrite;
          o.weights_only = weights_only;
          o.json = json;
          o.tensorboard = std::move(tensorboard);
          if (callback && !callback->is_none()) {
            // Called with the GIL taken again; the record as a dict. A raising callback ends the
            // run with an Error naming the exception (the run's folder keeps what it wrote).
            nb::object fn = *callback;
            o.callback = [fn](const nlohmann::json& record) {
              nb::gil_scoped_acquire gil;
              std::string failure;
              try {
                nb::object r = fn(nb::module_::import_("json").attr("loads")(record.dump()));
                return r.is_none() || nb::cast<bool>(r);
              } catch (nb::python_error& e) {
                failure = sg::cat("callback raised ", py_type_name(e.value()), ": ", py_str(e.value()));
              } catch (const nb::cast_error&) {
                failure = "callback: expected it to return None, True or False";
              }
              throw sg::Error(failure);
            };
          }
          Output out(verbose);
          o.out = &out.os;
          std::unique_ptr<sg::Trainer> trained;
          o.keep_trainer = &trained;
          sg::RunSummary sum;
          {
            nb::gil_scoped_release r;
            sum = sg::train_run(cfg, o);
            out.os.flush();
          }
          auto* made = new PyTrainer(std::move(trained));
          if (cfg.problem) made->problem = std::make_shared<const sg::pinn::Problem>(*cfg.problem);
          return nb::make_tuple(sum.to_json().dump(), nb::cast(made, nb::rv_policy::take_ownership));
        },
        "json_text"_a.none(), "path"_a.none(), "steps"_a.none(), "device"_a.none(), "seed"_a.none(),
        "out_dir"_a = "", "resume"_a = "", "overwrite"_a = false, "weights_only"_a = false, "json"_a = false,
        "verbose"_a = false, "tensorboard"_a = "", "callback"_a.none() = nb::none(), "on_nan"_a.none() = nb::none(),
        "Trains from a configuration; returns (the summary as JSON text, the trained Trainer) (see "
        "stepgraph.train).");

  m.def("_trainer_from_config",
        [](std::optional<std::string> json_text, std::optional<std::string> path, std::optional<std::string> device,
           std::optional<uint64_t> seed) {
          sg::RunConfig cfg = config_from(json_text, path);
          if (device && *device != "auto" && *device != "cpu" && *device != "cuda")
            throw InputError("unknown device '" + *device + "': expected auto, cpu or cuda");
          std::unique_ptr<sg::Trainer> t;
          {
            nb::gil_scoped_release r;
            t = sg::trainer_from_config(cfg, device.value_or(""), seed);
          }
          auto* made = new PyTrainer(std::move(t));
          if (cfg.problem) made->problem = std::make_shared<const sg::pinn::Problem>(*cfg.problem);
          return made;
        },
        "json_text"_a.none(), "path"_a.none(), "device"_a.none(), "seed"_a.none(), nb::rv_policy::take_ownership,
        "The Trainer a configuration describes (see stepgraph.Trainer.from_config).");

  m.def("_exportable_trainer",
        [](std::optional<std::string> json_text, std::optional<std::string> path, std::string checkpoint,
           bool weights_only) {
          sg::RunConfig cfg = config_from(json_text, path);
          sg::RunOptions o;
          o.weights_only = weights_only;
          std::unique_ptr<sg::Trainer> t;
          std::string scaling;
          {
            nb::gil_scoped_release r;
            nlohmann::json s = nlohmann::json::object();
            t = sg::exportable_trainer(cfg, checkpoint, o, &s);
            scaling = s.dump();
          }
          return nb::make_tuple(nb::cast(new PyTrainer(std::move(t)), nb::rv_policy::take_ownership), scaling);
        },
        "json_text"_a.none(), "path"_a.none(), "checkpoint"_a, "weights_only"_a = false,
        "(trainer, input scaling JSON): the config's trainer on the CPU holding the checkpoint's weights, as "
        "stepgraph export reads it.");

  m.def("_evaluate",
        [](std::optional<std::string> json_text, std::optional<std::string> path, std::string checkpoint,
           std::optional<std::string> device, std::optional<uint64_t> seed, bool weights_only, bool json,
           bool verbose) {
          sg::RunConfig cfg = config_from(json_text, path);
          sg::RunOptions o;
          o.weights_only = weights_only;
          o.device = device;
          o.seed = seed;
          o.json = json;
          Output out(verbose);
          o.out = &out.os;
          sg::RunSummary sum;
          {
            nb::gil_scoped_release r;
            sum = sg::eval_run(cfg, checkpoint, o);
            out.os.flush();
          }
          return sum.to_json().dump();
        },
        "json_text"_a.none(), "path"_a.none(), "checkpoint"_a, "device"_a.none(), "seed"_a.none(),
        "weights_only"_a = false, "json"_a = false, "verbose"_a = false,
        "Evaluates a checkpoint on a configuration's data; returns the summary as JSON text.");
}

}  // namespace sgpy
