// What the built-in methods' torch-free files (request_<family>.cpp) share: how a
// family registers its registry rows (method_registry.hpp) and stored forms
// (stored_form.hpp), and helpers for their checks. Internal to the engine.
#pragma once

#include <algorithm>
#include <string>

#include "embedlab/accounting.hpp"
#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/method_registry.hpp"
#include "embedlab/stored_form.hpp"
#include "embedlab/text_format.hpp"
#include "methods/builtin_methods.hpp"

namespace embedlab::method_rows {

// A family's built-in rows and stored forms, in the order the registry lists them.
struct BuiltinRows {
    const char* family; // as builtin_methods.hpp names it: "low_rank"
    std::vector<MethodDescriptor> methods;
    std::vector<StoredForm> forms;
};
// Registers a family's rows and forms, at the end of its request_<family>.cpp:
//   EMBEDLAB_BUILTIN_ROWS(low_rank, .methods = {pca(), svd()}, .forms = {pca_form(), ..})
#define EMBEDLAB_BUILTIN_ROWS(id, ...)                                                                       \
    BuiltinRows id##_rows()                                                                                  \
    {                                                                                                        \
        return {.family = #id, __VA_ARGS__};                                                                 \
    }
#define EMBEDLAB_DECLARE_BUILTIN_ROWS(family) BuiltinRows family##_rows();
EMBEDLAB_BUILTIN_METHOD_FAMILIES(EMBEDLAB_DECLARE_BUILTIN_ROWS, EMBEDLAB_DECLARE_BUILTIN_ROWS)
#undef EMBEDLAB_DECLARE_BUILTIN_ROWS
// Every family's, in builtin_methods.hpp's order (method_registry.cpp).
const std::vector<BuiltinRows>& builtin_rows();

// "d = 768" for messages ("d" while the width is unknown).
inline std::string width(int64_t d)
{
    return d > 0 ? std::to_string(d) : "d";
}
// v in 1..d (any v >= 1 while d is unknown).
inline bool within_d(int64_t v, int64_t d)
{
    return v >= 1 && (d <= 0 || v <= d);
}
// The shape's product, or 0 when a factor is below 1 or the product exceeds 2^62 (a
// request set in code need not have passed the JSON bounds of 2^24 a factor): never
// overflows, and is never a width d.
inline int64_t shape_product(const std::vector<int64_t>& shape)
{
    int64_t product = 1;
    for (int64_t s : shape)
        if (s < 1 || __builtin_mul_overflow(product, s, &product) || product > (int64_t{1} << 62))
            return 0;
    return product;
}
// shape_product for a message: "768", or why there is none.
inline std::string shape_product_text(const std::vector<int64_t>& shape)
{
    const int64_t p = shape_product(shape);
    return p > 0 ? std::to_string(p) : "beyond 2^62 or with a factor below 1";
}
// TensorSLM's energy model's fields (METHODS 5): pca, svd and tt take them.
inline const std::vector<std::string>& energy_fields()
{
    static const std::vector<std::string> f{"nu", "tau", "device", "energy_tokens"};
    return f;
}

// A sweep's shapes of a tensorised method: --shape I1,I2,.. and --shapes A:B:..
// (each factor in 1..d); InputError "sweep: --method <m> needs ..." without either.
std::vector<std::vector<int64_t>> sweep_shapes(const SweepValues& values, const std::string& method,
                                               int64_t d);
// One request per value: base with `set` applied.
template <class T, class Set>
std::vector<CompressionRequest> each_setting(const std::vector<T>& values, const CompressionRequest& base,
                                             Set set)
{
    std::vector<CompressionRequest> out;
    for (const auto& v : values) {
        CompressionRequest r = base;
        set(r, v);
        out.push_back(std::move(r));
    }
    return out;
}

} // namespace embedlab::method_rows
