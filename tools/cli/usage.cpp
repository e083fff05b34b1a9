#include "usage.h"

#include <algorithm>
#include <iostream>
#include <vector>

namespace sg::cli {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for the nearest of `known` within a third of the word's length (at
// least 2 edits), or a prefix of one; else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const std::string& k : known) {
    const size_t d = k.rfind(word, 0) == 0 ? 1 : edit_distance(word, k);
    if (d < best_d) best_d = d, best = k;
  }
  const size_t most = std::max<size_t>(2, word.size() / 3);
  return best_d <= most ? " (did you mean '" + best + "'?)" : "";
}

std::vector<std::string> long_names(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options())
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  return names;
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : ", ") + w;
  return s;
}

}  // namespace

std::optional<std::string> unknown_word(CLI::App& app, int argc, const char* const* argv) {
  if (argc < 2) return std::nullopt;
  const std::string first = argv[1];
  if (first.rfind("-", 0) == 0) {
    const std::vector<std::string> top = long_names(app);
    const std::string name = first.substr(0, first.find('='));
    if (first.rfind("--", 0) == 0 && std::find(top.begin(), top.end(), name) == top.end())
      return "unknown option '" + name + "'" + suggestion(name, top) + "; options before a command: " + joined(top);
    return std::nullopt;
  }
  std::vector<std::string> commands;
  for (const CLI::App* s : app.get_subcommands([](CLI::App*) { return true; })) commands.push_back(s->get_name());
  CLI::App* cmd = nullptr;
  for (CLI::App* s : app.get_subcommands([](CLI::App*) { return true; }))
    if (s->get_name() == first) cmd = s;
  if (!cmd) return "unknown command '" + first + "'" + suggestion(first, commands) + "; commands: " + joined(commands);
  if (first == "launch") return std::nullopt;  // what follows the launched command is its own
  const std::vector<std::string> known = long_names(*cmd);
  for (int i = 2; i < argc; ++i) {
    const std::string w = argv[i];
    if (w == "--") break;
    if (w.rfind("--", 0) != 0) continue;
    const std::string name = w.substr(0, w.find('='));
    if (std::find(known.begin(), known.end(), name) == known.end())
      return "unknown option '" + name + "' for '" + first + "'" + suggestion(name, known) + "; its options: " +
             joined(known);
  }
  return std::nullopt;
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  if (const auto word = unknown_word(app, argc, argv)) {
    std::cerr << "stepgraph: " << *word << "\nRun with --help for more information.\n";
    return kUsageExit;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // help and --version print and give 0; errors print the message
    return rc == 0 ? 0 : kUsageExit;
  }
  return std::nullopt;
}

}  // namespace sg::cli
