// A small, strict command-line parser: known options only, typed getters with
// messages that name the option. Errors are InputError (exit code 2).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace embedlab::cli {

class Args {
public:
    // valued: options taking a value ("--ctx"); switches: boolean ("--json").
    Args(const std::string& command, const std::vector<std::string>& argv,
         const std::set<std::string>& valued, const std::set<std::string>& switches);

    const std::string& command() const { return command_; }
    const std::vector<std::string>& positional() const { return positional_; }
    bool has(const std::string& option) const;
    std::optional<std::string> get(const std::string& option) const;
    // The option's value; without it, InputError "<command>: <option> <value> is
    // required", followed by " (<note>)" when a note is given.
    std::string required(const std::string& option, const std::string& value,
                         const std::string& note = "") const;
    // Every value of a repeatable option, in order (get() gives the last).
    std::vector<std::string> get_all(const std::string& option) const;
    int64_t get_int(const std::string& option, int64_t fallback, int64_t min, int64_t max) const;
    double get_double(const std::string& option, double fallback, double min, double max) const;
    // At most this many comma-separated values per list option.
    static constexpr size_t kMaxListValues = 256;
    // "a,b,c" -> integers, each within [min, max]; empty if the option is absent.
    std::vector<int64_t> get_int_list(const std::string& option, int64_t min, int64_t max) const;
    // Exactly one or zero positionals, else InputError.
    std::optional<std::string> single_positional(const std::string& what) const;

private:
    std::string command_;
    std::vector<std::string> positional_;
    std::map<std::string, std::string> values_;
    std::map<std::string, std::vector<std::string>> all_values_;
    std::set<std::string> switches_;
};

} // namespace embedlab::cli
