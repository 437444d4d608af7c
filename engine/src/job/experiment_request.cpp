// The method registry and CompressionRequest's JSON form and checks
// (experiment_request.hpp). Torch-free: fuzz_job reaches all of it.
#include "embedlab/experiment_request.hpp"
#include "embedlab/task_names.hpp"
#include "embedlab/text_format.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string_view>
#include <type_traits>

#include "embedlab/accounting.hpp"
#include "embedlab/error.hpp"
#include "embedlab/name_table.hpp"
#include "embedlab/quant_types.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

bool request_compresses_mlp(const CompressionRequest& r)
{
    const auto* m = find_method(r.method);
    return r.compress_mlp || (m && m->target_compresses_mlp && r.target_ratio > 0 && !r.no_mlp);
}

namespace {

// Who takes a field: every method, the rows with `positions`, the rows with `lora`,
// or the methods whose registry row lists it (their own fields).
enum class Scope { Every, Positions, Lora, Own };

[[noreturn]] void bad(const std::string& field, const std::string& what)
{
    throw InputError("job: \"" + field + "\" " + what);
}

// One JSON field of the request: how it is read and written, and which methods take it.
struct Field {
    const char* name;
    RequestFieldType type;
    Scope scope;
    std::function<void(const Json&, CompressionRequest&)> read; // type checks only
    std::function<bool(const CompressionRequest&)> is_set;      // differs from the default
    std::function<Json(const CompressionRequest&)> value;
};

template <class T> constexpr RequestFieldType type_of()
{
    if constexpr (std::is_same_v<T, std::string>)
        return RequestFieldType::String;
    else if constexpr (std::is_same_v<T, bool>)
        return RequestFieldType::Bool;
    else if constexpr (std::is_same_v<T, double>)
        return RequestFieldType::Number;
    else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
        return RequestFieldType::Integers;
    else
        return RequestFieldType::Integer;
}

template <class T> Field member(const char* name, T CompressionRequest::*m, Scope scope = Scope::Own)
{
    Field f{name, type_of<T>(), scope, {}, {}, {}};
    f.is_set = [m](const CompressionRequest& r) { return !(r.*m == CompressionRequest{}.*m); };
    f.value = [m](const CompressionRequest& r) { return Json(r.*m); };
    f.read = [m, name](const Json& j, CompressionRequest& r) {
        const std::string key = name;
        if constexpr (std::is_same_v<T, std::string>) {
            if (!j.is_string())
                bad(key, "must be a string");
            r.*m = j.get<std::string>();
        } else if constexpr (std::is_same_v<T, bool>) {
            if (!j.is_boolean())
                bad(key, "must be true or false");
            r.*m = j.get<bool>();
        } else if constexpr (std::is_same_v<T, double>) {
            if (!j.is_number() || !std::isfinite(j.get<double>()))
                bad(key, "must be a finite number");
            r.*m = j.get<double>();
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            if (!j.is_array())
                bad(key, "must be an array of positive integers");
            std::vector<int64_t> v;
            for (const auto& x : j) {
                if (!x.is_number_integer() || x.get<int64_t>() < 1 || x.get<int64_t>() > (1 << 24))
                    bad(key, "must be an array of positive integers (at most 2^24)");
                v.push_back(x.get<int64_t>());
            }
            r.*m = std::move(v);
        } else { // integers
            if (!j.is_number_integer())
                bad(key, "must be an integer");
            if constexpr (std::is_unsigned_v<T>) {
                if (j.is_number_unsigned())
                    r.*m = j.get<T>();
                else if (j.get<int64_t>() >= 0)
                    r.*m = static_cast<T>(j.get<int64_t>());
                else
                    bad(key, "must be a non-negative integer");
            } else {
                if (j.is_number_unsigned() &&
                    j.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
                    bad(key, "is too large");
                r.*m = j.get<T>();
            }
        }
    };
    return f;
}

const std::vector<Field>& fields()
{
    static const std::vector<Field> table = [] {
        using R = CompressionRequest;
        std::vector<Field> f{
            member("model", &R::model, Scope::Every),
            member("method", &R::method, Scope::Every),
            member("tokenizer", &R::tokenizer, Scope::Every),
            member("rank", &R::rank),
            member("shape", &R::shape),
            member("ranks", &R::ranks),
            member("eps", &R::eps),
            member("uniform_ranks", &R::uniform_ranks),
            member("positions", &R::positions, Scope::Positions),
            member("nu", &R::nu),
            member("tau", &R::tau),
            member("device", &R::device),
            member("energy_tokens", &R::energy_tokens),
            member("freq_text", &R::freq_text),
            member("keep_ratio", &R::keep_ratio),
            member("k", &R::k),
            member("reg", &R::reg),
            member("knn", &R::knn),
            member("nlist", &R::nlist),
            member("nprobe", &R::nprobe),
            member("coverage_task", &R::coverage_task),
            member("coverage_data", &R::coverage_data),
            member("mlp", &R::mlp),
            member("hidden_ratio", &R::hidden_ratio),
            member("norm", &R::norm),
            member("loss", &R::loss),
            member("steps", &R::steps),
            member("lr", &R::lr),
            member("fit_batch", &R::fit_batch),
            member("weight_decay", &R::weight_decay),
            member("type", &R::type),
            member("store", &R::store),
            member("codebooks", &R::codebooks),
            member("codewords", &R::codewords),
            member("clip", &R::clip),
            member("holdout", &R::holdout),
            member("remaining", &R::remaining),
            member("target_ratio", &R::target_ratio),
            member("allocation", &R::allocation),
            member("compress_mlp", &R::compress_mlp),
            member("no_mlp", &R::no_mlp),
            member("mlp_lambda", &R::mlp_lambda),
            member("calibration", &R::calibration),
            member("mlp_calibration", &R::mlp_calibration),
            member("calib_text", &R::calib_text),
            member("samples", &R::samples),
            member("seqlen", &R::seqlen),
            member("lora_rank", &R::lora_rank, Scope::Lora),
            member("lora_steps", &R::lora_steps, Scope::Lora),
            member("train_text", &R::train_text, Scope::Lora),
            member("eval_text", &R::eval_text, Scope::Every),
            member("eval_tokens", &R::eval_tokens, Scope::Every),
            member("ctx", &R::ctx, Scope::Every),
            member("stride", &R::stride, Scope::Every),
            member("batch", &R::batch, Scope::Every),
            member("divergence", &R::divergence, Scope::Every),
            member("task", &R::task, Scope::Every),
            member("task_data", &R::task_data, Scope::Every),
            member("task_limit", &R::task_limit, Scope::Every),
            member("seed", &R::seed, Scope::Every),
        };
        // Token ids: an array of non-negative integers (the ids' upper bound is the model's V).
        Field ids{"eval_ids", RequestFieldType::TokenIds, Scope::Every, {}, {}, {}};
        ids.is_set = [](const R& r) { return r.has_eval_ids; };
        ids.value = [](const R& r) { return Json(r.eval_ids); };
        ids.read = [](const Json& j, R& r) {
            if (!j.is_array())
                bad("eval_ids", "must be an array of token ids");
            r.eval_ids.clear();
            r.eval_ids.reserve(j.size());
            for (const auto& x : j) {
                if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
                    bad("eval_ids", "must hold non-negative integer token ids");
                r.eval_ids.push_back(static_cast<int32_t>(x.get<int64_t>()));
            }
            r.has_eval_ids = true;
        };
        f.push_back(std::move(ids));
        return f;
    }();
    return table;
}

std::vector<std::string> quant_choices(bool with_f32)
{
    std::vector<std::string> names;
    if (with_f32)
        names.push_back("f32");
    for (const auto& t : quant_types())
        names.push_back(t.name);
    return names;
}

std::vector<std::string> device_choices()
{
    std::vector<std::string> names;
    for (const auto& d : energy_devices())
        names.push_back(d.name);
    return names;
}

constexpr double kMillion = 1e6;

// Every field a method (or LoRA, or positions) takes, described once: the ranges are
// the ones the methods' checks hold (check_request refuses anything outside them).
const std::map<std::string, FieldDoc>& field_docs()
{
    static const std::map<std::string, FieldDoc> table{
        {"rank",
         {.label = "Rank",
          .value_name = "K",
          .help = "the factors' rank k",
          .ranged = true,
          .lo = 1,
          .hi_is_width = true,
          .required = true}},
        {"shape",
         {.label = "Shape",
          .value_name = "I1,I2,..",
          .help = "factors of d the rows are reshaped to",
          .required = true}},
        {"ranks",
         {.label = "Ranks", .value_name = "1,r,..,1", .help = "inner ranks r_0..r_N (r_0 = r_N = 1)"}},
        {"eps",
         {.label = "Tolerance",
          .value_name = "E",
          .help = "relative error per token choosing its ranks (instead of ranks)",
          .ranged = true,
          .lo = 0,
          .hi = 1,
          .lo_open = true,
          .hi_open = true,
          .zero = "ranks given",
          .applies_with = R"({"ranks": []})"}},
        {"uniform_ranks",
         {.label = "Uniform ranks",
          .help = "with eps: one rank set for all tokens, each position's largest",
          .applies_with = R"({"ranks": []})"}},
        {"nu",
         {.label = "Energy per access",
          .value_name = "X",
          .help = "TensorSLM's energy per memory access (nu)",
          .ranged = true,
          .lo = 0,
          .hi = 1e12,
          .lo_open = true}},
        {"tau",
         {.label = "Energy per operation",
          .value_name = "Y",
          .help = "TensorSLM's energy per operation (tau)",
          .ranged = true,
          .lo = 0,
          .hi = 1e12}},
        {"device",
         {.label = "Device",
          .value_name = "D",
          .help = "a TensorSLM Table 1 preset instead of nu and tau",
          .choices = device_choices()}},
        {"energy_tokens",
         {.label = "Text length",
          .value_name = "L",
          .help = "the text length l of the energy model",
          .unit = "tokens",
          .ranged = true,
          .lo = 0,
          .hi = double(int64_t{1} << 40)}},
        {"freq_text",
         {.label = "Frequency text",
          .value_name = "FILE",
          .help = "the text whose token counts split common from rare tokens",
          .required = true}},
        {"keep_ratio",
         {.label = "Keep ratio",
          .value_name = "R",
          .help = "the share of tokens kept as common rows",
          .ranged = true,
          .lo = 0,
          .hi = 1,
          .lo_open = true,
          .required = true}},
        {"k",
         {.label = "Neighbours k",
          .value_name = "K",
          .help = "common neighbours mixed per rare row",
          .ranged = true,
          .lo = 1,
          .hi_is_width = true,
          .required = true}},
        {"reg",
         {.label = "Regulariser",
          .value_name = "R",
          .help = "LLE's Gram regulariser",
          .ranged = true,
          .lo = 0,
          .hi = kMillion}},
        {"knn",
         {.label = "Neighbour search",
          .value_name = "exact|ivf",
          .help = "exact, or an inverted-file index (recall reported)",
          .choices = {"exact", "ivf"}}},
        {"nlist",
         {.label = "IVF lists",
          .value_name = "N",
          .help = "k-means lists of the index",
          .ranged = true,
          .lo = 1,
          .hi = double(int64_t{1} << 31),
          .zero = "automatic",
          .applies_with = R"({"knn": "ivf"})"}},
        {"nprobe",
         {.label = "IVF probes",
          .value_name = "P",
          .help = "lists searched per rare row (at most nlist)",
          .ranged = true,
          .lo = 1,
          .hi = double(int64_t{1} << 31),
          .zero = "automatic",
          .applies_with = R"({"knn": "ivf"})"}},
        {"coverage_task",
         {.label = "Coverage task",
          .value_name = "TASK",
          .help = "a task whose examples V_C's coverage is "
                  "reported on (with coverage_data)",
          .choices = {"sst2", "mc", "stsb"}}},
        {"coverage_data",
         {.label = "Coverage data", .value_name = "FILE", .help = "the coverage task's file"}},
        {"mlp",
         {.label = "MLP",
          .value_name = "linear|geglu",
          .help = "PETE's MLP from Fourier features to rows",
          .choices = {"linear", "geglu"},
          .required = true}},
        {"hidden_ratio",
         {.label = "Hidden ratio",
          .value_name = "R",
          .help = "GeGLU hidden width over d",
          .ranged = true,
          .lo = 0,
          .hi = 64,
          .lo_open = true,
          .applies_with = R"({"mlp": "geglu"})"}},
        {"norm", {.label = "Normalise features", .help = "a LayerNorm after the MLP"}},
        {"loss",
         {.label = "Loss",
          .value_name = "mse|cosine",
          .help = "the fit's loss",
          .choices = {"mse", "cosine"}}},
        {"steps",
         {.label = "Steps",
          .value_name = "N",
          .help = "optimiser steps of the fit",
          .unit = "steps",
          .ranged = true,
          .lo = 1,
          .hi = 1e8,
          .required = true}},
        {"lr",
         {.label = "Learning rate",
          .value_name = "X",
          .help = "the fit's learning rate",
          .ranged = true,
          .lo = 0,
          .hi = 10,
          .lo_open = true,
          .zero = "the method's default"}},
        {"fit_batch",
         {.label = "Batch",
          .value_name = "B",
          .help = "rows per step",
          .unit = "rows",
          .ranged = true,
          .lo = 1,
          .hi = 1e9,
          .zero = "the method's default"}},
        {"clip",
         {.label = "Gradient clip",
          .value_name = "C",
          .help = "bound on the gradients' global norm, as the official code's",
          .ranged = true,
          .lo = 0,
          .hi = 1e6,
          .lo_open = true,
          .zero = "none"}},
        {"holdout",
         {.label = "Held-out rows",
          .value_name = "N",
          .help = "rows scored once an epoch to keep the best checkpoint's codes",
          .unit = "rows",
          .ranged = true,
          .lo = 1,
          .hi = double(1 << 30),
          .zero = "the last step's codes"}},
        {"weight_decay",
         {.label = "Weight decay",
          .value_name = "W",
          .help = "AdamW's weight decay",
          .ranged = true,
          .lo = 0,
          .hi = 10}},
        {"type",
         {.label = "Type",
          .value_name = "T",
          .help = "the ggml block type (K-types need d a multiple of 256), as llama-quantize writes it",
          .choices = quant_choices(false),
          .required = true}},
        {"store",
         {.label = "Stored as",
          .value_name = "TYPE",
          .help = "the factors' stored type (a factor whose rows its blocks do not divide stays f32)",
          .choices = quant_choices(true)}},
        {"codebooks",
         {.label = "Codebooks M",
          .value_name = "M",
          .help = "codebooks summed per row",
          .ranged = true,
          .lo = 1,
          .hi = 1024}},
        {"codewords",
         {.label = "Codewords K",
          .value_name = "K",
          .help = "codewords per codebook, a power of two",
          .ranged = true,
          .lo = 2,
          .hi = 256}},
        {"remaining",
         {.label = "Remaining ratio",
          .value_name = "R",
          .help = "the average remaining value rank ratio",
          .ranged = true,
          .lo = 0,
          .hi = 1,
          .lo_open = true,
          .zero = "target_ratio given"}},
        {"target_ratio",
         {.label = "Target ratio",
          .value_name = "T",
          .help = "the decoder weights' share to keep (instead of remaining; MLPs too)",
          .ranged = true,
          .lo = 0,
          .hi = 1,
          .lo_open = true,
          .zero = "off",
          .applies_with = R"({"remaining": 0})"}},
        {"allocation",
         {.label = "Allocation",
          .value_name = "iprs|uniform",
          .help = "ranks per layer by IPRS, or uniform",
          .choices = {"iprs", "uniform"}}},
        {"compress_mlp", {.label = "Compress MLPs", .help = "also the MLPs (Nystrom)"}},
        {"no_mlp",
         {.label = "Keep MLPs dense",
          .help = "with target_ratio: the MLPs stay dense",
          .applies_with = R"({"target_ratio": 0.5, "remaining": 0})"}},
        {"mlp_lambda",
         {.label = "MLP ridge",
          .value_name = "L",
          .help = "the Nystrom ridge",
          .ranged = true,
          .lo = 0,
          .hi = 1e300,
          .lo_open = true}},
        {"calibration",
         {.label = "Calibration",
          .value_name = "sequential|parallel",
          .help = "covariances from the model compressed up to each layer, or all from the original",
          .choices = {"sequential", "parallel"}}},
        {"mlp_calibration",
         {.label = "MLP calibration",
          .value_name = "reference|after_attention",
          .help = "layer l's MLP covariance from its values' pass (as the reference) or after its attention",
          .choices = {"reference", "after_attention"}}},
        {"calib_text",
         {.label = "Calibration text",
          .value_name = "FILE",
          .help = "the text the value statistics come from",
          .required = true}},
        {"samples",
         {.label = "Windows",
          .value_name = "N",
          .help = "calibration windows",
          .unit = "windows",
          .ranged = true,
          .lo = 1,
          .hi = double(1 << 20)}},
        {"seqlen",
         {.label = "Window length",
          .value_name = "T",
          .help = "calibration window length",
          .unit = "tokens",
          .ranged = true,
          .lo = 1,
          .hi = double(1 << 20),
          .zero = "min(256, the context)"}},
        {"positions", {.label = "Positions too", .help = "gpt2: also the learned position table"}},
        {"lora_rank",
         {.label = "LoRA rank",
          .value_name = "R",
          .help = "LoRA recovery's adapter rank",
          .ranged = true,
          .lo = 1,
          .hi_is_width = true,
          .zero = "off"}},
        {"lora_steps",
         {.label = "LoRA steps",
          .value_name = "N",
          .help = "LoRA recovery's training steps",
          .unit = "steps",
          .ranged = true,
          .lo = 1,
          .hi = 1e8}},
        {"train_text",
         {.label = "Training text", .value_name = "FILE", .help = "LoRA recovery's training text"}},
    };
    return table;
}

bool applies(const Field& f, const MethodDescriptor& m)
{
    switch (f.scope) {
    case Scope::Every:
        return true;
    case Scope::Positions:
        return m.positions;
    case Scope::Lora:
        return m.lora;
    case Scope::Own:
        break;
    }
    return std::find(m.fields.begin(), m.fields.end(), f.name) != m.fields.end();
}

// An own field's value read with the built-in fields' type checks and messages.
Json own_field_json(const MethodField& f, const Json& j)
{
    switch (f.type) {
    case RequestFieldType::Integer:
        if (!j.is_number_integer())
            bad(f.name, "must be an integer");
        if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
            bad(f.name, "is too large");
        return j.get<int64_t>();
    case RequestFieldType::Number:
        if (!j.is_number() || !std::isfinite(j.get<double>()))
            bad(f.name, "must be a finite number");
        return j.get<double>();
    default:
        if (!j.is_string())
            bad(f.name, "must be a string");
        return j;
    }
}

bool method_declares(const MethodDescriptor& m, const std::string& field)
{
    return std::any_of(m.own_fields.begin(), m.own_fields.end(),
                       [&](const MethodField& f) { return f.name == field; });
}

} // namespace

const std::vector<std::string>& request_fields()
{
    // The built-in names, then the registered methods' own (rebuilt when a row is added;
    // register_method finishes before other threads read, method_registry.hpp).
    static std::mutex guard;
    static std::vector<std::string> names;
    static size_t rows_seen = 0;
    const std::lock_guard lock(guard);
    if (names.empty() || rows_seen != method_registry().size()) {
        names.clear();
        for (const auto& f : fields())
            names.push_back(f.name);
        for (const auto& m : method_registry())
            for (const auto& f : m.own_fields)
                names.push_back(f.name);
        rows_seen = method_registry().size();
    }
    return names;
}

const std::vector<std::string>& request_input_fields()
{
    static const std::vector<std::string> names{"model",      "tokenizer",  "eval_text",     "freq_text",
                                                "calib_text", "train_text", "coverage_data", "task_data"};
    return names;
}

const FieldDoc& default_field_doc(const std::string& name)
{
    const auto& docs = field_docs();
    if (const auto it = docs.find(name); it != docs.end())
        return it->second;
    static const FieldDoc none{};
    for (const auto& f : fields())
        if (name == f.name)
            return none; // a field no method owns (model, eval_text, ...): no doc
    if (const MethodField* own = find_method_field(name))
        return own->doc;
    throw InputError("request: no field \"" + name + "\"");
}

const FieldDoc& method_field_doc(const MethodDescriptor& method, const std::string& field)
{
    for (const auto& own : method.own_fields)
        if (own.name == field)
            return own.doc;
    for (const auto& [name, doc] : method.field_docs)
        if (name == field)
            return doc;
    return default_field_doc(field);
}

namespace {

// A range's end: 768, 0.5, 2^31, 1e+08.
std::string range_end(double v)
{
    if (v == std::floor(v) && std::abs(v) <= 1e9)
        return std::to_string(int64_t(v));
    if (int e = 0; v > 0 && std::frexp(v, &e) == 0.5 && e > 20)
        return "2^" + std::to_string(e - 1);
    return short_number(v);
}

} // namespace

std::string field_range_text(const FieldDoc& doc, int64_t d)
{
    std::string out;
    if (!doc.choices.empty()) {
        for (const auto& c : doc.choices)
            out += (out.empty() ? "" : "|") + c;
        return out;
    }
    if (!doc.ranged)
        return out;
    const std::string hi = doc.hi_is_width ? (d > 0 ? std::to_string(d) : "d") : range_end(doc.hi);
    const bool whole = doc.lo == std::floor(doc.lo) && (doc.hi_is_width || doc.hi == std::floor(doc.hi));
    if (!doc.hi_is_width && doc.hi >= 1e300) // no upper end worth printing
        out = (doc.lo_open ? "> " : ">= ") + range_end(doc.lo);
    else if (doc.lo_open || doc.hi_open || !whole)
        out =
            std::string(doc.lo_open ? "(" : "[") + range_end(doc.lo) + ", " + hi + (doc.hi_open ? ")" : "]");
    else
        out = range_end(doc.lo) + ".." + hi;
    return doc.zero.empty() ? out : "0 (" + doc.zero + ") or " + out;
}

bool field_value_allowed(const FieldDoc& doc, const Json& value, int64_t d)
{
    if (!doc.choices.empty() && value.is_string()) {
        // Case aside, as the quant types are read ("Q4_K"); a method's check is stricter where it is.
        auto lower = [](std::string s) {
            std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
            return s;
        };
        const auto v = lower(value.get<std::string>());
        return v.empty() || std::any_of(doc.choices.begin(), doc.choices.end(),
                                        [&](const std::string& c) { return lower(c) == v; });
    }
    if (!doc.ranged || !value.is_number())
        return true;
    const double v = value.get<double>();
    if (!doc.zero.empty() && v == 0)
        return true;
    const bool above = doc.lo_open ? v > doc.lo : v >= doc.lo;
    if (doc.hi_is_width)
        return above && (d <= 0 || v <= double(d));
    return above && (doc.hi_open ? v < doc.hi : v <= doc.hi);
}

RequestFieldType request_field_type(const std::string& name)
{
    for (const auto& f : fields())
        if (name == f.name)
            return f.type;
    if (const MethodField* own = find_method_field(name))
        return own->type;
    throw InputError("request: no field \"" + name + "\"");
}

void set_request_field(CompressionRequest& request, const std::string& name, const Json& value)
{
    for (const auto& f : fields())
        if (name == f.name)
            return f.read(value, request);
    if (const MethodField* own = find_method_field(name)) {
        request.method_fields[name] = own_field_json(*own, value);
        return;
    }
    throw InputError("request: no field \"" + name + "\"");
}

Json request_field_value(const CompressionRequest& request, const std::string& name)
{
    for (const auto& f : fields())
        if (name == f.name)
            return f.value(request);
    if (const MethodField* own = find_method_field(name)) {
        const auto given = request.method_fields.find(name);
        return given != request.method_fields.end() ? given->second : own->default_value;
    }
    throw InputError("request: no field \"" + name + "\"");
}

Json request_json(const CompressionRequest& request)
{
    Json j = Json::object();
    for (const auto& f : fields())
        if (f.is_set(request) || std::string(f.name) == "model" || std::string(f.name) == "method")
            j[f.name] = f.value(request);
    for (const auto& [name, value] : request.method_fields)
        j[name] = value;
    return j;
}

CompressionRequest request_from_json(const Json& json)
{
    if (!json.is_object())
        throw InputError("job: must be a JSON object");
    CompressionRequest r;
    for (const auto& f : fields())
        if (json.contains(f.name))
            f.read(json[f.name], r);
    for (const auto& [key, value] : json.items())
        if (find_method_field(key))
            set_request_field(r, key, value);
    if (r.model.empty())
        throw InputError("job: \"model\" is required");
    if (r.method.empty())
        throw InputError("job: \"method\" is required (" + method_names() + ")");
    check_request(r, 0, "job");
    return r;
}

void check_request(const CompressionRequest& r, int64_t d, const std::string& label,
                   const FieldName& field_name)
{
    auto fail = [&](const std::string& field, const std::string& what) {
        throw InputError(label + ": " + (field_name ? field_name(field) : field) + " " + what);
    };
    if (r.method.empty())
        fail("method", "is required (" + method_names() + ")");
    const MethodDescriptor* found = find_method(r.method);
    if (!found)
        fail("method", "'" + r.method + "' is not one of " + method_names());
    const MethodDescriptor& m = *found;
    for (const auto& f : fields())
        if (f.is_set(r) && !applies(f, m))
            fail(f.name, "does not apply to method " + r.method);
    for (const auto& [name, value] : r.method_fields)
        if (!method_declares(m, name))
            fail(name, "does not apply to method " + r.method);
    // omega divides by the original's memory energy, nu (V d + l d): nu 0 made it inf or NaN.
    if (!(r.nu > 0 && r.nu <= 1e12))
        fail("nu", short_number(r.nu) + " must lie in (0, 1e12] (omega divides by the original table's "
                                        "memory energy, nu (V d + l d))");
    if (!(r.tau >= 0 && r.tau <= 1e12))
        fail("tau", short_number(r.tau) + " must lie in [0, 1e12]");
    if (r.energy_tokens < 0 || r.energy_tokens > (int64_t{1} << 40))
        fail("energy_tokens", std::to_string(r.energy_tokens) + " must lie in [0, 2^40]");
    if (!r.device.empty()) {
        if (!find_energy_device(r.device))
            fail("device", "'" + r.device + "' is not one of " + energy_device_names());
        if (r.nu != CompressionRequest{}.nu || r.tau != CompressionRequest{}.tau)
            fail("device", "sets nu and tau; give either device or nu/tau");
    }
    m.check(r, d, fail);
    // The docs' ranges and choices (what the GUI's boxes and the help show) hold too;
    // a method's own check names most problems first, in its own words.
    for (const auto& f : fields())
        if (f.is_set(r) && applies(f, m) && f.scope != Scope::Every) {
            const FieldDoc& doc = method_field_doc(m, f.name);
            if (!field_value_allowed(doc, f.value(r), d))
                fail(f.name, f.value(r).dump() + " is outside " + field_range_text(doc, d));
        }
    for (const auto& [name, value] : r.method_fields)
        if (const FieldDoc& doc = method_field_doc(m, name); !field_value_allowed(doc, value, d))
            fail(name, value.dump() + " is outside " + field_range_text(doc, d));
    if (!r.store.empty() && r.store != "f32" && !find_quant_type(r.store))
        fail("store", "'" + r.store + "' is not a stored type: f32, " + quant_type_names());
    if (!r.store.empty() && r.store != "f32" && r.lora_rank > 0)
        fail("store", "cannot be combined with LoRA recovery yet (the recovered factors would be stored "
                      "again); store f32, or recover without LoRA");
    const std::string dmax = d > 0 ? std::to_string(d) : "d";
    if (r.lora_rank < 0 || (d > 0 && r.lora_rank > d))
        fail("lora_rank", std::to_string(r.lora_rank) + " must be 0 (off) or 1.." + dmax);
    if (r.lora_rank > 0) {
        if (r.lora_steps < 1 || r.lora_steps > 100'000'000)
            fail("lora_steps", std::to_string(r.lora_steps) + " must be at least 1 with LoRA on");
        if (r.train_text.empty())
            fail("train_text", "is required for LoRA recovery");
        if (r.positions)
            fail("positions", "cannot be combined with LoRA recovery");
    }
    if (!r.eval_text.empty() && r.has_eval_ids)
        fail("eval_ids", "and eval_text: give one of them");
    if (r.divergence && !r.evaluates())
        fail("divergence", "needs an evaluation (eval_text or eval_ids): it is measured on the same tokens");
    if (!r.task.empty() && r.task_data.empty())
        fail("task_data", "is required with task " + r.task + " (the task's data file)");
    if (r.task.empty() && !r.task_data.empty())
        fail("task", "is required with task_data (sst2, mc, or a GLUE classification task)");
    if (!r.task.empty() && r.task != "mc" && !is_classification_task(r.task))
        fail("task",
             "'" + r.task +
                 "' must be sst2, mc, or for a sequence classifier cola, mrpc, qqp, mnli, mnli-mm, qnli, "
                 "rte or wnli (tasks scored by accuracy)");
    if (r.task_limit < 0)
        fail("task_limit", std::to_string(r.task_limit) + " must be 0 (all examples) or more");
    if (r.task_limit > 0 && r.task.empty())
        fail("task_limit", "needs a task");
    if (r.has_eval_ids && r.eval_ids.size() < 2)
        fail("eval_ids", "must hold at least two token ids");
    if (r.eval_tokens < 0)
        fail("eval_tokens", std::to_string(r.eval_tokens) + " must be 0 (all) or more");
    if (r.ctx < 0 || r.ctx > (1 << 20))
        fail("ctx", std::to_string(r.ctx) + " must be 0 (the default) or 1..1048576");
    if (r.stride < 0 || (r.ctx > 0 && r.stride > r.ctx))
        fail("stride", std::to_string(r.stride) + " must be 0 (= ctx) or 1..ctx");
    if (r.batch < 0 || r.batch > (1 << 16))
        fail("batch", std::to_string(r.batch) + " must be 0 (automatic) or 1..65536");
}

std::string describe_request(const CompressionRequest& r)
{
    const auto* m = find_method(r.method);
    if (!m)
        return r.method;
    std::string what = m->describe(r);
    if (!r.store.empty() && r.store != "f32")
        what += ", stored " + r.store;
    if (r.lora_rank > 0)
        what += " + LoRA r " + std::to_string(r.lora_rank) + ", " + std::to_string(r.lora_steps) + " steps";
    return what;
}

std::vector<MethodApplicability> method_applicability(const ModelConfig& config)
{
    // Every method compresses the token table, which every architecture has;
    // FLAT-LLM needs per-head value and output projections, which all have too.
    // Position compression is the exception: only gpt2 learns a position table.
    // Encoders: a method calibrating on next-token windows (FLAT-LLM) has none to read.
    std::vector<MethodApplicability> out;
    for (const auto& m : method_registry()) {
        if (config.is_encoder() && m.needs_calibration_text)
            out.push_back({m.name, false, "not implemented for encoders (" + config.type_name() + ")"});
        else
            out.push_back({m.name, true, ""});
    }
    out.push_back({"positions", config.arch == Architecture::GPT2,
                   config.arch == Architecture::GPT2 ? ""
                   : config.is_encoder()             ? "position compression is implemented for gpt2 only"
                                         : config.type_name() + " has no learned position table"});
    return out;
}

} // namespace embedlab
