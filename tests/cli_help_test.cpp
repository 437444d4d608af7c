// embedlab-cli's help: one screen of commands grouped by task, `help COMMAND` and
// `COMMAND --help` print that command's options, and the command table, the reference
// and the dispatch agree.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "cli_in_process.hpp"
#include "cli_support.hpp"
#include "embedlab/experiment_request.hpp"
#include "help.hpp"
#include "method_flags.hpp"

namespace {

using embedlab::test::cli;
using embedlab::test::cli_here;

std::set<std::string> listed_commands()
{
    std::set<std::string> names;
    for (const auto& group : embedlab::cli::command_groups())
        for (const auto& c : group.commands)
            EXPECT_TRUE(names.insert(c.name).second) << c.name << " is listed twice";
    return names;
}

TEST(CliHelp, HelpIsOneScreenOfCommandsGroupedByTask)
{
    const auto r = cli({"--help"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(cli_here({"help"}).out, r.out);
    EXPECT_EQ(cli_here({"-h"}).out, r.out);
    EXPECT_LE(std::count(r.out.begin(), r.out.end(), '\n'), 50) << r.out;
    for (const auto& group : embedlab::cli::command_groups()) {
        EXPECT_NE(r.out.find(group.title + ":\n"), std::string::npos) << group.title;
        for (const auto& c : group.commands)
            EXPECT_NE(r.out.find("\n  " + c.name + " "), std::string::npos) << c.name;
    }
    EXPECT_NE(r.out.find("help COMMAND"), std::string::npos);
    // No arguments at all: the same list on stderr, exit 2 (a mistake, not a request).
    const auto none = cli_here({});
    EXPECT_EQ(none.exit_code, 2);
    EXPECT_EQ(none.err, r.out);
}

TEST(CliHelp, EveryCommandHasHelpAndIsDispatched)
{
    const auto names = listed_commands();
    // Every block of the whole reference is a listed command's.
    const auto all = cli_here({"help", "--all"});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    std::istringstream in(all.out);
    std::set<std::string> in_reference;
    for (std::string line; std::getline(in, line);)
        if (line.size() > 2 && line.compare(0, 2, "  ") == 0 && line[2] != ' ')
            in_reference.insert(line.substr(2, line.find(' ', 2) - 2));
    EXPECT_EQ(in_reference, names);
    // main.cpp's dispatch table runs exactly the listed commands.
    const auto dispatched = cli_here({"help", "--commands"});
    ASSERT_EQ(dispatched.exit_code, 0) << dispatched.err;
    std::istringstream lines(dispatched.out);
    std::set<std::string> run;
    for (std::string line; std::getline(lines, line);)
        run.insert(line);
    EXPECT_EQ(run, names);
    for (const auto& name : names)
        EXPECT_NE(embedlab::cli::command_help(name).find("\n  " + name + " "), std::string::npos) << name;
    // Through the program, both spellings (one process each costs libtorch's start-up).
    const auto help = cli_here({"help", "eval"});
    ASSERT_EQ(help.exit_code, 0) << help.err;
    EXPECT_EQ(help.out, embedlab::cli::command_help("eval"));
    EXPECT_EQ(cli_here({"eval", "--help"}).out, help.out);
}

TEST(CliHelp, OneCommandsOptions)
{
    const auto r = cli_here({"help", "compress"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, embedlab::cli::command_help("compress"));
    for (const char* flag :
         {"--keep-ratio", "--method flat", "--mlp linear|geglu", "--method tucker", "--out DIR"})
        EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
    // Issue 59: every method's block is generated from its registry row: its summary, and
    // each field's flag with the range check_request holds and its help line.
    for (const auto& m : embedlab::method_registry()) {
        const auto at = r.out.find("\n  compress [MODEL] --method " + std::string(m.name) + " ");
        ASSERT_NE(at, std::string::npos) << m.name;
        auto end = at + 1; // the block runs to the next line indented by exactly two spaces
        while ((end = r.out.find("\n  ", end + 1)) != std::string::npos && r.out[end + 3] == ' ')
            ;
        std::string block; // its words, one space apart (descriptions wrap)
        std::istringstream words(
            r.out.substr(at + 1, end == std::string::npos ? std::string::npos : end - at));
        for (std::string w; words >> w;)
            block += w + " ";
        EXPECT_NE(block.find(std::string(m.summary).substr(0, 20)), std::string::npos) << block;
        for (const auto& f : m.fields) {
            const auto& doc = embedlab::method_field_doc(m, f);
            EXPECT_NE(block.find(embedlab::cli::method_flag(m, f)), std::string::npos) << m.name << " " << f;
            const auto range = embedlab::field_range_text(doc);
            // The range's first words (a long list of choices wraps).
            EXPECT_NE(block.find(range.substr(0, 20)), std::string::npos)
                << m.name << " " << f << ": " << range;
            EXPECT_NE(block.find(doc.help.substr(0, 20)), std::string::npos) << m.name << " " << f;
        }
        EXPECT_NE(block.find("e.g. --method " + std::string(m.name)), std::string::npos) << block;
    }
    EXPECT_EQ(r.out.find("\n  sweep "), std::string::npos) << "only compress's blocks";
    EXPECT_NE(r.out.find("MODEL is a Hugging Face directory"), std::string::npos);
    EXPECT_EQ(cli_here({"bench", "eval", "--help"}).out, cli_here({"help", "bench"}).out);
    const auto unknown = cli_here({"help", "compres"});
    EXPECT_EQ(unknown.exit_code, 2);
    EXPECT_NE(unknown.err.find("unknown command 'compres'"), std::string::npos) << unknown.err;
    EXPECT_TRUE(unknown.out.empty());
}

// docs/cli.md holds the whole reference as the program prints it: it cannot drift.
TEST(CliHelp, DocsHoldTheWholeReference)
{
    const std::string doc =
        embedlab::test::read_text(std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "docs/cli.md");
    const std::string heading = "## embedlab-cli help --all\n\n```text\n";
    const auto start = doc.find(heading);
    ASSERT_NE(start, std::string::npos) << "docs/cli.md lost its reference section";
    const auto from = start + heading.size();
    const auto end = doc.find("```\n", from);
    ASSERT_NE(end, std::string::npos);
    const auto all = cli_here({"help", "--all"});
    ASSERT_EQ(all.exit_code, 0);
    EXPECT_EQ(doc.substr(from, end - from), all.out)
        << "docs/cli.md differs from `embedlab-cli help --all`: paste the program's output into it";
}

} // namespace
