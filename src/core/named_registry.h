// A process-wide list of user definitions looked up by name (user-defined ops, losses and update
// rules): registered at run time, never removed. A deque, so references to entries stay valid
// while others register; a mutex, so threads may register and look up at once.
#pragma once

#include <algorithm>
#include <cctype>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "stepgraph/core.h"

namespace sg {

// Letters, digits, '_' (and '-' where `dash`): the names a registry takes.
inline bool is_registry_name(const std::string& s, bool dash = true) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (dash && c == '-');
  });
}

// Def has a `name`. `what` names an entry in errors ("user-defined op"), `how` the call that
// registers one ("sg::register_op").
template <class Def>
class NamedRegistry {
 public:
  NamedRegistry(const char* what, const char* how) : what_(what), how_(how) {}

  // An Error `taken` when the name is registered already.
  void add(Def def, const std::string& taken) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Def& d : defs_) SG_REQUIRE(d.name != def.name, taken);
    defs_.push_back(std::move(def));
  }
  bool has(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::any_of(defs_.begin(), defs_.end(), [&](const Def& d) { return d.name == name; });
  }
  // An Error naming the registered entries when there is none of that name.
  int32_t id(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> names;
    for (size_t i = 0; i < defs_.size(); ++i) {
      if (defs_[i].name == name) return static_cast<int32_t>(i);
      names.push_back(defs_[i].name);
    }
    throw Error(cat("no ", what_, " named '", name, "' is registered (registered: ",
                    names.empty() ? std::string("none") : joined(names), "); call ", how_, " first"));
  }
  const Def& at(int32_t id, const char* kind) const {
    std::lock_guard<std::mutex> lock(mu_);
    SG_REQUIRE(id >= 0 && static_cast<size_t>(id) < defs_.size(), kind, " id ", id, " is not registered");
    return defs_[static_cast<size_t>(id)];
  }

 private:
  const char *what_, *how_;
  mutable std::mutex mu_;
  std::deque<Def> defs_;
};

// Calls a user's kernel; whatever it throws comes back as an Error that starts with `who`.
template <class Kernel, class Args>
void run_user_kernel(const Kernel& k, const Args& args, const std::string& who) {
  try {
    k(args);
  } catch (const std::exception& e) {
    throw Error(cat(who, ": ", e.what()));
  } catch (...) {
    throw Error(cat(who, ": its function threw something that is not a std::exception"));
  }
}

}  // namespace sg
