// Command-line usage errors said the way Unix tools say them: a misspelt command or option is
// named with the nearest correct one, and usage errors exit with status 2 (library errors: 1).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace sg::cli {

constexpr int kUsageExit = 2;

// The first word of argv that names no command of `app` or no option of its command, as a
// message ("unknown command 'trian' (did you mean 'train'?)"); nothing when every word is known.
// The words after `launch` belong to the command it launches and are left to it.
std::optional<std::string> unknown_word(CLI::App& app, int argc, const char* const* argv);

// Parses argv: help and --version print and give 0, a usage error prints CLI11's message (after
// unknown_word's, where it has one) and gives kUsageExit; nullopt: parsed, go on.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

// A bash completion script for `app`, generated from its commands and their long options
// (`source <(stepgraph completion bash)`): commands first, then the command's options, files
// for the rest.
std::string bash_completion(const CLI::App& app);

}  // namespace sg::cli
