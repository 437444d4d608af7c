// Command-line flags of the methods' request fields (method_flags.hpp).
#include "method_flags.hpp"

#include <algorithm>

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

// The flag's text as the field's JSON value; InputError naming the flag.
nlohmann::ordered_json flag_value(const std::string& flag, const std::string& text, RequestFieldType type)
{
    auto fail = [&](const std::string& what) -> nlohmann::ordered_json {
        throw InputError(flag + " " + what + ", got '" + text + "'");
    };
    auto integer = [&](const std::string& s) -> int64_t {
        size_t used = 0;
        int64_t v = 0;
        try {
            v = std::stoll(s, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (s.empty() || used != s.size())
            fail(type == RequestFieldType::Integers ? "takes integers a,b,c" : "takes an integer");
        return v;
    };
    switch (type) {
    case RequestFieldType::String:
        return text;
    case RequestFieldType::Bool:
        return true;
    case RequestFieldType::Integer:
        return integer(text);
    case RequestFieldType::Number: {
        size_t used = 0;
        double v = 0;
        try {
            v = std::stod(text, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (text.empty() || used != text.size())
            return fail("takes a number");
        return v;
    }
    case RequestFieldType::Integers:
    case RequestFieldType::TokenIds: {
        auto list = nlohmann::ordered_json::array();
        for (size_t start = 0; start <= text.size();) {
            const size_t end = std::min(text.find(',', start), text.size());
            list.push_back(integer(text.substr(start, end - start)));
            start = end + 1;
        }
        return list;
    }
    }
    return fail("has an unknown type");
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
        const RequestFieldType type = request_field_type(f);
        set_request_field(request, f, flag_value(flag, args.get(flag).value_or(""), type));
    }
}

} // namespace embedlab::cli
