// The method registry and CompressionRequest's JSON form and checks
// (experiment_request.hpp). Torch-free: fuzz_job reaches all of it.
#include "embedlab/experiment_request.hpp"
#include "embedlab/text_format.hpp"

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <type_traits>

#include "embedlab/accounting.hpp"
#include "embedlab/error.hpp"
#include "embedlab/name_table.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

bool request_compresses_mlp(const CompressionRequest& r)
{
    const auto* m = find_method(r.method);
    return r.compress_mlp || (m && m->target_compresses_mlp && r.target_ratio > 0 && !r.no_mlp);
}

namespace {

using Pred = std::function<bool(Method)>;
bool any_method(Method)
{
    return true;
}
bool low_rank(Method m)
{
    return m == Method::PCA || m == Method::SVD;
}
bool tensor_train(Method m)
{
    return m == Method::TT;
}
bool tensorised(Method m) // a shape of d: tt and tucker
{
    return m == Method::TT || m == Method::Tucker;
}
bool energy_methods(Method m)
{
    return low_rank(m) || tensor_train(m);
}
bool table_methods(Method m)
{
    return method_descriptor(m).positions;
}
bool lle_family(Method m)
{
    return method_descriptor(m).needs_frequency_text;
}
bool lle_search(Method m) // the lle method proper: the only one with a neighbour search
{
    return m == Method::LLE;
}
bool fourier(Method m)
{
    return m == Method::Fourier;
}
bool flat(Method m)
{
    return m == Method::Flat;
}
bool recoverable(Method m)
{
    return method_descriptor(m).lora;
}

[[noreturn]] void bad(const std::string& field, const std::string& what)
{
    throw InputError("job: \"" + field + "\" " + what);
}

// One JSON field of the request: how it is read and written, and which methods take it.
struct Field {
    const char* name;
    Pred applies;
    std::function<void(const Json&, CompressionRequest&)> read; // type checks only
    std::function<bool(const CompressionRequest&)> is_set;      // differs from the default
    std::function<Json(const CompressionRequest&)> value;
};

template <class T> Field member(const char* name, T CompressionRequest::*m, Pred applies)
{
    Field f{name, std::move(applies), {}, {}, {}};
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
            member("model", &R::model, any_method),
            member("method", &R::method, any_method),
            member("tokenizer", &R::tokenizer, any_method),
            member("rank", &R::rank, low_rank),
            member("shape", &R::shape, tensorised),
            member("ranks", &R::ranks, tensorised),
            member("eps", &R::eps, tensor_train),
            member("uniform_ranks", &R::uniform_ranks, tensor_train),
            member("positions", &R::positions, table_methods),
            member("nu", &R::nu, energy_methods),
            member("tau", &R::tau, energy_methods),
            member("device", &R::device, energy_methods),
            member("energy_tokens", &R::energy_tokens, energy_methods),
            member("freq_text", &R::freq_text, lle_family),
            member("keep_ratio", &R::keep_ratio, lle_family),
            member("k", &R::k, lle_family),
            member("reg", &R::reg, lle_family),
            member("knn", &R::knn, lle_search),
            member("nlist", &R::nlist, lle_search),
            member("nprobe", &R::nprobe, lle_search),
            member("coverage_task", &R::coverage_task, lle_family),
            member("coverage_data", &R::coverage_data, lle_family),
            member("mlp", &R::mlp, fourier),
            member("hidden_ratio", &R::hidden_ratio, fourier),
            member("norm", &R::norm, fourier),
            member("loss", &R::loss, fourier),
            member("steps", &R::steps, fourier),
            member("lr", &R::lr, fourier),
            member("fit_batch", &R::fit_batch, fourier),
            member("weight_decay", &R::weight_decay, fourier),
            member("remaining", &R::remaining, flat),
            member("target_ratio", &R::target_ratio, flat),
            member("allocation", &R::allocation, flat),
            member("compress_mlp", &R::compress_mlp, flat),
            member("no_mlp", &R::no_mlp, flat),
            member("mlp_lambda", &R::mlp_lambda, flat),
            member("calibration", &R::calibration, flat),
            member("calib_text", &R::calib_text, flat),
            member("samples", &R::samples, flat),
            member("seqlen", &R::seqlen, flat),
            member("lora_rank", &R::lora_rank, recoverable),
            member("lora_steps", &R::lora_steps, recoverable),
            member("train_text", &R::train_text, recoverable),
            member("eval_text", &R::eval_text, any_method),
            member("eval_tokens", &R::eval_tokens, any_method),
            member("ctx", &R::ctx, any_method),
            member("stride", &R::stride, any_method),
            member("batch", &R::batch, any_method),
            member("divergence", &R::divergence, any_method),
            member("task", &R::task, any_method),
            member("task_data", &R::task_data, any_method),
            member("task_limit", &R::task_limit, any_method),
            member("seed", &R::seed, any_method),
        };
        // Token ids: an array of non-negative integers (the ids' upper bound is the model's V).
        Field ids{"eval_ids", any_method, {}, {}, {}};
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

} // namespace

const std::vector<std::string>& request_fields()
{
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const auto& f : fields())
            n.push_back(f.name);
        return n;
    }();
    return names;
}

const std::vector<std::string>& request_input_fields()
{
    static const std::vector<std::string> names{"model",      "tokenizer",  "eval_text",     "freq_text",
                                                "calib_text", "train_text", "coverage_data", "task_data"};
    return names;
}

Json request_json(const CompressionRequest& request)
{
    Json j = Json::object();
    for (const auto& f : fields())
        if (f.is_set(request) || std::string(f.name) == "model" || std::string(f.name) == "method")
            j[f.name] = f.value(request);
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
    if (r.model.empty())
        throw InputError("job: \"model\" is required");
    if (r.method.empty())
        throw InputError("job: \"method\" is required (" + method_names() + ")");
    check_request(r, 0, "job");
    return r;
}

void check_request(const CompressionRequest& r, int64_t d, const std::string& label)
{
    auto fail = [&](const std::string& field, const std::string& what) {
        throw InputError(label + ": " + field + " " + what);
    };
    if (r.method.empty())
        fail("method", "is required (" + method_names() + ")");
    const MethodDescriptor* found = find_method(r.method);
    if (!found)
        fail("method", "'" + r.method + "' is not one of " + method_names());
    const MethodDescriptor& m = *found;
    for (const auto& f : fields())
        if (f.is_set(r) && !f.applies(m.id))
            fail(f.name, "does not apply to method " + r.method);
    if (!(r.nu >= 0 && r.nu <= 1e12))
        fail("nu", short_number(r.nu) + " must lie in [0, 1e12]");
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
    const std::string dmax = d > 0 ? std::to_string(d) : "d";
    auto within_d = [&](int64_t v) { return v >= 1 && (d <= 0 || v <= d); };

    switch (m.id) {
    case Method::PCA:
    case Method::SVD:
        if (!within_d(r.rank))
            fail("rank", std::to_string(r.rank) + " is outside 1.." + dmax);
        break;
    case Method::TT: {
        if (r.ranks.empty() == !(r.eps > 0))
            fail("eps", "or ranks: tt needs exactly one of ranks 1,r1,..,1 or eps in (0, 1)");
        if (r.ranks.empty() && !(r.eps > 0 && r.eps < 1))
            fail("eps", short_number(r.eps) + " must lie strictly between 0 and 1");
        if (r.uniform_ranks && !r.ranks.empty())
            fail("uniform_ranks", "applies to eps only (given ranks are the same for every token)");
        if (!r.ranks.empty() && r.shape.empty())
            fail("ranks", "need a shape (ranks r_0..r_N belong to one factorisation of d)");
        if (!r.shape.empty()) {
            int64_t product = 1;
            for (int64_t s : r.shape)
                product = product > (int64_t(1) << 38) ? product : product * s; // no overflow: s <= 2^24
            if (r.shape.size() < 2)
                fail("shape", joined(r.shape, "x") + " needs at least two factors");
            if (d > 0 && product != d)
                fail("shape", joined(r.shape, "x") + " has product " + std::to_string(product) +
                                  ", not d = " + std::to_string(d));
            if (!r.ranks.empty() &&
                (r.ranks.size() != r.shape.size() + 1 || r.ranks.front() != 1 || r.ranks.back() != 1))
                fail("ranks", joined(r.ranks, ",") + " must be " + std::to_string(r.shape.size() + 1) +
                                  " ranks 1,r1,..,1 for shape " + joined(r.shape, "x"));
        }
        break;
    }
    case Method::Tucker: {
        if (r.shape.empty())
            fail("shape", "is required: tucker tensorises each row as I_1 x .. x I_N with product d (as tt)");
        if (r.ranks.size() != r.shape.size())
            fail("ranks",
                 (r.ranks.empty() ? std::string("are required") : joined(r.ranks, ",") + " are not") +
                     ": tucker needs " + std::to_string(r.shape.size()) + " ranks r_1..r_N, one per " +
                     "mode of shape " + joined(r.shape, "x") + " (no boundary 1s, unlike tt)");
        int64_t product = 1;
        for (size_t k = 0; k < r.shape.size(); ++k) {
            product = product > (int64_t(1) << 38) ? product : product * r.shape[k]; // s <= 2^24
            if (r.ranks[k] > r.shape[k])
                fail("ranks", "r_" + std::to_string(k + 1) + " = " + std::to_string(r.ranks[k]) +
                                  " exceeds I_" + std::to_string(k + 1) + " = " + std::to_string(r.shape[k]) +
                                  " of shape " + joined(r.shape, "x"));
        }
        if (d > 0 && product != d)
            fail("shape", joined(r.shape, "x") + " has product " + std::to_string(product) +
                              ", not d = " + std::to_string(d));
        break;
    }
    case Method::LLE:
    case Method::LLEUnk:
    case Method::LLEPCA:
        if (r.freq_text.empty())
            fail("freq_text", "is required: token frequencies decide common vs rare");
        if (!(r.keep_ratio > 0 && r.keep_ratio <= 1))
            fail("keep_ratio", short_number(r.keep_ratio) + " must lie in (0, 1]");
        if (m.id != Method::LLEUnk && !within_d(r.k))
            fail("k", std::to_string(r.k) + " (neighbours, or basis size) is outside 1.." + dmax);
        if (m.id == Method::LLEUnk && r.k != 0 && !within_d(r.k))
            fail("k", std::to_string(r.k) + " is outside 1.." + dmax);
        if (!(r.reg >= 0 && r.reg <= 1e6))
            fail("reg", short_number(r.reg) + " must lie in [0, 1e6]");
        if (r.knn != "exact" && r.knn != "ivf")
            fail("knn", "'" + r.knn + "' must be exact or ivf");
        if (r.knn != "ivf" && (r.nlist != 0 || r.nprobe != 0))
            fail(r.nlist != 0 ? "nlist" : "nprobe", "applies to knn ivf (the IVF lists)");
        if (r.nlist < 0 || r.nlist > (int64_t{1} << 31))
            fail("nlist", std::to_string(r.nlist) + " must be 0 (automatic) or 1..|V_C| IVF lists");
        if (r.nprobe < 0 || (r.nlist > 0 && r.nprobe > r.nlist) || r.nprobe > (int64_t{1} << 31))
            fail("nprobe", std::to_string(r.nprobe) + " must be 0 (automatic) or 1..nlist" +
                               (r.nlist > 0 ? " = " + std::to_string(r.nlist) : std::string()) +
                               " lists searched per rare row");
        if (r.coverage_task.empty() != r.coverage_data.empty())
            fail(r.coverage_task.empty() ? "coverage_data" : "coverage_task",
                 "goes with coverage_task and coverage_data together (a task and its file)");
        if (!r.coverage_task.empty() && r.coverage_task != "sst2" && r.coverage_task != "mc" &&
            r.coverage_task != "stsb")
            fail("coverage_task", "'" + r.coverage_task + "' must be sst2, mc or stsb");
        break;
    case Method::Fourier:
        if (r.mlp != "linear" && r.mlp != "geglu")
            fail("mlp", "'" + r.mlp + "' must be linear or geglu");
        if (r.hidden_ratio != CompressionRequest{}.hidden_ratio && r.mlp != "geglu")
            fail("hidden_ratio", "applies to mlp geglu only");
        if (!(r.hidden_ratio > 0 && r.hidden_ratio <= 64))
            fail("hidden_ratio", short_number(r.hidden_ratio) + " must lie in (0, 64]");
        if (r.loss != "mse" && r.loss != "cosine")
            fail("loss", "'" + r.loss + "' must be mse or cosine");
        if (r.steps < 1 || r.steps > 100'000'000)
            fail("steps", std::to_string(r.steps) + " must be 1..100000000 (AdamW steps, e.g. 2000)");
        if (!(r.lr > 0 && r.lr <= 10))
            fail("lr", short_number(r.lr) + " must lie in (0, 10]");
        if (r.fit_batch < 1 || r.fit_batch > 1'000'000'000)
            fail("fit_batch", std::to_string(r.fit_batch) + " must be at least 1");
        if (!(r.weight_decay >= 0 && r.weight_decay <= 10))
            fail("weight_decay", short_number(r.weight_decay) + " must lie in [0, 10]");
        break;
    case Method::Flat:
        if (r.target_ratio != 0 && r.remaining != 0)
            fail("target_ratio", "and remaining both given: give one (the decoder's share to keep, or the "
                                 "value rank ratio)");
        if (r.target_ratio != 0 && !(r.target_ratio > 0 && r.target_ratio <= 1))
            fail("target_ratio", short_number(r.target_ratio) + " must lie in (0, 1] (1 keeps everything)");
        if (r.target_ratio == 0 && !(r.remaining > 0 && r.remaining <= 1))
            fail("remaining", short_number(r.remaining) + " must lie in (0, 1] (1 keeps everything)");
        if (r.calibration != "sequential" && r.calibration != "parallel")
            fail("calibration", "'" + r.calibration + "' must be sequential or parallel");
        if (r.no_mlp && r.compress_mlp)
            fail("no_mlp", "and compress_mlp both given: give one");
        if (r.no_mlp && r.target_ratio == 0)
            fail("no_mlp", "applies with target_ratio (which compresses the MLP by default); without it "
                           "the MLP is compressed only with compress_mlp");
        if (r.allocation != "iprs" && r.allocation != "uniform")
            fail("allocation", "'" + r.allocation + "' must be iprs or uniform");
        if (!(r.mlp_lambda > 0))
            fail("mlp_lambda", short_number(r.mlp_lambda) + " must be positive");
        if (r.calib_text.empty())
            fail("calib_text", "is required: the value statistics come from a calibration text");
        if (r.samples < 1 || r.samples > (1 << 20))
            fail("samples", std::to_string(r.samples) + " must be 1..1048576 calibration windows");
        if (r.seqlen < 0 || r.seqlen > (1 << 20))
            fail("seqlen", std::to_string(r.seqlen) + " must be 0 (the default) or a window length");
        break;
    }
    if (r.positions && m.id == Method::Flat)
        fail("positions", "applies to pca, svd, tt and tucker");
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
        fail("task", "is required with task_data (sst2 or mc)");
    if (!r.task.empty() && r.task != "sst2" && r.task != "mc")
        fail("task", "'" + r.task + "' must be sst2 or mc (tasks scored by accuracy)");
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
    std::string what;
    const auto* m = find_method(r.method);
    if (!m)
        return r.method;
    switch (m->id) {
    case Method::TT:
        what = "tt " + (r.ranks.empty() ? "eps " + short_number(r.eps) : "ranks " + joined(r.ranks, ","));
        break;
    case Method::Tucker:
        what = "tucker " + joined(r.shape, "x") + " ranks " + joined(r.ranks, ",");
        break;
    case Method::LLE:
    case Method::LLEUnk:
    case Method::LLEPCA:
        what =
            r.method + " keep " + short_number(r.keep_ratio) + (r.k > 0 ? ", k " + std::to_string(r.k) : "");
        if (r.knn == "ivf")
            what += ", ivf" + (r.nlist > 0 ? " " + std::to_string(r.nlist) : std::string()) +
                    (r.nprobe > 0 ? "/" + std::to_string(r.nprobe) : std::string());
        break;
    case Method::Fourier:
        what = "fourier " + r.mlp + ", " + std::to_string(r.steps) + " steps";
        break;
    case Method::Flat:
        what = (r.target_ratio > 0 ? "flat target " + short_number(r.target_ratio)
                                   : "flat remaining " + short_number(r.remaining)) +
               ", " + r.allocation + (request_compresses_mlp(r) ? ", mlp" : "") +
               (r.calibration == "parallel" ? ", parallel" : "");
        break;
    case Method::PCA:
    case Method::SVD:
        what = r.method + " rank " + std::to_string(r.rank);
        break;
    }
    if (r.lora_rank > 0)
        what += " + LoRA r " + std::to_string(r.lora_rank) + ", " + std::to_string(r.lora_steps) + " steps";
    return what;
}

std::vector<MethodApplicability> method_applicability(const ModelConfig& config)
{
    // Every method compresses the token table, which every architecture has;
    // FLAT-LLM needs per-head value and output projections, which all have too.
    // Position compression is the exception: only gpt2 learns a position table.
    std::vector<MethodApplicability> out;
    for (const auto& m : method_registry())
        out.push_back({m.name, true, ""});
    out.push_back(
        {"positions", config.arch == Architecture::GPT2,
         config.arch == Architecture::GPT2 ? "" : config.type_name() + " has no learned position table"});
    return out;
}

} // namespace embedlab
