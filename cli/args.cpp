#include "args.hpp"

#include <cctype>

#include <charconv>
#include <cmath>

#include "embedlab/error.hpp"

namespace embedlab::cli {

Args::Args(const std::string& command, const std::vector<std::string>& argv,
           const std::set<std::string>& valued, const std::set<std::string>& switches)
    : command_(command)
{
    // Options that may be given more than once (read with get_all); any other option
    // given twice is refused rather than letting the last one silently win.
    static const std::set<std::string> repeatable{"--sbatch-arg"};
    const auto known = [&](const std::string& word) {
        const std::string name = word.substr(0, word.find('='));
        return valued.count(name) > 0 || switches.count(name) > 0;
    };
    bool options_done = false;
    for (size_t i = 0; i < argv.size(); ++i) {
        std::string a = argv[i];
        if (!options_done && a.size() >= 2 && a[0] == '-' && a[1] != '-' &&
            !std::isdigit(static_cast<unsigned char>(a[1])) && a[1] != '.')
            throw InputError(command_ + ": unknown option " + a +
                             " (options start with --; see embedlab-cli help)");
        if (options_done || a.size() < 2 || a.rfind("--", 0) != 0) {
            positional_.push_back(a);
            continue;
        }
        if (a == "--") {
            options_done = true;
            continue;
        }
        std::optional<std::string> inline_value;
        if (auto eq = a.find('='); eq != std::string::npos) {
            inline_value = a.substr(eq + 1);
            a = a.substr(0, eq);
        }
        if (valued.count(a)) {
            std::string value;
            if (inline_value)
                value = *inline_value;
            else if (i + 1 < argv.size() && !known(argv[i + 1]))
                value = argv[++i];
            else
                throw InputError(
                    command_ + ": option " + a + " needs a value" +
                    (i + 1 < argv.size() ? " (it is followed by the option " + argv[i + 1] + ")" : ""));
            if (values_.count(a) && !repeatable.count(a))
                throw InputError(command_ + ": option " + a + " is given twice ('" + values_[a] + "' and '" +
                                 value + "'); give it once");
            values_[a] = value;
            all_values_[a].push_back(value);
        } else if (switches.count(a) && !inline_value) {
            switches_.insert(a);
        } else {
            throw InputError(command_ + ": unknown option " + a + " (see embedlab-cli help)");
        }
    }
}

bool Args::has(const std::string& option) const
{
    return switches_.count(option) || values_.count(option);
}

std::vector<std::string> Args::get_all(const std::string& option) const
{
    auto it = all_values_.find(option);
    return it == all_values_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> Args::get(const std::string& option) const
{
    auto it = values_.find(option);
    if (it == values_.end())
        return std::nullopt;
    return it->second;
}

std::string Args::required(const std::string& option, const std::string& value, const std::string& note) const
{
    if (const auto v = get(option))
        return *v;
    throw InputError(command_ + ": " + option + " " + value + " is required" +
                     (note.empty() ? "" : " (" + note + ")"));
}

int64_t Args::get_int(const std::string& option, int64_t fallback, int64_t min, int64_t max) const
{
    auto v = get(option);
    if (!v)
        return fallback;
    int64_t x = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
    if (ec != std::errc() || end != v->data() + v->size())
        throw InputError(command_ + ": " + option + " expects an integer, got '" + *v + "'");
    if (x < min || x > max)
        throw InputError(command_ + ": " + option + " must be between " + std::to_string(min) + " and " +
                         std::to_string(max) + ", got " + *v);
    return x;
}

double Args::get_double(const std::string& option, double fallback, double min, double max) const
{
    auto v = get(option);
    if (!v)
        return fallback;
    size_t used = 0;
    double x = 0;
    try {
        x = std::stod(*v, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != v->size() || !std::isfinite(x))
        throw InputError(command_ + ": " + option + " expects a number, got '" + *v + "'");
    if (x < min || x > max)
        throw InputError(command_ + ": " + option + " must be between " + std::to_string(min) + " and " +
                         std::to_string(max) + ", got " + *v);
    return x;
}

std::vector<int64_t> Args::get_int_list(const std::string& option, int64_t min, int64_t max) const
{
    std::vector<int64_t> out;
    auto v = get(option);
    if (!v)
        return out;
    size_t start = 0;
    while (start <= v->size()) {
        const size_t comma = std::min(v->find(',', start), v->size());
        const std::string item = v->substr(start, comma - start);
        int64_t x = 0;
        auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size())
            throw InputError(command_ + ": " + option + " expects comma-separated integers, got '" + *v +
                             "'");
        if (x < min || x > max)
            throw InputError(command_ + ": every value of " + option + " must be between " +
                             std::to_string(min) + " and " + std::to_string(max) + ", got " +
                             std::to_string(x));
        out.push_back(x);
        // Each value is usually a run or a tensor factor: thousands are a typo or an attack.
        if (out.size() > kMaxListValues)
            throw InputError(command_ + ": " + option + " has more than " + std::to_string(kMaxListValues) +
                             " values; give at most " + std::to_string(kMaxListValues));
        start = comma + 1;
    }
    return out;
}

std::optional<std::string> Args::single_positional(const std::string& what) const
{
    if (positional_.size() > 1)
        throw InputError(command_ + ": expected one " + what + ", got " + std::to_string(positional_.size()) +
                         " arguments");
    if (positional_.empty())
        return std::nullopt;
    return positional_[0];
}

} // namespace embedlab::cli
