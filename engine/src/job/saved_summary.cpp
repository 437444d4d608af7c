// A results row read back from embedlab.json (saved_summary.hpp): the same figures the
// experiment API's run_compression put in its RunSummary, from where export_run wrote them
// (a table method's, run_table.cpp; flat's, run_flat.cpp and save_flat_model).
#include "embedlab/saved_summary.hpp"

#include <cmath>
#include <limits>
#include <memory>

#include "embedlab/accounting.hpp"
#include "embedlab/error.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/quant_types.hpp"
#include "embedlab/table_method.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const Json& member(const Json& j, const char* key)
{
    static const Json null;
    return j.is_object() && j.contains(key) ? j[key] : null;
}

double number(const Json& j, const char* key)
{
    const Json& v = member(j, key);
    return v.is_number() ? v.get<double>() : kNaN;
}

// The spec a table method's parameters() names its settings from, as spec_json wrote it
// (TableMethod::spec_fields). The lle methods' split keeps only its sizes: the record has
// the counts, not the ids.
CompressionSpec spec_from_parameters(const Json& p)
{
    CompressionSpec s;
    s.method = p.value("method", "");
    s.rank = p.value("rank", int64_t{0});
    s.shape = p.value("shape", std::vector<int64_t>{});
    s.ranks = p.value("ranks", std::vector<int64_t>{});
    s.eps = p.value("eps", 0.0);
    s.uniform_ranks = p.value("rank_mode", "") == "uniform";
    s.k = p.value("k", int64_t{0});
    s.mlp = p.value("mlp", s.mlp);
    s.steps = p.value("steps", s.steps);
    s.type = p.value("type", "");
    s.store = p.value("store", "");
    s.codebooks = p.value("codebooks", s.codebooks);
    s.codewords = p.value("codewords", s.codewords);
    if (p.contains("keep_ratio")) {
        auto split = std::make_shared<FrequencySplit>();
        split->keep_ratio = p["keep_ratio"].get<double>();
        split->common.resize(p.value("common", size_t{0}));
        split->rare.resize(p.value("rare", size_t{0}));
        s.split = std::move(split);
    }
    s.method_fields = p; // a registered method's own fields, by name
    return s;
}

// The token table's settings as fit_table names them ("rank 32, stored f16 + positions").
std::string settings(const Json& manifest, const TableMethod& method)
{
    const auto spec = spec_from_parameters(member(manifest, "parameters"));
    return method.parameters(spec) + (spec.store.empty() ? "" : ", stored " + spec.store) +
           (member(manifest, "positions").is_object() ? " + positions" : "");
}

// A stored factor's bits per value ("f16", "q8_0": block scales included).
double stored_type_bits(const std::string& type)
{
    const QuantType* q = find_quant_type(type);
    return q ? q->bits_per_value : 32.0;
}

// The bytes a value takes as the manifest's method stores it (StoredForm::value_bytes:
// quant's blocks 1), float32's 4 for a method this build does not know.
double form_value_bytes(const Json& method)
{
    const std::string name = method.is_string() ? method.get<std::string>() : "";
    const MethodDescriptor* row = find_method(name);
    const StoredForm* form = find_stored_form(row ? row->stored_as : name);
    return form && (row || form->names_a_method) ? form->value_bytes : 4.0;
}

// The bytes a compressed position table's factors take as written, as written_factor_bytes
// counts them: stored types' blocks, any other factor at its form's value width.
double position_factor_bytes(const Json& positions)
{
    const double value_bytes = form_value_bytes(member(positions, "method"));
    double bytes = 0;
    const Json& types = member(positions, "stored_types");
    for (const auto& [name, shape] : member(positions, "factor_tensors").items()) {
        double values = 1;
        for (const auto& n : shape)
            values *= n.get<double>();
        const Json& type = member(types, name.c_str());
        bytes += values * (type.is_string() ? stored_type_bits(type.get<std::string>()) / 8 : value_bytes);
    }
    return bytes;
}

// The whole model as stored (record_model_bytes): a Hugging Face source of one dtype,
// its compressed tables' bytes replaced.
void add_model_bytes(RunSummary& s, const Json& manifest)
{
    const Json& source = member(manifest, "source");
    const Json& dtype = member(source, "stored_dtype");
    const double bits = member(source, "format") == "huggingface" && dtype.is_string()
                            ? stored_bits_per_value(dtype.get<std::string>())
                            : 0.0;
    const double params_before = number(member(manifest, "model_params"), "before");
    if (!(bits > 0 && std::isfinite(params_before) && std::isfinite(s.bytes_before) &&
          std::isfinite(s.bytes_after)))
        return;
    s.model_bytes_before = params_before * bits / 8;
    s.model_bytes_after = s.model_bytes_before - s.bytes_before + s.bytes_after;
    if (const Json& positions = member(manifest, "positions"); positions.is_object())
        s.model_bytes_after += position_factor_bytes(positions) -
                               number(member(positions, "accounting"), "params_before") * bits / 8;
}

// evaluate_run's and run_task's figures, from the record's evaluation block.
void add_evaluation(RunSummary& s, const Json& evaluation)
{
    if (evaluation.contains("compressed")) {
        s.eval_text =
            member(evaluation, "text").is_string() ? evaluation["text"].get<std::string>() : "eval_ids";
        s.ppl_original = number(member(evaluation, "baseline"), "ppl");
        s.ppl = number(evaluation["compressed"], "ppl");
        s.delta_ln_ppl = std::log(s.ppl) - std::log(s.ppl_original);
        s.eval_tokens = evaluation.value("tokens", int64_t{0});
        s.bits_per_byte = number(evaluation["compressed"], "bits_per_byte");
        s.bits_per_byte_original = number(member(evaluation, "baseline"), "bits_per_byte");
    }
    if (const Json& d = member(evaluation, "divergence"); d.is_object()) {
        s.kl_mean = number(d, "kl_mean");
        s.top1_agreement = number(d, "top1_agreement");
        s.window_kl = d.value("window_kl_mean", std::vector<double>{});
        s.window_top1 = d.value("window_top1", std::vector<double>{});
    }
    if (const Json& t = member(evaluation, "task"); t.is_object()) {
        s.task = t.value("name", "");
        s.task_accuracy = number(t, "accuracy");
        s.task_accuracy_original = number(member(t, "original"), "accuracy");
        s.task_n = t.value("n", int64_t{0});
    }
}

// A FLAT-LLM directory's row (run_flat.cpp's FlatFit::fit, save_flat_model): the part it
// narrowed, before and after, in parameters and bytes; the whole model's bytes at the
// width the narrowed model holds its weights.
RunSummary flat_summary(const Json& manifest, const std::string& where)
{
    const Json& storage = member(manifest, "storage");
    std::vector<std::string> missing;
    if (!storage.contains("params_before"))
        missing.push_back("storage.params_before");
    if (!manifest.contains("settings"))
        missing.push_back("settings");
    if (!missing.empty())
        throw InputError(where + ": flat's record has no results row: embedlab.json lacks " +
                         joined(missing, " and ") +
                         " (the part's parameters before narrowing and the settings' words, which flat "
                         "records written before 2026-11-29 do not keep); its figures are in "
                         "model_params, storage and evaluation; compress it again to read its row back");
    try {
        RunSummary s;
        s.method = "flat";
        s.parameters = manifest.at("settings").get<std::string>();
        s.part = storage.at("part").get<std::string>();
        s.params_before = storage.at("params_before").get<int64_t>();
        s.params_after = storage.at("params_after").get<int64_t>();
        s.ratio = static_cast<double>(s.params_after) / static_cast<double>(s.params_before);
        s.mean_cosine = s.seconds = kNaN; // no rows compared; not recorded
        const Json& source = member(member(manifest, "source"), "path");
        s.model = source.is_string() ? source.get<std::string>() : "";
        s.ppl_original = s.ppl = s.delta_ln_ppl = kNaN;
        if (const double before = number(storage, "bytes_before"); std::isfinite(before)) {
            s.bytes_before = before;
            s.bytes_after = storage.at("bytes_after").get<double>();
            const Json& params = manifest.at("model_params");
            const Json& dtype = member(member(manifest, "source"), "stored_dtype");
            const double bits = dtype.is_string() ? stored_bits_per_value(dtype.get<std::string>()) : 0.0;
            s.model_bytes_before = params.at("before").get<double>() * bits / 8;
            s.model_bytes_after =
                params.at("after").get<double>() * storage.at("bytes_per_value").get<double>();
        }
        add_evaluation(s, member(manifest, "evaluation"));
        return s;
    } catch (const nlohmann::json::exception& e) {
        throw InputError(where +
                         ": embedlab.json's settings, storage or model_params is missing or mistyped (" +
                         e.what() + ")");
    }
}

} // namespace

RunSummary summary_from_record(const Json& manifest, const std::string& where)
{
    const std::string method_name =
        member(manifest, "method").is_string() ? manifest["method"].get<std::string>() : "";
    if (method_name == "flat" && member(manifest, "format") == "embedlab-compressed-model")
        return flat_summary(manifest, where);
    // A method of this build that is no table method wrote a directory of another kind.
    const bool other_kind = find_method(method_name) && !find_table_method(method_name);
    if (member(manifest, "format") != "embedlab-compressed-model" || other_kind ||
        manifest.contains("finetune") || manifest.contains("finetuned_from"))
        throw InputError(where + ": the record is not a table method's compressed directory (" +
                         (method_name.empty() ? std::string("no method") : "method " + method_name) +
                         "); a results row is read back from a token-table method's or flat's compress --out "
                         "(without LoRA)");
    const TableMethod* method = find_table_method(method_name);
    if (!method)
        throw InputError(where + ": method '" + method_name + "' is not a table method of this build");
    try {
        RunSummary s;
        const Json& accounting = manifest.at("accounting");
        s.method = method_name;
        s.parameters = settings(manifest, *method);
        s.part = "token_embedding";
        s.params_before = accounting.at("params_before").get<int64_t>();
        s.params_after = accounting.at("params_after").get<int64_t>();
        s.ratio = static_cast<double>(s.params_after) / static_cast<double>(s.params_before);
        s.mean_cosine = manifest.at("reconstruction").at("mean_cosine").get<double>();
        s.seconds = kNaN; // not recorded
        const Json& source = member(member(manifest, "source"), "path");
        s.model = source.is_string() ? source.get<std::string>() : ""; // made absolute when written
        s.ppl_original = s.ppl = s.delta_ln_ppl = kNaN;
        if (const Json& storage = member(accounting, "storage"); number(storage, "bytes_after") > 0)
            s.bytes_before = number(storage, "bytes_before"), s.bytes_after = number(storage, "bytes_after");
        add_model_bytes(s, manifest);
        add_evaluation(s, member(manifest, "evaluation"));
        return s;
    } catch (const nlohmann::json::exception& e) {
        throw InputError(where + ": embedlab.json's accounting or reconstruction is missing or mistyped (" +
                         e.what() + ")");
    }
}

} // namespace embedlab
