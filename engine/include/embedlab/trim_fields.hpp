// Trim's fields as a chain's step and the CLI take them (issue 60): the one place their
// labels, help, ranges and defaults are declared. Trim has no registry row (it is a
// pipeline's first step, not a table method), so its fields are declared here in the
// registry's own form (MethodField) and front ends build from them as from a method's:
//
//   for (const embedlab::MethodField& f : embedlab::trim_fields())
//       add_box(f.name, f.type, f.doc, f.default_value);      // the workbench's page
//   embedlab::trim_flag(embedlab::trim_field("coverage"));    // "--coverage"
//
// A number at 0 or an empty text is "not given" (TrimOptions leaves it unset).
//
// Thread safety: the declarations are built once, on first use, and read-only after.
#pragma once

#include "embedlab/method_registry.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace embedlab {

// freq_text, coverage, keep, keep_tokens, in the order a form shows them.
const std::vector<MethodField>& trim_fields();
// One of them by name; InputError naming the fields there are for any other name.
const MethodField& trim_field(std::string_view name);
// Its command-line flag: "--keep-tokens" for "keep_tokens".
std::string trim_flag(const MethodField& field);

} // namespace embedlab
