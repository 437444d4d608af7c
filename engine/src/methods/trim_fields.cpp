// Trim's field declarations (trim_fields.hpp).
#include "embedlab/trim_fields.hpp"

#include "embedlab/error.hpp"

#include <algorithm>

namespace embedlab {

namespace {

using Json = nlohmann::ordered_json;

std::vector<MethodField> declare_trim_fields()
{
    FieldDoc freq{.label = "Frequencies",
                  .value_name = "FILE",
                  .help = "the domain text whose token counts decide what is kept"};
    FieldDoc coverage{.label = "Coverage",
                      .value_name = "C",
                      .help = "keep the most frequent tokens of the frequency text until they cover this "
                              "share of its token occurrences (or give keep instead)",
                      .ranged = true,
                      .lo = 0,
                      .hi = 1,
                      .lo_open = true,
                      .zero = "off"};
    FieldDoc keep{.label = "Keep",
                  .value_name = "N",
                  .help = "the kept vocabulary's size, the required tokens among them (or give coverage "
                          "instead)",
                  .unit = "tokens",
                  .ranged = true,
                  .lo = 1,
                  .hi = 1e9,
                  .zero = "off"};
    FieldDoc keep_tokens{.label = "Keep tokens",
                         .value_name = "FILE",
                         .help = "tokens always kept, one per line as the vocabulary spells them (optional)"};
    return {{"freq_text", RequestFieldType::String, Json(""), freq},
            {"coverage", RequestFieldType::Number, Json(0.999), coverage},
            {"keep", RequestFieldType::Integer, Json(0), keep},
            {"keep_tokens", RequestFieldType::String, Json(""), keep_tokens}};
}

} // namespace

const std::vector<MethodField>& trim_fields()
{
    static const std::vector<MethodField> fields = declare_trim_fields();
    return fields;
}

const MethodField& trim_field(std::string_view name)
{
    const auto& fields = trim_fields();
    const auto it =
        std::find_if(fields.begin(), fields.end(), [&](const MethodField& f) { return f.name == name; });
    if (it != fields.end())
        return *it;
    std::string names;
    for (const auto& f : fields) {
        if (!names.empty())
            names += ", ";
        names += f.name;
    }
    throw InputError("trim has no field '" + std::string(name) + "' (its fields: " + names + ")");
}

std::string trim_flag(const MethodField& field)
{
    std::string flag = "--";
    for (const char c : field.name)
        flag += c == '_' ? '-' : c;
    return flag;
}

} // namespace embedlab
