// The ggml block formats quant takes (quant_types.hpp); sizes from io::ggml_type_traits.
#include "embedlab/quant_types.hpp"

#include <cctype>

#include "io/gguf_quants.hpp"

namespace embedlab {

const std::vector<QuantType>& quant_types()
{
    static const std::vector<QuantType> types = [] {
        const std::pair<const char*, uint32_t> named[] = {
            {"f16", 1},  {"bf16", 30}, {"q8_0", 8}, {"q6_k", 14}, {"q5_k", 13}, {"q5_1", 7},
            {"q5_0", 6}, {"q4_k", 12}, {"q4_1", 3}, {"q4_0", 2},  {"q3_k", 11}, {"q2_k", 10}};
        std::vector<QuantType> out;
        for (const auto& [name, id] : named) {
            const auto* traits = io::ggml_type_traits(id);
            out.push_back({name, id, traits->block_elems, 8.0 * traits->block_bytes / traits->block_elems});
        }
        return out;
    }();
    return types;
}

const QuantType* find_quant_type(const std::string& name)
{
    std::string lower = name;
    for (char& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& t : quant_types())
        if (lower == t.name)
            return &t;
    return nullptr;
}

std::string quant_type_names(int64_t d)
{
    std::string s;
    for (const auto& t : quant_types())
        if (d <= 0 || d % t.block_values == 0)
            s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

std::string quant_type_misfit(const QuantType& t, int64_t d, const std::string& fitting_prefix)
{
    if (d <= 0 || d % t.block_values == 0)
        return "";
    const std::string block = std::to_string(t.block_values), width = std::to_string(d);
    return std::string(t.name) + " stores blocks of " + block + " values, and the width d = " + width +
           " is not a multiple of " + block + " (llama.cpp refuses it too); the types that fit d = " + width +
           ": " + fitting_prefix + quant_type_names(d);
}

} // namespace embedlab
