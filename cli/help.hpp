// embedlab-cli's help text: the commands grouped by task in one screen, and one
// command's options. The command table here is the list `main.cpp` dispatches on.
//
//   std::fputs(embedlab::cli::command_list().c_str(), stdout);        // embedlab-cli --help
//   std::fputs(embedlab::cli::command_help("compress").c_str(), stdout); // help compress
//
// Thread safety: pure functions of constant tables.
#pragma once

#include <string>
#include <vector>

namespace embedlab::cli {

struct CommandSummary {
    std::string name, summary;
};
struct CommandGroup {
    std::string title;
    std::vector<CommandSummary> commands;
};
// Every command, grouped by task, in the order --help lists them.
const std::vector<CommandGroup>& command_groups();
// The usage line and every command's one-line summary, by group.
std::string command_list();
// The reference blocks of `command` (all of its forms) and the MODEL note; "--all":
// the whole reference. InputError for an unknown command.
std::string command_help(const std::string& command);

} // namespace embedlab::cli
