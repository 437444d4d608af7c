// Writes a struct's members into a JSON object under their own names, in the order
// given, so a record's field list is written once (the key is the member's name):
//
//   nlohmann::ordered_json j;
//   EMBEDLAB_JSON_MEMBERS(j, result, kl_mean, kl_median, top1_agreement);
//   // j == {"kl_mean": ..., "kl_median": ..., "top1_agreement": ...}
//
// Works for nlohmann::json and ordered_json alike (nlohmann's own macros fix the
// type to json, whose keys come out sorted). Members whose key differs from their
// name, or whose value is computed, are written by hand after it.
#pragma once

#include <nlohmann/json.hpp>

#define EMBEDLAB_JSON_MEMBERS(json_object, record, ...)                                                      \
    do {                                                                                                     \
        auto& nlohmann_json_j = (json_object);                                                               \
        const auto& nlohmann_json_t = (record);                                                              \
        NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__))                             \
    } while (0)
