// The built-in methods' registry rows (method_registry.hpp), one function per method,
// defined in the method family's torch-free file request_<family>.cpp, and what
// those files share. Internal to the engine.
#pragma once

#include <algorithm>
#include <string>

#include "embedlab/accounting.hpp"
#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/method_registry.hpp"
#include "embedlab/stored_form.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab::method_rows {

MethodDescriptor pca();
MethodDescriptor svd();
MethodDescriptor tensor_train();
MethodDescriptor tucker();
MethodDescriptor lle();
MethodDescriptor lle_unk();
MethodDescriptor lle_pca();
MethodDescriptor fourier();
MethodDescriptor quant();
MethodDescriptor aq();
MethodDescriptor flat();

// The built-in stored forms (stored_form.hpp), each beside its method's row;
// stored_forms.cpp lists them.
StoredForm pca_form();
StoredForm svd_form();
StoredForm lrf_form(); // finetune --from-scratch's factors: a form that names a method
StoredForm tt_form();
StoredForm tucker_form();
StoredForm lle_form();
StoredForm lle_unk_form();
StoredForm lle_pca_form();
StoredForm fourier_form();
StoredForm quant_form();
StoredForm aq_form();

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
