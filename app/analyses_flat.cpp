// FLAT-LLM (METHODS 3) for the workbench: calibrate, IPRS, absorb, evaluate.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "analyses_internal.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/model.hpp"

namespace embedlab::app::detail {

namespace {

namespace fs = std::filesystem;

FlatOptions flat_options(const CompressionRequest& request, const std::string& label)
{
    if (!(request.remaining > 0.0 && request.remaining <= 1.0))
        throw InputError(label + ": flat remaining ratio " + std::to_string(request.remaining) +
                         " is outside (0, 1] (1 keeps everything)");
    if (request.lora_rank > 0)
        throw InputError(label + ": LoRA recovery applies to a compressed token embedding, not to flat");
    FlatOptions options;
    options.remaining = request.remaining;
    try {
        options.allocation = parse_rank_allocation(request.allocation);
    } catch (const InputError& e) {
        throw InputError(label + ": allocation: " + e.what());
    }
    return options;
}

// A model FLAT-LLM can start from: attention not yet narrowed.
LoadedModel load_original(const std::string& model)
{
    auto lm = load_model(model);
    if (!lm.model->config().value_head_dims.empty())
        throw InputError(model + ": is already FLAT-compressed; use the original model");
    return lm;
}

// The calibration the request asks for, with the text named in its errors.
struct CalibrationRun {
    Calibration calibration;
    std::string text;
    size_t tokens = 0;
};
CalibrationRun calibrate_request(const LanguageModel& model, const Tokenizer& tokenizer,
                                 const CompressionRequest& request, const ProgressFn& progress)
{
    const std::string text = text_or_default(request.calibration_text);
    const int64_t context = calibration_context(model);
    if (request.seqlen < 1 || request.seqlen > context)
        throw InputError(text + ": calibration seqlen " + std::to_string(request.seqlen) + " outside 1.." +
                         std::to_string(context) + " (the model's context)");
    if (request.samples < 1)
        throw InputError(text + ": calibration needs at least one sample window");
    const auto ids = tokenizer.encode(read_text_file(text));
    const CalibrationOptions options{.samples = request.samples, .seqlen = request.seqlen};
    try {
        calibration_window_starts(static_cast<int64_t>(ids.size()), options.samples, options.seqlen,
                                  options.seed);
    } catch (const InputError& e) {
        throw InputError(text + ": " + e.what());
    }
    return {calibrate(model, ids, options, progress), text, ids.size()};
}

// The part FLAT-LLM compresses (METHODS 0): value projections (weights and, in
// gpt2, their bias) and output projection weights; the output bias is unchanged.
int64_t value_output_params(const ModelConfig& c)
{
    int64_t n = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const int64_t vd = c.value_dim(l);
        n += c.hidden_size * c.num_kv_heads * vd + c.num_heads * vd * c.hidden_size;
        if (c.arch == Architecture::GPT2)
            n += c.num_kv_heads * vd;
    }
    return n;
}

std::string number(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

std::string parameters_text(const FlatResult& flat)
{
    std::string ranks;
    for (const auto& layer : flat.layers) {
        ranks += ranks.empty() ? "" : ",";
        ranks += std::to_string(layer.rank);
    }
    return "remaining " + number(flat.options.remaining) + ", " +
           rank_allocation_name(flat.options.allocation) + ", ranks " + ranks;
}

} // namespace

CompressionRun flat_compress_and_evaluate(const std::string& model, const CompressionRequest& request,
                                          const std::string& text, const ProgressFn& progress)
{
    const auto start = std::chrono::steady_clock::now();
    const FlatOptions options = flat_options(request, model);
    auto lm = load_original(model);
    const auto& m = *lm.model;
    auto ids = lm.tokenizer->encode(read_text_file(text));
    if (request.eval_tokens > 0 && static_cast<int64_t>(ids.size()) > request.eval_tokens)
        ids.resize(static_cast<size_t>(request.eval_tokens));
    // Progress: calibration 40%, the original's evaluation 25% (unless known), compressed 35%.
    const auto cal = calibrate_request(m, *lm.tokenizer, request, stage(progress, 0, 400, 1000));
    const PerplexityOptions eval_options{.ctx = std::min<int64_t>(128, m.max_context())};
    // The key compress_and_evaluate uses: every method's rows share the baseline.
    const std::string key = model + "\n" + text + "\n" + std::to_string(ids.size());
    const double original_ppl = original_perplexity(
        key, [&] { return evaluate_perplexity(m, ids, eval_options, stage(progress, 400, 250, 1000)).ppl; });
    report_progress(progress, 650, 1000);
    const auto flat = flat_compress(m, cal.calibration, options);
    report_progress(progress, 650, 1000);
    const auto compressed =
        evaluate_perplexity(*flat.model, ids, eval_options, stage(progress, 650, 350, 1000));

    CompressionRun r;
    r.method = "flat";
    r.parameters = parameters_text(flat);
    r.params_before = value_output_params(m.config());
    r.params_after = value_output_params(flat.model->config());
    r.ratio = static_cast<double>(r.params_after) / static_cast<double>(r.params_before);
    r.ppl_original = original_ppl;
    r.ppl = compressed.ppl;
    r.delta_ln_ppl = std::log(compressed.ppl) - std::log(original_ppl); // TensorSLM eq. 12
    // The embedding is untouched: no row reconstruction to compare.
    r.mean_cosine = std::numeric_limits<double>::quiet_NaN();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.host = host_name();
    return r;
}

std::string flat_export(const std::string& model, const CompressionRequest& request,
                        const std::string& out_dir, bool dense, bool overwrite, const ProgressFn& progress)
{
    if (dense)
        throw InputError(out_dir + ": a dense copy does not apply to flat: model.safetensors already holds "
                                   "standard tensors, with the value heads at the narrowed shapes");
    const FlatOptions options = flat_options(request, model);
    // Before the calibration: a taken name should fail in a second, not after the work.
    check_replaceable(out_dir, overwrite);
    // Also checks the parent; removed again unless committed.
    AtomicDirectory out(out_dir, overwrite);
    report_progress(progress, 0, 1000);
    auto lm = load_original(model);
    if (lm.files.format != ModelFormat::HuggingFace) // before the calibration, not after it
        throw InputError(model + ": flat models are written from Hugging Face directories, not " +
                         model_format_name(lm.files.format) + " files");
    // The calibration is seeded and the absorption deterministic: the row's model again.
    const auto cal = calibrate_request(*lm.model, *lm.tokenizer, request, stage(progress, 0, 600, 1000));
    const auto flat = flat_compress(*lm.model, cal.calibration, options);
    report_progress(progress, 600, 1000);
    const nlohmann::ordered_json text = {{"path", fs::absolute(cal.text).lexically_normal().string()},
                                         {"sha256", sha256_file(cal.text)},
                                         {"tokens", cal.tokens}};
    // The engine's writer publishes its directory by the time it returns; writing it
    // inside ours keeps a cancel possible until our commit, the last step.
    save_flat_model(lm, flat, cal.calibration, out.path(), {.overwrite = true, .calibration_text = text},
                    stage(progress, 600, 400, 1000));
    report_progress(progress, 1000, 1000);
    out.commit();
    return "flat " + parameters_text(flat);
}

} // namespace embedlab::app::detail
