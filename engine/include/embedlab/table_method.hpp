// A token-embedding compression method behind one interface: how it fits a table, what
// its stored parameters and accounting look like in JSON, and how a results row names
// its settings. compress_table, spec_json, accounting_json and the experiment API call
// these; none of them dispatches on a method name. Each method is one file in
// engine/src/methods/table_*.cpp, which registers it (EMBEDLAB_BUILTIN_TABLES,
// methods/builtin_methods.hpp: the families' one list); its registry row
// (fields, checks) and its stored form's layout are the torch-free request_*.cpp beside
// it, and the table_*.cpp holds the form's rebuild (StoredFormRebuild) and its
// embedding's stored_tensors. register_table_method adds one at run time, after
// register_method added its row; register_stored_form and register_stored_rebuild add
// a form of its own (tests/toy_method_test.cpp).
//
//   const auto& m = embedlab::table_method("pca");      // InputError: unknown, or not a table method
//   m.fit(table, out, model_params, progress);          // out.embedding, accounting, fit record
//   m.parameters(out.spec);                             // "rank 32"
//   account_without_table(request, 50257, 768, 0, "account");  // pca rank 64: no table needed
//
// Thread safety: the methods are stateless singletons; fit is reentrant. Register
// before any other thread reads the list.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/compress.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/method_registry.hpp"
#include "embedlab/stored_form.hpp"

namespace embedlab {

class TableMethod {
public:
    virtual ~TableMethod() = default;
    // The name of the registry row this method implements (method_registry.hpp).
    virtual std::string name() const = 0;
    // Fits `table` [V, d] as out.spec asks: sets out.embedding, out.accounting, out.fit,
    // out.fit_seconds, and the spec's values the fit chose (tt eps: the ranks). Progress
    // runs 0..100 over the fit.
    virtual void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
                     const ProgressFn& progress) const = 0;
    // The spec's own fields, after "method", as embedlab.json's "parameters" hold them.
    virtual void spec_fields(const CompressionSpec& spec, nlohmann::ordered_json& j) const = 0;
    // Accounting fields beyond the common ones (accounting_json); none by default.
    virtual void accounting_fields(const EmbeddingAccounting&, nlohmann::ordered_json&) const {}
    // Where its counts depart from the paper's or METHODS.md's formula, each named by what
    // it counts: the record's and account --json's "conventions" block (issue 62 item 7).
    virtual void conventions(const EmbeddingAccounting&, nlohmann::ordered_json&) const {}
    // The settings as run in a few words, e.g. "rank 32", "shape 4x8x4, ranks 1,4,4,1".
    virtual std::string parameters(const CompressionSpec& spec) const = 0;
    // The fit's floating-point work, roughly, for a table of v rows and width d: what a
    // progress bar paces its stages by, never a reported number. By default pca's: the
    // Gram matrix and its eigenvectors.
    virtual double fit_work(const CompressionRequest& request, double v, double d) const
    {
        return 2 * v * d * d + 10 * d * d * d;
    }
    // A setting's accounting without its table (embedlab-cli account): what a fit of a
    // [vocab, dim] table would count. fill_account_defaults completes the request before
    // check_request sees it (tt: the rank caps when no ranks are given). A method that
    // overrides neither cannot be counted without a fit: both are then an InputError
    // saying so (its stored size depends on what the fit finds in the table).
    virtual void fill_account_defaults(CompressionRequest& request) const;
    virtual EmbeddingAccounting account(const CompressionRequest& request, int64_t vocab, int64_t dim,
                                        int64_t model_params) const;
    // The spec's values beyond the request's own fields (table_spec): tt's default shape,
    // lle's neighbour search. Nothing by default.
    virtual void complete_spec(CompressionSpec&, const CompressionRequest&, int64_t /*d*/) const {}
    // A typical setting for a table of width d, in the fields the request leaves at their
    // defaults: what `embedlab-cli bench lookup --method M` runs without the method's
    // flags (pca: rank min(128, d); tt: 8x8x12 or the balanced shape, ranks 1,4,..,4,1).
    // Nothing by default: the method's flags are then required, as compress requires them.
    virtual void fill_example(CompressionRequest&, int64_t /*d*/) const {}
    // A default picked from the table itself (TableDefault, experiment_request.hpp), for
    // a front end to offer once a model is loaded; seconds of work, so a front end asks
    // only a method that picks_default_from_table. None by default.
    virtual bool picks_default_from_table() const { return false; }
    virtual std::optional<TableDefault> default_from_table(const torch::Tensor& /*table*/,
                                                           const CompressionRequest& /*base*/,
                                                           const ProgressFn& /*progress*/) const
    {
        return std::nullopt;
    }
    // What the fit found, in lines for a person (compress prints them under the common
    // figures): read from out.fit and out.spec as this method's fit wrote them. None by
    // default.
    virtual std::vector<std::string> fit_summary(const CompressedEmbedding&) const { return {}; }
    // What a reader of the accounting should know of this method's numbers, in a sentence
    // or two (the CLI prints it under account's table); none by default.
    virtual std::string accounting_note(const EmbeddingAccounting&) const { return {}; }
    // Whether the fit draws from spec.seed: embedlab.json records the seed (0 otherwise).
    virtual bool fit_is_seeded() const { return false; }
    // Its table's energy under TensorSLM's model (METHODS 5, eqs. 2-5) for a [vocab, dim]
    // table, from the "accounting" block its fit recorded in embedlab.json (measure's
    // energy_model). None by default: no closed form. InputError names the bad field.
    virtual std::optional<EnergyEstimate> recorded_energy(const nlohmann::json& /*accounting*/,
                                                          int64_t /*vocab*/, int64_t /*dim*/,
                                                          const EnergyOptions& /*options*/) const
    {
        return std::nullopt;
    }
};

// One setting's accounting without a table, checked: the method's defaults, then
// check_request(request, dim, label, field_name), then its account. InputError for a
// method that is not a table method or cannot be counted without one.
EmbeddingAccounting account_without_table(CompressionRequest request, int64_t vocab, int64_t dim,
                                          int64_t model_params, const std::string& label,
                                          const FieldName& field_name = {});

// What `account` (and the Python module's account()) reports for one setting:
// account_without_table, TensorSLM's energy model as the request sets it, the model's
// context (an untied head is not compressed; a learned position table of `positions`
// values joins eta_emb, TensorSLM F.3) and, with `stored_type` (ggml's name in any case,
// "q4_0"), the bytes against the table stored as that type. InputError for a type
// EmbedLab does not count.
struct AccountContext {
    int64_t model_params = 0;
    bool tied = true;
    int64_t positions = 0;
    std::string stored_type; // "": no bytes
};
EmbeddingAccounting account_setting(const CompressionRequest& request, int64_t vocab, int64_t dim,
                                    const AccountContext& context, const std::string& label,
                                    const FieldName& field_name = {});

// The spec a table method fits from a request, for a table of width d: the request's
// fields, then the method's complete_spec. The lle methods' frequency split and unk id
// come from the model and text (the experiment API sets them).
CompressionSpec table_spec(const CompressionRequest& request, int64_t d);

// round(linspace(0, v - 1, n)): n evenly spaced row ids [n] (int64), first and last included.
torch::Tensor evenly_spaced_rows(int64_t v, int64_t n);

// TensorSLM's energy model as the request sets it: its device's preset, else nu and tau.
EnergyOptions request_energy(const CompressionRequest& request);

// Every table method, in the registry's order, then those registered.
const std::vector<const TableMethod*>& table_methods();
// Adds a table method (which outlives every run) for a row register_method added:
// InputError if the row is missing or compresses another part, or the name is taken.
void register_table_method(const TableMethod& method);
// The table method called `name`: InputError for an unknown name, or for a method that
// compresses another part (flat: the attention values).
const TableMethod& table_method(const std::string& name);
// The same, or null.
const TableMethod* find_table_method(const std::string& name);

// The torch half of a stored form (stored_form.hpp): how the tensors its layout declared
// become its embedding again. Keyed by the form's name, so a form that names a method
// (lrf) rebuilds with no TableMethod. The tensors written are the embedding's own
// (TokenEmbedding::stored_tensors); compressed_model.cpp checks names and shapes first.
using StoredTensors = std::map<std::string, torch::Tensor>; // names without the table's prefix
struct StoredFormRebuild {
    std::string form;
    // `t` as the form's layout checked it; `f` every tensor it declared, at its shape
    // (moved from as used). InputError for contents it refuses (the loader names the file).
    std::function<std::shared_ptr<const TokenEmbedding>(const TableLayout& t, StoredTensors& f)> rebuild;
    // A form that names a method (lrf): its embedlab.json "parameters" from a spec, as
    // TableMethod::spec_fields writes a method's.
    std::function<void(const CompressionSpec&, nlohmann::ordered_json&)> spec_fields;
};
// Adds the rebuild of a form register_stored_form added: InputError if there is no such
// form, or it has a rebuild already.
void register_stored_rebuild(StoredFormRebuild rebuild);
// InputError "<where>: stored form 'x' has no rebuild in this build" when none is known.
const StoredFormRebuild& stored_rebuild(const std::string& form, const std::string& where);

} // namespace embedlab
