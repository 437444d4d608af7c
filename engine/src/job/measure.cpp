// measure_model: on-device latency, memory and energy of a (compressed) model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <thread>

#include "embedlab/accounting.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/job.hpp"
#include "embedlab/model.hpp"
#include "embedlab/power.hpp"
#include "embedlab/table_method.hpp"
#include "job/job_check.hpp"
#include "model/manifest_layout.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t peak_rss_bytes()
{
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmHWM:", 0) == 0)
            return std::stoll(line.substr(6)) * 1024;
    return 0;
}

Json stats_json(std::vector<double> v, double scale, const std::string& unit)
{
    std::sort(v.begin(), v.end());
    const double n = static_cast<double>(v.size());
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    double var = 0;
    for (double x : v)
        var += (x - mean) * (x - mean);
    const double sd = v.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0;
    return {{unit + "_mean", mean * scale},
            {unit + "_std", sd * scale},
            {unit + "_median", v[v.size() / 2] * scale},
            {unit + "_min", v.front() * scale},
            {"samples", v.size()}};
}

Json energy_json(const EnergyEstimate& e)
{
    return {{"original", e.original_nu + e.original_tau},
            {"original_memory", e.original_nu},
            {"original_compute", e.original_tau},
            {"compressed", e.compressed_nu + e.compressed_tau},
            {"compressed_memory", e.compressed_nu},
            {"compressed_compute", e.compressed_tau},
            {"omega", e.omega}};
}

// METHODS 5 for the model's table, from the sizes recorded in embedlab.json.
Json energy_estimate(const std::string& manifest_text, int64_t vocab, int64_t dim, const EnergyOptions& o)
{
    Json j = {
        {"source", "TensorSLM eqs. 2-5 (METHODS.md 5)"}, {"nu", o.nu}, {"tau", o.tau}, {"tokens", o.tokens}};
    const auto m = nlohmann::json::parse(manifest_text.empty() ? "{}" : manifest_text, nullptr, false);
    const auto acc = m.is_object() && m.contains("accounting") ? m["accounting"] : nlohmann::json();
    const std::string method = acc.is_object() ? acc.value("method", "") : "";
    const TableMethod* table = find_table_method(method);
    if (const auto e = table ? table->recorded_energy(acc, vocab, dim, o) : std::nullopt) {
        j["method"] = method;
        j.update(energy_json(*e));
    } else {
        const auto dense = svd_energy(vocab, dim, 1, o); // its original_* terms: the dense table
        j["method"] = method.empty() ? "dense" : method;
        j["original"] = dense.original_nu + dense.original_tau;
        if (!method.empty())
            j["compressed"] = "not modelled for this method (it has no closed form)";
    }
    return j;
}

} // namespace

Json measure_model(const std::filesystem::path& model, const Json& options, const ProgressFn& progress,
                   const CancelFn& cancelled)
{
    const auto o = detail::measure_options(options);
    const int64_t tokens = o.tokens, repeat = o.repeat, lookups = o.lookups, seed = o.seed;
    const EnergyOptions energy{.nu = o.nu, .tau = o.tau, .tokens = tokens};
    const std::string& power = o.power;
    const double idle_seconds = o.idle_seconds, energy_seconds = o.energy_seconds;
    const std::string& text = o.text;
    auto check = [&] {
        if (cancelled && cancelled())
            throw Cancelled();
    };

    auto lm = load_model(model, {.need_tokenizer = !text.empty()});
    const auto& m = *lm.model;
    const int64_t vocab = m.config().vocab_size, dim = m.config().embedding_dim();
    if (tokens > m.max_context())
        throw InputError("job: \"tokens\" " + std::to_string(tokens) + " exceeds the model's context of " +
                         std::to_string(m.max_context()));
    torch::manual_seed(static_cast<uint64_t>(seed));
    torch::Tensor ids;
    if (!text.empty()) {
        auto all = lm.tokenizer->encode(read_text_file(text));
        if (static_cast<int64_t>(all.size()) < tokens)
            throw InputError(text + ": has " + std::to_string(all.size()) +
                             " tokens, fewer than \"tokens\" " + std::to_string(tokens));
        all.resize(static_cast<size_t>(tokens));
        ids = torch::tensor(std::vector<int64_t>(all.begin(), all.end()), torch::kLong).view({1, tokens});
    } else {
        ids = torch::randint(vocab, {1, tokens}, torch::kLong);
    }
    const auto lookup_ids = torch::randint(vocab, {lookups}, torch::kLong);

    c10::InferenceMode guard;
    const auto& emb = m.token_embedding();
    const int64_t total = lookups + repeat;
    // Table 5: one token's row rebuilt at a time.
    emb.lookup(lookup_ids.slice(0, 0, 1)); // warm-up
    std::vector<double> per_token;
    for (int64_t i = 0; i < lookups; ++i) {
        const auto one = lookup_ids.slice(0, i, i + 1);
        const auto t0 = Clock::now();
        emb.lookup(one);
        per_token.push_back(seconds_since(t0));
        if (i % 64 == 0)
            report_progress(progress, i, total);
    }
    // Table 6: the forward pass over a text of l tokens.
    m.logits(ids); // warm-up
    std::vector<double> per_text;
    for (int64_t i = 0; i < repeat; ++i) {
        check();
        const auto t0 = Clock::now();
        m.logits(ids);
        per_text.push_back(seconds_since(t0));
        report_progress(progress, lookups + i + 1, total);
    }
    Json j = {{"model", model.string()},
              {"embedding", emb.kind()},
              {"vocab", vocab},
              {"dim", dim},
              {"embedding_parameters", emb.parameter_count()},
              {"model_parameters", m.parameter_breakdown().total()},
              {"threads", at::get_num_threads()},
              {"tokens", tokens},
              {"ids_source", text.empty() ? "seeded random ids" : "first tokens of the text"}};
    j["lookup"] = stats_json(per_token, 1e3, "ms_per_token");
    j["lookup"]["protocol"] = "TensorSLM Table 5: one token's embedding row reconstructed per call";
    j["end_to_end"] = stats_json(per_text, 1.0, "seconds");
    j["end_to_end"]["protocol"] = "TensorSLM Table 6: one forward pass over a text of l tokens (logits)";
    j["peak_rss_bytes"] = peak_rss_bytes();
    j["energy_model"] = energy_estimate(lm.files.embedlab_manifest, vocab, dim, energy);

    std::string why = "power sampling turned off (\"power\": \"off\")";
    if (power != "off" && power_sampling_available(&why)) {
        PowerSampler idle;
        idle.start();
        for (const auto t0 = Clock::now(); seconds_since(t0) < idle_seconds;)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const auto idle_samples = idle.stop();
        const double idle_watts = mean_power(idle_samples);
        PowerSampler busy;
        busy.start();
        int64_t runs = 0;
        for (const auto t0 = Clock::now(); runs == 0 || seconds_since(t0) < energy_seconds; ++runs) {
            check();
            m.logits(ids);
        }
        const auto samples = busy.stop();
        const double joules = integrate_energy(samples, idle_watts);
        j["energy_measured"] = {{"available", true},
                                {"source", "vcgencmd pmic_read_adc, sum of rail I x V, idle subtracted"},
                                {"idle_watts", idle_watts},
                                {"busy_watts", mean_power(samples)},
                                {"samples", samples.size()},
                                {"runs", runs},
                                {"joules", joules},
                                {"joules_per_text", joules / static_cast<double>(runs)}};
    } else {
        j["energy_measured"] = {{"available", false}, {"reason", "not available: " + why}};
    }
    return j;
}

} // namespace embedlab
