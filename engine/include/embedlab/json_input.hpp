// JSON read from a user's file (a job, a config.json, a manifest) with every
// object's keys unique: a duplicated key is refused instead of the last one
// silently winning, as nlohmann's parser would have it.
//
//   const auto job = embedlab::parse_json_unique<nlohmann::ordered_json>(text, "job.json");
//
// Thread safety: a pure function. Torch-free.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab {

// Parses `text`; InputError "<label>: not valid JSON (...)" or "<label>: key 'k'
// appears twice in one object (...)".
template <class JsonT = nlohmann::json>
JsonT parse_json_unique(std::string_view text, const std::string& label)
{
    std::vector<std::set<std::string>> keys; // one set per object being read
    std::string duplicate;
    const typename JsonT::parser_callback_t check = [&](int, typename JsonT::parse_event_t event,
                                                        JsonT& parsed) {
        using E = typename JsonT::parse_event_t;
        if (event == E::object_start)
            keys.emplace_back();
        else if (event == E::object_end && !keys.empty())
            keys.pop_back();
        else if (event == E::key && !keys.empty() &&
                 !keys.back().insert(parsed.template get<std::string>()).second && duplicate.empty())
            duplicate = parsed.template get<std::string>();
        return true;
    };
    JsonT j;
    try {
        j = JsonT::parse(text.begin(), text.end(), check);
    } catch (const nlohmann::json::exception& e) {
        throw InputError(label + ": not valid JSON (" + e.what() + ")");
    }
    if (!duplicate.empty())
        throw InputError(label + ": key '" + printable(duplicate) +
                         "' appears twice in one object; give it once (which one was meant is not known)");
    return j;
}

} // namespace embedlab
