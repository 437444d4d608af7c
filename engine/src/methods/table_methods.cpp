// The table methods (table_method.hpp): each family's as it registered them
// (builtin_methods.hpp), in the registry's order, then those registered at run time.
#include <algorithm>
#include <cctype>
#include <deque>

#include "embedlab/quant_types.hpp"
#include "methods/table_method_support.hpp"

namespace embedlab::table_support {

// Each family's table methods and rebuilds as its table_<family>.cpp registered them,
// in builtin_methods.hpp's order.
const std::vector<BuiltinTables>& builtin_tables()
{
#define EMBEDLAB_TABLES_OF(family) family##_tables(),
#define EMBEDLAB_ROWS_ALONE(family)
    static const std::vector<BuiltinTables> all{
        EMBEDLAB_BUILTIN_METHOD_FAMILIES(EMBEDLAB_TABLES_OF, EMBEDLAB_ROWS_ALONE)};
#undef EMBEDLAB_TABLES_OF
#undef EMBEDLAB_ROWS_ALONE
    return all;
}

} // namespace embedlab::table_support

namespace embedlab {

namespace {

std::vector<const TableMethod*>& methods()
{
    static std::vector<const TableMethod*> list = [] {
        std::vector<const TableMethod*> all;
        for (const auto& family : table_support::builtin_tables())
            all.insert(all.end(), family.methods.begin(), family.methods.end());
        return all;
    }();
    return list;
}

} // namespace

const std::vector<const TableMethod*>& table_methods()
{
    return methods();
}

void register_table_method(const TableMethod& method)
{
    const std::string name = method.name();
    const MethodDescriptor& m = method_descriptor(name); // InputError: register_method first
    if (m.part != CompressedPart::TokenEmbedding)
        throw InputError("register_table_method: method '" + name + "' does not compress the token table");
    for (const TableMethod* t : methods())
        if (t->name() == name)
            throw InputError("register_table_method: method '" + name + "' is taken");
    methods().push_back(&method);
}

const TableMethod* find_table_method(const std::string& name)
{
    for (const TableMethod* t : table_methods())
        if (t->name() == name)
            return t;
    return nullptr;
}

namespace {

// The built-in forms' rebuilds, then those registered (a deque: rows never move).
std::deque<StoredFormRebuild>& rebuilds()
{
    static std::deque<StoredFormRebuild> list = [] {
        std::deque<StoredFormRebuild> all;
        for (const auto& family : table_support::builtin_tables())
            all.insert(all.end(), family.rebuilds.begin(), family.rebuilds.end());
        return all;
    }();
    return list;
}

const StoredFormRebuild* find_rebuild(const std::string& form)
{
    for (const auto& r : rebuilds())
        if (r.form == form)
            return &r;
    return nullptr;
}

} // namespace

void register_stored_rebuild(StoredFormRebuild rebuild)
{
    if (!find_stored_form(rebuild.form))
        throw InputError("register_stored_rebuild: no stored form '" + rebuild.form +
                         "' (register_stored_form first)");
    if (find_rebuild(rebuild.form))
        throw InputError("register_stored_rebuild: form '" + rebuild.form + "' has a rebuild already");
    if (!rebuild.rebuild)
        throw InputError("register_stored_rebuild: form '" + rebuild.form + "' needs a rebuild function");
    rebuilds().push_back(std::move(rebuild));
}

const StoredFormRebuild& stored_rebuild(const std::string& form, const std::string& where)
{
    if (const auto* r = find_rebuild(form))
        return *r;
    throw InputError(where + ": stored form '" + form + "' has no rebuild in this build");
}

const TableMethod& table_method(const std::string& name)
{
    const MethodDescriptor& m = method_descriptor(name);
    for (const TableMethod* t : table_methods())
        if (t->name() == m.name)
            return *t;
    throw InputError("method '" + name + "' compresses " +
                     (m.part == CompressedPart::AttentionValues ? "the attention values" : "another part") +
                     ", not the token embedding");
}

EmbeddingAccounting account_setting(const CompressionRequest& request, int64_t vocab, int64_t dim,
                                    const AccountContext& context, const std::string& label,
                                    const FieldName& field_name)
{
    std::string stored_type = context.stored_type;
    std::transform(stored_type.begin(), stored_type.end(), stored_type.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (!stored_type.empty() && !(stored_bits_per_value(stored_type) > 0))
        throw InputError(label + ": stored type '" + context.stored_type +
                         "' is not a type EmbedLab counts (f32, " + quant_type_names() + ")");
    auto a = account_without_table(request, vocab, dim, context.model_params, label, field_name);
    apply_energy(a, request_energy(request));
    apply_model_context(a, context.tied, context.positions);
    if (!stored_type.empty())
        apply_storage(a, stored_type, a.bits_per_value_after > 0 ? a.bits_per_value_after : 32);
    return a;
}

} // namespace embedlab

namespace embedlab {

namespace {

[[noreturn]] void counted_after_a_fit(const std::string& method)
{
    throw InputError("method '" + method +
                     "' stores what its fit finds in the table, so it is counted only after a fit: compress "
                     "--method " +
                     method + " prints its accounting");
}

} // namespace

void TableMethod::fill_account_defaults(CompressionRequest& request) const
{
    counted_after_a_fit(request.method);
}

EmbeddingAccounting TableMethod::account(const CompressionRequest& request, int64_t, int64_t, int64_t) const
{
    counted_after_a_fit(request.method);
}

bool picks_default_from_table(const std::string& method)
{
    const auto* m = find_method(method);
    if (!m || m->part != CompressedPart::TokenEmbedding)
        return false;
    for (const TableMethod* t : table_methods())
        if (t->name() == m->name)
            return t->picks_default_from_table();
    return false;
}

torch::Tensor evenly_spaced_rows(int64_t v, int64_t n)
{
    return torch::linspace(0, static_cast<double>(v - 1), n, torch::kDouble).round().to(torch::kLong);
}

EnergyOptions request_energy(const CompressionRequest& r)
{
    return r.device.empty() ? EnergyOptions{.nu = r.nu, .tau = r.tau, .tokens = r.energy_tokens}
                            : energy_options_for_device(r.device, r.energy_tokens);
}

CompressionSpec table_spec(const CompressionRequest& r, int64_t d)
{
    const TableMethod& method = table_method(r.method);
    CompressionSpec spec;
    spec.method = method.name();
    spec.rank = r.rank;
    spec.shape = r.shape;
    spec.ranks = r.ranks;
    spec.eps = r.ranks.empty() ? r.eps : 0;
    spec.uniform_ranks = r.uniform_ranks;
    spec.k = method_descriptor(r.method).needs_frequency_text ? std::max<int64_t>(r.k, 1) : 0;
    spec.reg = r.reg;
    spec.mlp = r.mlp;
    spec.hidden_ratio = r.hidden_ratio;
    spec.norm = r.norm;
    spec.loss = r.loss;
    spec.steps = r.steps;
    spec.lr = r.lr;
    spec.batch = r.fit_batch;
    spec.weight_decay = r.weight_decay;
    spec.seed = r.seed;
    spec.type = r.type;
    spec.store = r.store == "f32" ? "" : r.store;
    spec.codebooks = r.codebooks;
    spec.codewords = r.codewords;
    spec.clip = r.clip;
    spec.holdout = r.holdout;
    for (const auto& own : method_descriptor(r.method).own_fields)
        spec.method_fields[own.name] = request_field_value(r, own.name);
    method.complete_spec(spec, r, d);
    return spec;
}

EmbeddingAccounting account_without_table(CompressionRequest request, int64_t vocab, int64_t dim,
                                          int64_t model_params, const std::string& label,
                                          const FieldName& field_name)
{
    const TableMethod& m = table_method(request.method);
    try {
        m.fill_account_defaults(request);
    } catch (const InputError& e) {
        throw InputError(label + ": " + e.what());
    }
    check_request(request, dim, label, field_name);
    try {
        return m.account(request, vocab, dim, model_params);
    } catch (const InputError& e) {
        throw InputError(label + ": " + e.what());
    }
}

} // namespace embedlab
