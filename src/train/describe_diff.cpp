#include "train/describe_diff.h"

#include <vector>

#include "stepgraph/core.h"

namespace sg {

namespace {

// "head(arg, arg(...), ...)" split once: the head and its top-level arguments.
struct Call {
  std::string head;
  std::vector<std::string> args;
  bool is_call = false;
};

Call split(const std::string& s) {
  Call c;
  const size_t open = s.find('(');
  if (open == std::string::npos || s.back() != ')') return c;
  c.head = s.substr(0, open);
  c.is_call = true;
  int depth = 0;
  size_t start = open + 1;
  for (size_t i = open + 1; i + 1 < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    else if (s[i] == ')') --depth;
    else if (s[i] == ',' && depth == 0) {
      c.args.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  c.args.push_back(s.substr(start, s.size() - 1 - start));
  for (std::string& a : c.args)
    while (!a.empty() && a.front() == ' ') a.erase(a.begin());
  return c;
}

std::string diff(const std::string& a, const std::string& b, const std::string& within) {
  if (a == b) return "";
  const Call ca = split(a), cb = split(b);
  if (ca.is_call && cb.is_call && ca.head == cb.head && ca.args.size() == cb.args.size()) {
    // The same call with one argument changed that is itself a call: look inside it.
    int differing = -1, count = 0;
    for (size_t i = 0; i < ca.args.size(); ++i)
      if (ca.args[i] != cb.args[i]) differing = static_cast<int>(i), ++count;
    if (count == 1 && split(ca.args[differing]).is_call && split(cb.args[differing]).is_call)
      return diff(ca.args[differing], cb.args[differing], cat("item ", differing, " of ", ca.head, "(...)"));
  }
  return cat(a, " in the checkpoint, ", b, " here", within.empty() ? "" : " (" + within + ")");
}

}  // namespace

std::string describe_diff(const std::string& saved, const std::string& here) { return diff(saved, here, ""); }

}  // namespace sg
