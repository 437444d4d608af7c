// An enum's names (and whatever else goes with each value) as one table read
// both ways: value -> name for JSON and messages, name -> value for flags and
// files. A table is any range of rows with members `value` and `name`
// (Named<E>, or a struct with more columns); row_with_name needs only `name`.
//
//   constexpr Named<KnnKind> kKnnKinds[]{{KnnKind::Exact, "exact"}, {KnnKind::IVF, "ivf"}};
//   name_of(kKnnKinds, KnnKind::IVF)            // "ivf"
//   row_with_name(kKnnKinds, "ivf")->value      // KnnKind::IVF (nullptr: no such name)
//   value_named(kKnnKinds, flag, "knn '" + flag + "' must be exact or ivf")  // or InputError
#pragma once

#include <ranges>
#include <string>
#include <string_view>

#include "embedlab/error.hpp"

namespace embedlab {

template <class E> struct Named {
    E value;
    const char* name;
};

template <std::ranges::range Rows> using RowOf = std::ranges::range_value_t<Rows>;

template <std::ranges::range Rows>
constexpr const RowOf<Rows>* row_with_value(const Rows& rows, decltype(RowOf<Rows>::value) value)
{
    for (const auto& row : rows)
        if (row.value == value)
            return &row;
    return nullptr;
}

template <std::ranges::range Rows>
constexpr const RowOf<Rows>* row_with_name(const Rows& rows, std::string_view name)
{
    for (const auto& row : rows)
        if (name == row.name)
            return &row;
    return nullptr;
}

template <std::ranges::range Rows>
constexpr const char* name_of(const Rows& rows, decltype(RowOf<Rows>::value) value, const char* unknown = "?")
{
    const auto* row = row_with_value(rows, value);
    return row ? row->name : unknown;
}

// The value named `name`; InputError(problem) when no row has that name.
template <std::ranges::range Rows>
decltype(RowOf<Rows>::value) value_named(const Rows& rows, std::string_view name, const std::string& problem)
{
    if (const auto* row = row_with_name(rows, name))
        return row->value;
    throw InputError(problem);
}

} // namespace embedlab
