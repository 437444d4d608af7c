// Command-line flags of the methods' request fields (method_flags.hpp).
#include "method_flags.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string_view>

#include "embedlab/error.hpp"

namespace embedlab::cli {

namespace {

// Every registry method's own fields, each once, in registry order.
std::vector<std::string> method_fields()
{
    std::vector<std::string> fields;
    for (const auto& m : method_registry())
        for (const auto& f : m.fields)
            if (std::find(fields.begin(), fields.end(), f) == fields.end())
                fields.push_back(f);
    return fields;
}

// The flag as the field's JSON value, read by Args' own typed getters (their messages
// name the flag); the ranges are check_request's.
nlohmann::ordered_json flag_value(const Args& args, const std::string& flag, RequestFieldType type)
{
    constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    switch (type) {
    case RequestFieldType::Bool:
        return true;
    case RequestFieldType::Integer:
        return args.get_int(flag, 0, lo, hi);
    case RequestFieldType::Number:
        return args.get_double(flag, 0, -std::numeric_limits<double>::max(),
                               std::numeric_limits<double>::max());
    case RequestFieldType::Integers:
    case RequestFieldType::TokenIds:
        return args.get_int_list(flag, lo, hi);
    case RequestFieldType::String:
        break;
    }
    return args.get(flag).value_or("");
}

} // namespace

std::string field_flag(const std::string& field)
{
    if (field == "energy_tokens")
        return "--tokens";
    std::string flag = "--" + field;
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
}

std::string method_flag(const MethodDescriptor& method, const std::string& field)
{
    // flat's compress_mlp (the one method whose target ratio compresses the MLP) reads --mlp.
    if (method.target_compresses_mlp && field == "compress_mlp")
        return "--mlp";
    return field_flag(field);
}

void add_method_flags(std::set<std::string>& valued, std::set<std::string>& switches)
{
    for (const auto& f : method_fields())
        (request_field_type(f) == RequestFieldType::Bool ? switches : valued).insert(field_flag(f));
}

void method_flags_into(const Args& args, CompressionRequest& request)
{
    for (const auto& f : method_fields()) {
        const std::string flag = field_flag(f);
        if (!args.has(flag))
            continue;
        set_request_field(request, f, flag_value(args, flag, request_field_type(f)));
    }
}

void check_method_flags(const Args& args, const std::string& method, const std::string& command)
{
    // Fields with a JSON default that the command line still asks for.
    static const std::vector<std::string> asked{"mlp"};
    const auto& takes = method_descriptor(method).fields;
    auto taken = [&](const std::string& f) {
        return std::find(takes.begin(), takes.end(), f) != takes.end();
    };
    for (const auto& f : method_fields())
        if (args.has(field_flag(f)) && !taken(f))
            throw InputError(command + ": " + field_flag(f) + " does not apply to method " + method);
    for (const auto& f : asked)
        if (taken(f) && !args.has(field_flag(f)))
            throw InputError(command + ": --method " + method + " needs " + field_flag(f));
}

std::string method_field_flag(const std::string& field)
{
    const auto fields = method_fields();
    return std::find(fields.begin(), fields.end(), field) != fields.end() ? field_flag(field) : field;
}

std::vector<CompressionRequest> method_flag_settings(const Args& args, const std::string& command,
                                                     const CompressionRequest& base)
{
    std::vector<CompressionRequest> settings{base};
    for (const auto& f : method_fields()) {
        const std::string flag = field_flag(f);
        if (!args.has(flag))
            continue;
        const RequestFieldType type = request_field_type(f);
        const bool scalar = type == RequestFieldType::Integer || type == RequestFieldType::Number;
        const bool list = type == RequestFieldType::Integers || type == RequestFieldType::TokenIds;
        std::vector<std::string> pieces{args.get(flag).value_or("")};
        if (scalar || list) {
            const std::string text = pieces[0];
            const char sep = scalar ? ',' : ':';
            pieces.clear();
            size_t start = 0;
            for (size_t at; (at = text.find(sep, start)) != std::string::npos; start = at + 1)
                pieces.push_back(text.substr(start, at - start));
            pieces.push_back(text.substr(start));
        }
        if (settings.size() * pieces.size() > 4096)
            throw InputError(command + ": more than 4096 settings; list fewer values");
        std::vector<CompressionRequest> next;
        for (const auto& piece : pieces) {
            const bool is_switch = type == RequestFieldType::Bool;
            const Args one(command,
                           is_switch ? std::vector<std::string>{flag} : std::vector<std::string>{flag, piece},
                           is_switch ? std::set<std::string>{} : std::set<std::string>{flag},
                           is_switch ? std::set<std::string>{flag} : std::set<std::string>{});
            const auto value = flag_value(one, flag, type);
            for (auto r : settings) {
                set_request_field(r, f, value);
                next.push_back(std::move(r));
            }
        }
        settings = std::move(next);
    }
    return settings;
}

namespace {

// A field's JSON value as its flag's text: "a,b,c" for a list, a number as JSON writes
// it (the shortest text that reads back the same double).
std::string flag_text(const nlohmann::ordered_json& value)
{
    if (value.is_string())
        return value.get<std::string>();
    if (value.is_array()) {
        std::string text;
        for (const auto& v : value) { // piece by piece: GCC 12's -Wrestrict misfires on "," + string
            if (!text.empty())
                text += ',';
            text += v.dump();
        }
        return text;
    }
    return value.dump();
}

} // namespace

std::vector<std::string> compress_command(const CompressionRequest& request, const std::string& out_dir,
                                          std::vector<std::string>* omitted)
{
    const auto json = request_json(request);
    const auto fields = method_fields();
    // compress's own flags for the request's other fields (command_compress.cpp, text_eval.cpp).
    static const std::vector<std::pair<std::string, std::string>> own{{"tokenizer", "--tokenizer"},
                                                                      {"positions", "--positions"},
                                                                      {"eval_text", "--eval-text"},
                                                                      {"eval_tokens", "--eval-tokens"},
                                                                      {"ctx", "--ctx"},
                                                                      {"stride", "--stride"},
                                                                      {"batch", "--batch"},
                                                                      {"divergence", "--divergence"},
                                                                      {"task", "--task"},
                                                                      {"task_data", "--task-data"},
                                                                      {"task_limit", "--task-limit"},
                                                                      {"seed", "--seed"}};
    const bool lle = method_descriptor(request.method).needs_frequency_text;
    std::vector<std::string> argv{"embedlab-cli", "compress", request.model, "--method", request.method};
    for (const auto& [field, value] : json.items()) {
        if (field == "model" || field == "method")
            continue;
        std::string flag;
        if (std::find(fields.begin(), fields.end(), field) != fields.end())
            flag = method_flag(method_descriptor(request.method), field);
        else
            for (const auto& [f, o] : own)
                if (f == field)
                    flag = o;
        // lle reads --seed only for its ivf search (its k-means and recall sample).
        if (field == "seed" && lle && request.knn != "ivf")
            flag.clear();
        if (flag.empty()) {
            if (omitted)
                omitted->push_back(field);
            continue;
        }
        if (value.is_boolean()) {
            if (value.get<bool>())
                argv.push_back(flag);
            continue;
        }
        argv.push_back(flag);
        argv.push_back(flag_text(value));
    }
    argv.push_back("--out");
    argv.push_back(out_dir);
    return argv;
}

std::string shell_command_line(const std::vector<std::string>& argv)
{
    std::string line;
    for (const auto& word : argv) {
        const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) ||
                   std::string_view("-_./,:=+@%").find(c) != std::string_view::npos;
        });
        std::string quoted = "'";
        for (char c : word)
            quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
        quoted += "'";
        line += (line.empty() ? "" : " ") + (plain ? word : quoted);
    }
    return line;
}

} // namespace embedlab::cli
