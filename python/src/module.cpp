// The `embedlab` Python module (issue 43): the engine's experiment API from Python.
// Like the CLI it is a front end: it wraps engine calls and adds no maths. Functions:
// version, methods, load (model.cpp), compress and Run, compress_chain and Chain (trim,
// then a method: pipeline.hpp), account, dequantize;
// embedlab/__init__.py adds sweep. Engine InputError -> embedlab.InputError (a ValueError), Cancelled ->
// embedlab.Cancelled.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "convert.hpp"
#include "embedlab/additive_quantisation.hpp"
#include "embedlab/compressed_model.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/method_registry.hpp"
#include "embedlab/model_files.hpp"
#include "embedlab/pipeline.hpp"
#include "embedlab/quant_types.hpp"
#include "embedlab/quantised_table.hpp"
#include "embedlab/saved_summary.hpp"
#include "embedlab/table_method.hpp"
#include "embedlab/token_damage.hpp"
#include "model.hpp"
#include "progress.hpp"

namespace embedlab::python {

namespace {

// A finished run, shared with the Models it hands out; or one load_run read back from
// a compressed directory (its embedlab.json, model and factors; no results row).
struct Run {
    std::shared_ptr<CompressionRun> run;
    std::string dir;                                        // load_run's directory ("" in memory)
    std::shared_ptr<const nlohmann::ordered_json> manifest; // load_run's embedlab.json
    bool verify = true;                                     // load_run's verify=, for pickling
};

bool saved(const Run& r)
{
    return r.manifest != nullptr;
}

std::string without_job_prefix(const std::string& message, const std::string& label)
{
    return message.rfind("job: ", 0) == 0 ? label + ": " + message.substr(5) : message;
}

// check_request's name for a field: the keyword that sets it ("rank" -> "rank="); method
// is compress()'s second argument.
std::string keyword(const std::string& field)
{
    return field == "method" ? field : field + "=";
}

// The request: method and model, then each keyword as the request's JSON field of that
// name, checked without the model (check_request_against then checks it against one).
CompressionRequest request_from(const std::string& model, const std::string& tokenizer,
                                const std::string& method, const py::dict& fields, const std::string& label)
{
    CompressionRequest r;
    r.model = model;
    r.tokenizer = tokenizer;
    r.method = method;
    const auto& known = request_fields();
    for (const auto& [key, value] : fields) {
        const auto name = key.cast<std::string>();
        if (name == "model" || name == "method" || std::find(known.begin(), known.end(), name) == known.end())
            throw InputError(label + ": no request field '" + name + "'");
        try {
            set_request_field(r, name, to_json(value, label + ": " + keyword(name)));
        } catch (const InputError& e) {
            throw InputError(without_job_prefix(e.what(), label));
        }
    }
    check_request(r, 0, label, keyword);
    return r;
}

// The request against the model's shape, as the CLI checks its flags once it has loaded
// the model: ranks, k and shapes against d, ctx against the model's context.
void check_request_against(const CompressionRequest& r, const ModelConfig& config, const std::string& label)
{
    check_request(r, config.embedding_dim(), label, keyword);
    const int64_t context = config.max_positions > 0 ? config.max_positions : INT64_MAX;
    if (r.ctx > context)
        throw InputError(label + ": " + keyword("ctx") + " " + std::to_string(r.ctx) +
                         " exceeds the model's context of " + std::to_string(context) + " positions");
}

// compress()'s and sweep()'s model: a Model (its path and tokenizer=) or a path.
struct Source {
    std::string path, tokenizer;
    const Model* model = nullptr;
};

Source source_of(const py::handle& model, const std::string& label)
{
    if (py::isinstance<Model>(model)) {
        const auto& m = model.cast<const Model&>();
        // The engine compresses an original model only (a compressed directory is refused
        // too): a run's model in memory has nothing else to offer.
        if (!m.run_source.empty())
            throw InputError(label + ": model is a run's compressed model (" + m.path +
                             "); EmbedLab compresses an original model, not a compressed one: pass the "
                             "original, " +
                             m.run_source);
        return {m.path, m.tokenizer_option, &m};
    }
    if (!is_path_like(model))
        throw py::type_error(label + ": model must be an embedlab.Model, a str or an os.PathLike, not " +
                             type_name(model));
    return {path_arg(model, label + ": model"), ""};
}

// A checked request run as compress() runs it.
Run run_request(const CompressionRequest& request, PythonProgress& progress)
{
    auto run = without_gil(progress, [&] {
        // As run_compression(request) does, with the check against the model between (the CLI's order).
        const auto report = progress.experiment();
        if (!report({"load", 0, 1, 0}))
            throw Cancelled();
        auto loaded = load_model(request.model, request_load_options(request));
        check_request_against(request, loaded.model->config(), "compress");
        auto r = std::make_shared<CompressionRun>(run_compression(request, std::move(loaded), report));
        if (!r->model.tokenizer) { // a run that read no text loads none; Run.model tokenizes
            try {
                r->model.tokenizer = load_model_tokenizer(r->model.files, request_load_options(request),
                                                          &r->model.tokenizer_path);
            } catch (const InputError&) {
                // A model without a tokenizer of its own: Run.model.tokenize says so.
            }
        }
        return r;
    });
    return Run{std::move(run)};
}

Run compress(const py::object& model, const std::string& method, const py::object& callback,
             const py::kwargs& fields)
{
    const auto source = source_of(model, "compress");
    const auto request = request_from(source.path, source.tokenizer, method, fields, "compress");
    PythonProgress progress(callback, "compress: progress");
    return run_request(request, progress);
}

// compress_chain()'s result (pipeline.hpp): the chain's row, its one record and what
// `out` holds ("" when the chain wrote nothing).
struct Chain {
    PipelineResult result;
    std::string out;
    std::string label; // pipeline_label: "trim 0.999 → pca rank 32 → q8_0"
};

// The chain as a JSON request, as a worker job gives it: the model, the keywords (the
// model's evaluation fields, each a request field) and the steps.
PipelineRequest chain_request(const Source& source, const py::handle& pipeline, const py::kwargs& fields)
{
    const std::string label = "compress_chain";
    if (!py::isinstance<py::list>(pipeline) && !py::isinstance<py::tuple>(pipeline))
        throw py::type_error(label +
                             ": pipeline must be a list of steps, dicts such as {\"method\": \"pca\", " +
                             "\"rank\": 32}, not " + type_name(pipeline));
    nlohmann::ordered_json json = {{"model", source.path}};
    if (!source.tokenizer.empty())
        json["tokenizer"] = source.tokenizer;
    const auto& known = request_fields();
    for (const auto& [key, value] : fields) {
        const auto name = key.cast<std::string>();
        if (name == "model" || name == "method" || std::find(known.begin(), known.end(), name) == known.end())
            throw InputError(label + ": no request field '" + name + "' (a step's fields go in its dict)");
        json[name] = to_json(value, label + ": " + keyword(name));
    }
    json["pipeline"] = to_json(pipeline, label + ": pipeline");
    return pipeline_from_json(json);
}

// The chain checked as the CLI checks it before any work (trim's options, then the steps
// against the model's configuration), then run without the GIL.
Chain compress_chain(const py::object& model, const py::handle& pipeline, const py::object& out_like,
                     bool overwrite, bool dense, const py::object& callback, const py::kwargs& fields)
{
    const auto source = source_of(model, "compress_chain");
    const auto request = chain_request(source, pipeline, fields);
    const std::string out = out_like.is_none() ? "" : path_arg(out_like, "compress_chain: out");
    PythonProgress progress(callback, "compress_chain: progress");
    auto result = without_gil(progress, [&] {
        if (request.trim)
            check_trim_options(*request.trim);
        check_pipeline_request(request,
                               read_model_files(request.request.model, WeightValues::ShapesOnly).config);
        return run_pipeline(request, out, {.overwrite = overwrite, .dense = dense}, progress.experiment());
    });
    return Chain{std::move(result), out, pipeline_label(request)};
}

// The record's block of the chain (a trimmed chain's "pipeline"), or null.
const nlohmann::ordered_json* chain_block(const Chain& c)
{
    return c.result.record.contains("pipeline") ? &c.result.record["pipeline"] : nullptr;
}

// Every step's settings: a trimmed chain's steps as its record holds them; a chain of one
// method is its request.
py::object chain_steps(const Chain& c)
{
    if (const auto* block = chain_block(c))
        return to_python((*block)["request"]["pipeline"]);
    return to_python(nlohmann::ordered_json::array({c.result.record["request"]}));
}

// The whole chain's parameters and bytes against the original model: the record's, or
// for a chain of one method its row's (the same fields: that run's input is the original).
py::object chain_totals(const Chain& c)
{
    if (const auto* block = chain_block(c))
        return to_python((*block)["whole_chain"]);
    const RunSummary& s = c.result.summary;
    const auto value = [](double v) {
        return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
    };
    return to_python(nlohmann::ordered_json{
        {"table_parameters", {{"before", s.params_before}, {"after", s.params_after}, {"ratio", s.ratio}}},
        {"table_bytes", {{"before", value(s.bytes_before)}, {"after", value(s.bytes_after)}}},
        {"model_bytes", {{"before", value(s.model_bytes_before)}, {"after", value(s.model_bytes_after)}}}});
}

void bind_chain(py::module_& m)
{
    py::class_<Chain>(m, "Chain",
                      "A finished chain (embedlab.compress_chain): trim, then a method, then its store.")
        .def_property_readonly(
            "summary", [](const Chain& c) { return to_python(summary_json(c.result.summary)); },
            "The chain's results row: method \"chain\" after trim, parameters its label.")
        .def_property_readonly(
            "record", [](const Chain& c) { return to_python(c.result.record); },
            "The run's one record, as compress --json prints it (the \"pipeline\" block after trim).")
        .def_property_readonly(
            "manifest",
            [](const Chain& c) {
                return c.out.empty() ? py::object(py::none()) : to_python(c.result.manifest);
            },
            "What out= holds (embedlab.json, or run.json for trim alone); None without out=.")
        .def_property_readonly(
            "out",
            [](const Chain& c) {
                return c.out.empty() ? py::object(py::none()) : py::object(py::str(c.out));
            },
            "The output directory, or None (out= not given: the record only).")
        .def_property_readonly("steps", &chain_steps, "Every step's settings, in order (trim's first).")
        .def_property_readonly(
            "whole_chain", &chain_totals,
            "table_parameters, table_bytes and model_bytes, before (the original model) and "
            "after (the last step's).")
        .def_property_readonly(
            "label", [](const Chain& c) { return c.label; },
            "The steps in a line: \"trim 0.999 → pca rank 32 → q8_0\".")
        .def("__repr__", [](const Chain& c) {
            std::string text = "<embedlab.Chain ";
            text += c.label;
            if (!c.out.empty())
                text += " in " + c.out;
            return text + ">";
        });
}

// A run on a table alone (compress_table): no model, so no summary, model or export.
bool table_only(const Run& r)
{
    return r.run->embedding && !r.run->model.model;
}

void refuse_table_only(const Run& r, const std::string& what)
{
    if (table_only(r))
        throw InputError("Run." + what + ": this run compressed a table alone (embedlab.compress_table), " +
                         "which has no model; use model.with_table(run.embedding_table()) for one");
}

void refuse_table_only_flat(const Run& r)
{
    if (!r.run->embedding)
        throw InputError("Run.embedding_table: " + describe_request(r.run->request) +
                         " compressed no token table (flat narrows the model's projections)");
}

// compress_table(): a table method on a caller's table [V, d], through the engine's table
// path (check_request with d, table_spec, compress_table), accounted in `model`'s context
// (as a run of its file accounts it) or the one given as account() takes it.
Run compress_table_alone(const py::handle& table, const std::string& method, const py::object& model,
                         int64_t model_params, bool tied, int64_t positions,
                         const std::optional<std::string>& stored_type, const py::object& callback,
                         const py::kwargs& fields)
{
    const std::string label = "compress_table";
    try {
        table_method(method); // flat and unknown names: said as the CLI says them
    } catch (const InputError& e) {
        throw InputError(label + ": " + e.what());
    }
    const auto& descriptor = method_descriptor(method);
    if (descriptor.needs_frequency_text)
        throw InputError(label + ": method '" + method +
                         "' splits the vocabulary by a frequency text read with the model's tokenizer; "
                         "use compress() on a model file");
    // The fit's own fields and the energy model's; the rest (texts, evaluation, LoRA, the
    // stored type of a directory's factors) need a model file.
    static const std::vector<std::string> shared = {"seed", "device", "nu", "tau", "energy_tokens"};
    for (const auto& item : fields) {
        const auto name = item.first.cast<std::string>();
        const auto& own = descriptor.fields;
        const bool known =
            std::find(request_fields().begin(), request_fields().end(), name) != request_fields().end();
        if (name == "store") // store_factors names the tensors by a model's layout
            throw InputError(label + ": store= needs a model file (the factors are stored in its "
                                     "directory's layout); use compress()");
        if (known && name != "method" && name != "model" &&
            std::find(own.begin(), own.end(), name) == own.end() &&
            std::find(shared.begin(), shared.end(), name) == shared.end())
            throw InputError(label + ": " + keyword(name) + " needs a model file (" + name +
                             " is not a field of the table's fit); use compress()");
    }
    const Model* context = model.is_none() ? nullptr : &model_arg(model, label + ": model");
    if (context && (model_params != 0 || !tied || positions != 0 || stored_type))
        throw InputError(label + ": give model= or model_params=, tied=, positions=, stored_type=, not both");
    const auto request = request_from("", "", method, fields, label);
    const auto rows = table_arg(table, context ? context->live()->config().vocab_size : -1,
                                context ? context->live()->config().embedding_dim() : -1, label + ": table");
    const int64_t d = rows.size(1);
    check_request(request, d, label, keyword);
    const auto spec = table_spec(request, d);
    PythonProgress progress(callback, label + ": progress");
    auto run = std::make_shared<CompressionRun>();
    run->request = request;
    without_gil(progress, [&] {
        if (context) {
            const auto breakdown = context->live()->parameter_breakdown();
            auto c = compress_table(rows, spec, breakdown.total(), progress.plain("compress " + method));
            // As a run of the model's file accounts its table.
            apply_model_context(c.accounting, context->live()->config().tied_embeddings,
                                breakdown.position_embedding);
            apply_energy(c.accounting, request_energy(request));
            apply_storage(c.accounting, context->files ? token_embedding_stored_type(*context->files) : "",
                          c.accounting.bits_per_value_after > 0 ? c.accounting.bits_per_value_after : 32);
            run->embedding = std::move(c);
        } else {
            // As account() counts a setting: energy, then the context given.
            auto c = compress_table(rows, spec, model_params, progress.plain("compress " + method));
            apply_energy(c.accounting, request_energy(request));
            apply_model_context(c.accounting, tied, positions);
            if (stored_type)
                apply_storage(c.accounting, *stored_type,
                              c.accounting.bits_per_value_after > 0 ? c.accounting.bits_per_value_after : 32);
            run->embedding = std::move(c);
        }
        return 0;
    });
    return Run{std::move(run)};
}

// sweep()'s rows checked before the first runs: each (label, fields) as compress would
// check it, against the model's configuration (read once: shapes only, no weights for a
// Hugging Face directory).
void check_requests(const py::object& model, const std::string& method, const py::list& rows)
{
    const auto source = source_of(model, "sweep");
    std::vector<std::pair<std::string, CompressionRequest>> requests;
    for (const auto& row : rows) {
        const auto pair = row.cast<py::tuple>();
        const auto label = pair[0].cast<std::string>();
        requests.emplace_back(
            label, request_from(source.path, source.tokenizer, method, pair[1].cast<py::dict>(), label));
    }
    ModelConfig config;
    if (source.model) {
        config = source.model->live()->config();
    } else {
        py::gil_scoped_release release;
        config = read_model_files(source.path, WeightValues::ShapesOnly).config;
    }
    for (const auto& [label, request] : requests)
        check_request_against(request, config, label);
}

// A factor's name without the table's prefix or its method ("Z", "P", "mu", "core0").
std::string short_name(const std::string& name)
{
    const auto dot = name.find('.');
    return dot == std::string::npos ? name : name.substr(dot + 1);
}

// The stored type's entry for a factor named without the model's prefix ("pca.Z"): store
// names its tensors with it ("model.embed_tokens.pca.Z"). Null when it stayed as it was.
const std::pair<std::string, torch::Tensor>* stored_factor(const CompressedEmbedding& c,
                                                           const std::string& name)
{
    for (const auto& entry : c.stored_tensors) {
        const auto& full = entry.first;
        if (full == name ||
            (full.size() > name.size() && full.compare(full.size() - name.size(), name.size(), name) == 0 &&
             full[full.size() - name.size() - 1] == '.'))
            return &entry;
    }
    return nullptr;
}

// A factor's type as Run.factor_types names it: the stored type (store=), quant's type for
// its blocks, "f32" for float32, else NumPy's name ("int32" ids).
std::string factor_type(const CompressedEmbedding& c, const std::string& name, const torch::Tensor& t)
{
    if (const auto* s = stored_factor(c, name))
        return c.stored_types.at(s->first).get<std::string>();
    if (const auto rows = c.embedding->stored_row_type(); !rows.empty()) // quant's blocks
        return rows;
    switch (t.scalar_type()) {
    case torch::kFloat32:
        return "f32";
    case torch::kInt32:
        return "int32";
    case torch::kInt16:
        return "int16";
    case torch::kInt64:
        return "int64";
    case torch::kUInt8:
        return "uint8";
    default:
        return c10::toString(t.scalar_type());
    }
}

// A stored factor as its bytes hold it: f16 as float16 and bf16 as uint16 (its bits, NumPy
// has no bfloat16), both of the factor's shape; ggml's block types as uint8 [rows, row bytes].
py::object stored_array(const torch::Tensor& blocks, const std::string& type, c10::IntArrayRef shape)
{
    py::object a = to_numpy(blocks);
    if (type != "f16" && type != "bf16")
        return a;
    const std::vector<py::ssize_t> dims(shape.begin(), shape.end());
    return a.attr("view")(type == "f16" ? "<f2" : "<u2").attr("reshape")(py::tuple(py::cast(dims)));
}

enum class FactorView { Stored, Float32, Types };

// Run.factors (as stored), factors_f32 (decoded) and factor_types, by name without the
// table's prefix. Empty for flat: the narrowed projections are the model's own weights.
py::dict factor_dict(const Run& r, FactorView view)
{
    py::dict out;
    if (!r.run->embedding)
        return out;
    const auto& c = *r.run->embedding;
    // The embedding was rebuilt from the stored bytes: its factors are those bytes decoded.
    for (const auto& [name, t] : embedding_factor_tensors(*c.embedding, "")) {
        const py::str key(short_name(name));
        const auto* stored = stored_factor(c, name);
        if (view == FactorView::Types)
            out[key] = factor_type(c, name, t);
        else if (view == FactorView::Stored && stored)
            out[key] = stored_array(stored->second, factor_type(c, name, t), t.sizes());
        else
            out[key] = to_numpy(t);
    }
    return out;
}

// dequantize(): ggml blocks (uint8 [..., row bytes]) or f16/bf16 values (float16/uint16
// [..., n]) as float32 [..., n], or `shape`; the engine's own decoder (quant's lookup).
py::array dequantize(const py::handle& data, const std::string& type, const py::object& shape)
{
    const auto* q = find_quant_type(type);
    if (!q)
        throw InputError("dequantize: '" + type + "' is not a stored type: " + quant_type_names());
    const py::array a = py::module_::import("numpy").attr("ascontiguousarray")(data);
    const auto block_bytes = static_cast<int64_t>(std::llround(q->bits_per_value * q->block_values / 8));
    const bool values = q->block_values == 1 && a.itemsize() == block_bytes; // float16 or uint16
    if (a.ndim() < 1 || (!values && a.dtype().kind() != 'u') || (!values && a.itemsize() != 1))
        throw InputError(
            std::string("dequantize: ") + q->name + " data must be uint8 blocks [..., row bytes]" +
            (q->block_values == 1 ? " or 2-byte values [..., n]" : "") + ", not " +
            std::string(py::str(a.dtype())) + " of " + std::to_string(a.ndim()) + " dimension(s)");
    const int64_t last = a.shape(a.ndim() - 1);
    const int64_t row_bytes = values ? last * block_bytes : last;
    if (row_bytes == 0 || row_bytes % block_bytes != 0)
        throw InputError("dequantize: a row of " + std::to_string(row_bytes) + " bytes is not whole " +
                         q->name + " blocks of " + std::to_string(block_bytes) + " bytes");
    const int64_t n = row_bytes / block_bytes * q->block_values, rows = a.nbytes() / row_bytes;
    std::vector<int64_t> out_shape(a.shape(), a.shape() + a.ndim());
    out_shape.back() = n;
    if (!shape.is_none()) {
        out_shape = shape.cast<std::vector<int64_t>>();
        int64_t count = 1;
        for (int64_t s : out_shape)
            count *= s;
        if (count != rows * n)
            throw InputError("dequantize: shape holds " + std::to_string(count) + " values, the data " +
                             std::to_string(rows * n));
    }
    // The array's bytes, read in place (the decoder writes a new tensor).
    const auto bytes = torch::from_blob(const_cast<void*>(a.data()), {rows, row_bytes}, torch::kUInt8);
    return to_numpy(QuantisedTokenEmbedding(q->name, n, bytes).rebuilt_rows().reshape(out_shape));
}

// aq's stored codes (Run.factors["codes"]: uint8 [V, ceil(M log2 K / 8)], packed) as
// uint8 [V, M], by the engine's own unpacking, for Run.to_torch.
py::array unpack_aq(const py::handle& packed, int64_t codebooks, int64_t codewords)
{
    const py::array a = py::module_::import("numpy").attr("ascontiguousarray")(packed, "uint8");
    if (a.ndim() != 2)
        throw InputError("_unpack_aq_codes: the codes must be uint8 [V, row bytes], not " +
                         std::to_string(a.ndim()) + " dimension(s)");
    const auto bytes = torch::from_blob(const_cast<void*>(a.data()), {a.shape(0), a.shape(1)}, torch::kUInt8);
    return to_numpy(unpack_aq_codes(bytes, codebooks, codewords));
}

// python3 -m embedlab's facts: where libtorch was loaded from and its thread count.
py::dict runtime()
{
    py::dict out;
    Dl_info info{};
    // A libtorch function's address names the library that holds it.
    if (dladdr(reinterpret_cast<void*>(&at::get_num_threads), &info) && info.dli_fname)
        out["libtorch"] = std::string(info.dli_fname);
    else
        out["libtorch"] = py::none();
    out["threads"] = at::get_num_threads();
    const char* setting = std::getenv("EMBEDLAB_THREADS");
    out["EMBEDLAB_THREADS"] = setting ? py::object(py::str(setting)) : py::object(py::none());
    return out;
}

Model run_model(const Run& r)
{
    refuse_table_only(r, "model");
    Model m;
    m.lm = &r.run->compressed_model();
    m.tokenizer = r.run->model.tokenizer.get();
    m.files = &r.run->model.files;
    m.path = saved(r) ? r.dir : r.run->request.model + " (" + describe_request(r.run->request) + ")";
    m.tokenizer_option = r.run->request.tokenizer;
    m.run_source = r.run->request.model;
    m.unpicklable = "a run's compressed model; pickle the Run instead";
    m.owner = r.run;
    return m;
}

// load_run's request: embedlab.json's parameters with the source model and the
// evaluation's text and ctx; the method alone when they do not read back as a request.
CompressionRequest saved_request(const nlohmann::ordered_json& manifest)
{
    const auto member = [](const nlohmann::ordered_json& j, const char* key) {
        return j.is_object() && j.contains(key) ? j[key] : nlohmann::ordered_json();
    };
    const auto source = member(member(manifest, "source"), "path");
    const auto evaluation = member(manifest, "evaluation");
    auto fields = member(manifest, "parameters");
    if (!fields.is_object())
        fields = nlohmann::ordered_json::object();
    if (source.is_string())
        fields["model"] = source;
    if (member(evaluation, "text").is_string())
        fields["eval_text"] = evaluation["text"];
    for (const char* key : {"ctx", "stride"})
        if (member(evaluation, key).is_number_integer())
            fields[key] = evaluation[key];
    try {
        return request_from_json(fields);
    } catch (const InputError&) {
        CompressionRequest r;
        r.model = source.is_string() ? source.get<std::string>() : "";
        r.method = member(manifest, "method").is_string() ? manifest["method"].get<std::string>() : "";
        return r;
    }
}

// The factors a directory stores at a type (embedlab.json's stored_types) as their
// bytes, as a run in memory holds them: as read (uint8); f16 and bf16 read as float32
// back to their bytes (exact: each value was one of theirs).
void read_stored_factors(CompressedEmbedding& c, const nlohmann::ordered_json& manifest,
                         const std::filesystem::path& dir)
{
    if (!manifest.contains("stored_types") || !manifest["stored_types"].is_object() ||
        manifest["stored_types"].empty())
        return;
    const auto weights = load_safetensors(dir / "model.safetensors");
    const auto types = manifest["stored_types"];
    for (const auto& [name, type_json] : types.items()) {
        const auto found = weights.find(name);
        if (found == weights.end() || !type_json.is_string())
            continue; // the loader has refused such a directory already
        const auto type = type_json.get<std::string>();
        torch::Tensor bytes = found->second;
        if ((type == "f16" || type == "bf16") && bytes.is_floating_point()) {
            const auto values = bytes.to(type == "f16" ? torch::kHalf : torch::kBFloat16).contiguous();
            bytes = torch::from_blob(values.data_ptr(), {values.numel() * 2}, torch::kUInt8).clone();
        }
        c.stored_tensors.emplace_back(name, bytes);
        c.stored_types[name] = type;
    }
    c.factors_stored = true;
}

Run load_run(const py::object& dir_like, bool verify)
{
    const auto dir = path_arg(dir_like, "load_run: dir");
    auto run = std::make_shared<CompressionRun>();
    auto manifest = std::make_shared<nlohmann::ordered_json>();
    {
        py::gil_scoped_release release;
        LoadOptions options;
        options.verify = verify;
        run->model = load_model(dir, options);
        if (run->model.files.embedlab_manifest.empty())
            throw InputError("load_run: " + dir +
                             " is not an EmbedLab compressed directory (it has no embedlab.json); "
                             "embedlab.load reads a model");
        *manifest = nlohmann::ordered_json::parse(run->model.files.embedlab_manifest);
        run->request = saved_request(*manifest);
        const auto* method = find_method(run->request.method);
        if (method && method->part == CompressedPart::TokenEmbedding) {
            CompressedEmbedding c;
            c.embedding = run->model.model->shared_token_embedding();
            read_stored_factors(c, *manifest, dir);
            run->embedding = std::move(c);
        }
    }
    return Run{std::move(run), dir, std::move(manifest), verify};
}

// A LoRA run's row from its record: the table's row as summary_from_record reads the
// record without its LoRA blocks, then the adapters counted as recover_table counts them
// (run_table.cpp): the settings' words, their parameters as stored values of 4 bytes.
RunSummary lora_saved_summary(const nlohmann::ordered_json& manifest, const std::string& where)
{
    const auto& lora = manifest["lora"];
    const auto training = manifest.contains("finetune")
                              ? manifest["finetune"].value("training", nlohmann::ordered_json())
                              : nlohmann::ordered_json();
    if (!lora.is_object() || !lora.contains("parameters") || !lora.contains("rank") ||
        !training.is_object() || !training.contains("steps"))
        throw InputError(where +
                         ": the LoRA record lacks lora.parameters, lora.rank or finetune.training.steps, "
                         "which its row counts");
    auto table = manifest;
    for (const char* key : {"lora", "finetune", "finetuned_from"})
        table.erase(key);
    const auto adapters = lora["parameters"].get<int64_t>();
    // model_params.before counts the adapters too (the fine-tuned model's own count).
    if (table.contains("model_params") && table["model_params"].contains("before"))
        table["model_params"]["before"] = table["model_params"]["before"].get<int64_t>() - adapters;
    RunSummary s = summary_from_record(table, where);
    s.parameters += " + LoRA r " + std::to_string(lora["rank"].get<int64_t>()) + ", " +
                    std::to_string(training["steps"].get<int64_t>()) + " steps";
    s.params_after += adapters;
    s.ratio = static_cast<double>(s.params_after) / static_cast<double>(s.params_before);
    s.bytes_after += 4.0 * static_cast<double>(adapters); // float32
    s.model_bytes_after += 4.0 * static_cast<double>(adapters);
    return s;
}

// Run.summary of a load_run run: the row the run that wrote it made, timing aside.
RunSummary saved_summary(const Run& r)
{
    const std::string where = "Run.summary: " + r.dir;
    const auto& manifest = *r.manifest;
    if (manifest.contains("lora") && manifest.contains("finetuned_from"))
        return lora_saved_summary(manifest, where);
    return summary_from_record(manifest, where); // flat's too, from its settings and storage
}

void refuse_saved(const Run& r, const std::string& what, const std::string& instead)
{
    if (saved(r))
        throw InputError("Run." + what + ": this run was read back from " + r.dir + " (load_run), " +
                         instead);
}

// Run.token_damage: per vocabulary id, how the compressed table damaged the predictions
// on a text, against the reference (the original model, loaded again when not given).
py::dict run_token_damage(const Run& r, const py::object& reference, const py::object& text,
                          const py::object& ids, std::optional<int64_t> ctx, std::optional<int64_t> stride,
                          const py::object& callback)
{
    const std::string what = "Run.token_damage";
    refuse_table_only(r, "token_damage");
    refuse_table_only_flat(r);
    const Model compressed = run_model(r);
    std::optional<Model> original;
    if (reference.is_none())
        original = load(py::str(r.run->request.model),
                        r.run->request.tokenizer.empty() ? py::object(py::none())
                                                         : py::object(py::str(r.run->request.tokenizer)),
                        true);
    const Model& ref = original ? *original : model_arg(reference, what + ": reference");
    const int64_t vocab = compressed.live()->config().vocab_size;
    if (!text.is_none() && !ids.is_none())
        throw InputError(what + ": give at most one of text= or ids= (neither: the run's evaluation text)");
    std::vector<int32_t> input;
    if (!ids.is_none()) {
        input = token_ids(ids, vocab, what);
    } else if (text.is_none() && r.run->request.has_eval_ids) {
        input = r.run->request.eval_ids;
    } else {
        if (text.is_none() && r.run->request.eval_text.empty())
            throw InputError(what + ": the run evaluated no text; give text= or ids=");
        const Tokenizer* tokenizer = compressed.tokenizer ? compressed.tokenizer : ref.tokenizer;
        if (!tokenizer)
            throw InputError(what + ": " + compressed.path + " has no tokenizer; give ids=");
        input = tokenizer->encode(text.is_none() ? read_text_file(r.run->request.eval_text)
                                                 : str_arg(text, what + ": text"));
    }
    const int64_t context = std::min(compressed.live()->max_context(), ref.live()->max_context());
    const int64_t c =
        ctx.value_or(r.run->request.ctx > 0 ? r.run->request.ctx : std::min<int64_t>(128, context));
    if (input.size() < 2)
        throw InputError(what + ": the input has " + std::to_string(input.size()) +
                         " token(s); at least 2 are needed");
    if (c < 1 || c > context)
        throw InputError(what + ": ctx=" + std::to_string(c) + " is outside 1.." + std::to_string(context) +
                         " (the models' context)");
    const int64_t s = stride.value_or(!ctx && r.run->request.stride > 0 ? r.run->request.stride : c);
    if (s < 1 || s > c)
        throw InputError(what + ": stride must be between 1 and ctx (" + std::to_string(c) + "), got " +
                         std::to_string(s));
    PythonProgress progress(callback, what + ": progress");
    auto damage = without_gil(progress, [&] {
        const auto d = evaluate_divergence(*compressed.live(), *ref.live(), input, {.ctx = c, .stride = s},
                                           progress.plain("divergence"));
        return token_damage(*compressed.live(), *ref.live(), d.positions);
    });
    py::dict out;
    out["buckets"] = to_python(token_damage_buckets_json(damage));
    out["cosine"] = vector_array(std::move(damage.cosine));
    out["target_count"] = vector_array(std::move(damage.target_count));
    out["kl_as_target"] = vector_array(std::move(damage.kl_as_target));
    out["input_count"] = vector_array(std::move(damage.input_count));
    out["kl_as_input"] = vector_array(std::move(damage.kl_as_input));
    out["bucket"] = vector_array(std::move(damage.bucket));
    return out;
}

// Pickled state: ("dir", directory, verify) for load_run's runs, ("request", its JSON)
// for a run in memory, which unpickling runs again (the methods are seeded).
py::tuple run_state(const Run& r)
{
    if (table_only(r))
        throw py::type_error("cannot pickle a compress_table run: it holds the caller's table; pickle the "
                             "table (or np.save it) and the method's keywords");
    if (saved(r))
        return py::make_tuple("dir", std::filesystem::absolute(r.dir).string(), r.verify);
    return py::make_tuple("request", request_json(r.run->request).dump());
}

Run run_from_state(const py::tuple& state)
{
    const auto kind = state.size() > 0 ? py::str(state[0]).cast<std::string>() : "";
    if (kind == "dir" && state.size() == 3)
        return load_run(state[1], state[2].cast<bool>());
    if (kind != "request" || state.size() != 2)
        throw InputError("Run.__setstate__: not an embedlab.Run's pickled state");
    const auto request = request_from_json(nlohmann::ordered_json::parse(state[1].cast<std::string>()));
    check_request(request, 0, "compress", keyword);
    PythonProgress progress(py::none(), "compress: progress");
    return run_request(request, progress);
}

py::object export_run_to(const Run& r, const py::object& dir_path, bool dense, bool overwrite,
                         const py::object& callback)
{
    refuse_table_only(r, "export");
    refuse_saved(r, "export", "where it is written already; copy the directory");
    const auto dir = path_arg(dir_path, "export: dir");
    PythonProgress progress(callback, "export: progress");
    return to_python(without_gil(progress, [&] {
        return export_run(*r.run, dir, {.dense = dense, .overwrite = overwrite}, progress.plain("write"));
    }));
}

py::object account(const std::string& method, int64_t vocab, int64_t dim, int64_t model_params, bool tied,
                   int64_t positions, const std::optional<std::string>& stored_type, const py::kwargs& fields)
{
    try {
        table_method(method); // flat and unknown names: said as the CLI says them
    } catch (const InputError& e) {
        throw InputError(std::string("account: ") + e.what());
    }
    const auto request = request_from("", "", method, fields, "account");
    const AccountContext context{.model_params = model_params,
                                 .tied = tied,
                                 .positions = positions,
                                 .stored_type = stored_type.value_or("")};
    return to_python(accounting_json(account_setting(request, vocab, dim, context, "account", keyword)));
}

// RequestFieldType's values in order, as Python names the types.
const char* field_type_name(RequestFieldType t)
{
    static const char* const names[] = {"str", "bool", "int", "float", "list[int]", "list[int] (token ids)"};
    return names[static_cast<size_t>(t)];
}

py::list methods()
{
    py::list out;
    const CompressionRequest defaults;
    for (const MethodDescriptor& d : method_registry()) {
        nlohmann::ordered_json fields = nlohmann::ordered_json::array();
        for (const auto& name : d.fields)
            fields.push_back({{"name", name},
                              {"type", field_type_name(request_field_type(name))},
                              {"default", request_field_value(defaults, name)}});
        nlohmann::ordered_json j{
            {"name", d.name},
            {"part", d.part == CompressedPart::TokenEmbedding ? "token_embedding" : "attention_values"},
            {"summary", d.summary},
            {"fields", fields},
            {"needs_frequency_text", d.needs_frequency_text},
            {"needs_calibration_text", d.needs_calibration_text},
            {"positions", d.positions},
            {"lora", d.lora},
            {"bytes_baseline", d.bytes_baseline}};
        out.append(to_python(j));
    }
    return out;
}

} // namespace

} // namespace embedlab::python

PYBIND11_MODULE(_embedlab, m)
{
    using namespace embedlab;
    using namespace embedlab::python;
    namespace py = pybind11;
    m.doc() = "EmbedLab's engine: load a model, compress its token table, evaluate, export.";
    init_runtime();
    // Never destroyed: a destructor would run after the interpreter has finalised.
    static auto& input_error = *new py::exception<InputError>(m, "InputError", PyExc_ValueError);
    static auto& cancelled = *new py::exception<Cancelled>(m, "Cancelled", PyExc_RuntimeError);
    input_error.attr("__module__") = "embedlab";
    cancelled.attr("__module__") = "embedlab";
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const InputError& e) {
            input_error(e.what());
        } catch (const Cancelled& e) {
            cancelled(e.what());
        }
    });

    bind_model(m);
    bind_encoder(m);
    bind_tables(m);
    bind_arrays(m);
    py::class_<Run>(m, "Run", "A finished compression run (embedlab.compress), kept in memory.")
        .def_property_readonly("summary",
                               [](const Run& r) {
                                   refuse_table_only(r, "summary");
                                   if (saved(r)) // the row the run that wrote it made, timing aside
                                       return to_python(summary_json(saved_summary(r)));
                                   return to_python(summary_json(r.run->summary));
                               })
        .def_property_readonly("record",
                               [](const Run& r) {
                                   if (saved(r))
                                       return to_python(*r.manifest);
                                   auto j = run_json(*r.run);
                                   if (table_only(r)) // no model: no summary row
                                       j.erase("summary");
                                   return to_python(j);
                               })
        .def(
            "embedding_table",
            [](const Run& r) {
                refuse_table_only_flat(r);
                torch::Tensor rows;
                {
                    py::gil_scoped_release release;
                    c10::InferenceMode guard;
                    const auto& e = *r.run->embedding->embedding;
                    rows = e.lookup(torch::arange(e.vocab_size(), torch::kLong));
                }
                return to_numpy(rows);
            },
            "The compressed token table [V, d] float32, as its lookup rebuilds the rows.")
        .def_property_readonly("request",
                               [](const Run& r) { return to_python(request_json(r.run->request)); })
        .def_property_readonly(
            "factors", [](const Run& r) { return factor_dict(r, FactorView::Stored); },
            "The factors as stored: f16 float16, bf16 uint16 bits, ggml types uint8 blocks; else as fitted.")
        .def_property_readonly(
            "factors_f32", [](const Run& r) { return factor_dict(r, FactorView::Float32); },
            "The factors decoded to float32 (the values the model runs on); ids as stored.")
        .def_property_readonly(
            "factor_types", [](const Run& r) { return factor_dict(r, FactorView::Types); },
            "Each factor's stored type: f32, f16, bf16, a ggml type (q8_0, ...) or NumPy's name (int32).")
        .def_property_readonly("model", &run_model)
        .def("export", &export_run_to, py::arg("dir"), py::kw_only(), py::arg("dense") = false,
             py::arg("overwrite") = false, py::arg("progress") = py::none(),
             "Writes the run as compress --out does (nothing refitted); returns embedlab.json as written.")
        .def("token_damage", &run_token_damage, py::arg("reference") = py::none(), py::kw_only(),
             py::arg("text") = py::none(), py::arg("ids") = py::none(), py::arg("ctx") = py::none(),
             py::arg("stride") = py::none(), py::arg("progress") = py::none(),
             "Per vocabulary id, what eval --reference --per-token writes: cosine (compressed row against "
             "the reference's), target_count, kl_as_target, input_count, kl_as_input (float64 / int64 "
             "[V]; KL NaN where the id never occurs) and bucket (int32 [V]), plus buckets (eval "
             "--reference's damage_by_frequency). reference=None loads the original the run compressed; "
             "text=/ids= default to the run's evaluation text, ctx/stride to its own.")
        .def(py::pickle(&run_state, &run_from_state))
        .def("__repr__", [](const Run& r) {
            return "<embedlab.Run " + describe_request(r.run->request) +
                   (saved(r) ? " read from " + r.dir : std::string()) + ">";
        });

    m.def("version", [] { return std::string(EMBEDLAB_VERSION); });
    m.def("load", &load, py::arg("path"), py::kw_only(), py::arg("tokenizer") = py::none(),
          py::arg("verify") = true,
          "Loads a Hugging Face directory, a .gguf, a llama2.c .bin or a compressed directory.");
    m.def("load_run", &load_run, py::arg("dir"), py::kw_only(), py::arg("verify") = true,
          "A Run read back from a compressed directory (compress --out, Run.export): its record "
          "(embedlab.json), summary (the row the run that wrote it made, timing aside; flat's is refused "
          "naming what its record lacks), request, factors as stored, model and embedding_table().");
    m.def("compress", &compress, py::arg("model"), py::arg("method"), py::kw_only(),
          py::arg("progress") = py::none(),
          "One compression run: the keywords are the request's JSON fields (rank=32, eval_text=...).");
    bind_chain(m);
    m.def("compress_chain", &compress_chain, py::arg("model"), py::arg("pipeline"), py::kw_only(),
          py::arg("out") = py::none(), py::arg("overwrite") = false, py::arg("dense") = false,
          py::arg("progress") = py::none(),
          "A chain as one run (compress --method trim ... --then METHOD ... --then-store TYPE): pipeline is "
          "its steps ([{\"method\": \"trim\", \"freq_text\": ..., \"coverage\": 0.999}, {\"method\": "
          "\"pca\", \"rank\": 32, \"store\": \"q8_0\"}]), the keywords the model's evaluation fields "
          "(eval_text=, ctx=); out= writes the directory. Refusals are the engine's, as InputError.");
    m.def("compress_table", &compress_table_alone, py::arg("table"), py::arg("method"), py::kw_only(),
          py::arg("model") = py::none(), py::arg("model_params") = 0, py::arg("tied") = true,
          py::arg("positions") = 0, py::arg("stored_type") = py::none(), py::arg("progress") = py::none(),
          "A table method on a table [V, d] without a model file: a Run whose record has a file run's "
          "method, spec, accounting, reconstruction and fit. model= accounts it as that model's run does; "
          "else model_params=, tied=, positions=, stored_type= as account() takes them.");
    m.def("account", &account, py::arg("method"), py::arg("vocab"), py::arg("dim"), py::kw_only(),
          py::arg("model_params") = 0, py::arg("tied") = true, py::arg("positions") = 0,
          py::arg("stored_type") = py::none(),
          "What account --json reports for one setting, without a model.");
    m.def("dequantize", &dequantize, py::arg("data"), py::arg("type"), py::arg("shape") = py::none(),
          "A stored factor (Run.factors[name], Run.factor_types[name]) decoded to float32.");
    m.def("_unpack_aq_codes", &unpack_aq, py::arg("packed"), py::arg("codebooks"), py::arg("codewords"),
          "aq's packed codes as uint8 [V, M] (Run.to_torch).");
    m.def("_runtime", &runtime, "libtorch's path and thread count, for python3 -m embedlab.");
    m.def("methods", &methods, "The registry: each method's part, summary and fields (type, default).");
    m.def("_check_requests", &check_requests, py::arg("model"), py::arg("method"), py::arg("rows"),
          "sweep()'s check of every row before the first run: rows are (label, fields) pairs.");
}
