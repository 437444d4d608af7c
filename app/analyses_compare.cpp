// The Compare tab's engine work (compare_analyses.hpp).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>

#include "analyses_internal.hpp"
#include "compare_analyses.hpp"
#include "embedlab/encoder.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/model.hpp"
#include "embedlab/tasks.hpp"
#include "embedlab/text_divergence.hpp"

namespace embedlab::app {

namespace {

// The original's f16/bf16 matrices as stored (load_model_for_generation), which
// generation reads as embedlab-cli generate does; loaded on the first Generate.
struct HalfOriginal {
    std::mutex mutex;
    bool tried = false;
    std::shared_ptr<const LoadedModel> loaded; // null: the files hold no half matrices
};

struct Pair {
    std::shared_ptr<const LoadedModel> original;
    std::shared_ptr<const CompressionRun> run;
    std::shared_ptr<HalfOriginal> half = std::make_shared<HalfOriginal>();
};

// The last pair compared: Generate pressed again reloads and refits nothing.
std::mutex pair_mutex;
std::string pair_key;
Pair last_pair;

Pair models_of(const CompressionRequest& request, const ProgressFn& progress)
{
    const std::string key = request_json(request).dump();
    {
        std::lock_guard lock(pair_mutex);
        if (key == pair_key)
            return last_pair;
    }
    Pair p;
    p.run = detail::kept_compression(request);
    if (!p.run)
        p.run =
            std::make_shared<const CompressionRun>(run_compression(request, [&](const ExperimentProgress& e) {
                return !progress || progress(static_cast<int64_t>(900 * e.overall), 1000);
            }));
    LoadOptions load = request_load_options(request);
    load.need_tokenizer = true; // the run's own may be absent (a run without an evaluation text)
    p.original = std::make_shared<const LoadedModel>(load_model(request.model, load));
    std::lock_guard lock(pair_mutex);
    pair_key = key;
    last_pair = p;
    return p;
}

// The original as generation reads it: its half matrices when its files hold f16/bf16
// ones (the CLI's default), else the float32 model evaluation reads.
const LanguageModel& generation_original(const Pair& p, const CompressionRequest& request)
{
    const auto& stored = p.original->files.stored_dtype;
    if (!p.original->files.embedlab_manifest.empty() || p.original->files.format == ModelFormat::Llama2c ||
        (stored.find("F16") == std::string::npos && stored != "mixed"))
        return *p.original->model;
    std::lock_guard lock(p.half->mutex);
    if (!p.half->tried) {
        LoadOptions load = request_load_options(request);
        load.need_tokenizer = false; // the float32 original's is used
        auto loaded = std::make_shared<const LoadedModel>(
            load_model_for_generation(request.model, load, GenerationWeights::Half));
        if (holds_half_weights(*loaded->model))
            p.half->loaded = std::move(loaded);
        p.half->tried = true;
    }
    return p.half->loaded ? *p.half->loaded->model : *p.original->model;
}

// Generation and next-token KL are a decoder's; what applies to an encoder instead.
void refuse_encoder(const LoadedModel& model, const std::string& cannot)
{
    if (model.model->config().is_encoder())
        throw InputError(model.model->config().type_name() + " is an encoder: " + cannot +
                         "; the Embeddings page compares its sentence embeddings before and after "
                         "compression");
}

std::vector<ComparedToken::Alternative> alternatives(const Tokenizer& tokenizer,
                                                     const std::vector<TokenProbability>& top)
{
    std::vector<ComparedToken::Alternative> a;
    for (const auto& t : top)
        a.push_back({tokenizer.token_text(t.id), t.probability});
    return a;
}

ComparedToken compared(const Tokenizer& tokenizer, const GeneratedToken& t)
{
    return {t.id,
            t.text,
            t.piece,
            t.kl,
            alternatives(tokenizer, t.top),
            alternatives(tokenizer, t.reference_top)};
}

} // namespace

CompareGenerationSummary compare_generate(const CompressionRequest& request,
                                          const CompareGenerationOptions& options,
                                          const ComparedTokenFn& on_token, const ProgressFn& progress)
{
    const Pair p = models_of(request, progress);
    refuse_encoder(*p.original, "it cannot generate");
    const Tokenizer& tokenizer = *p.original->tokenizer;
    const auto ids = prompt_ids(tokenizer, options.prompt);
    if (ids.empty())
        throw InputError("the prompt has no tokens");
    const LanguageModel& original_model = generation_original(p, request);
    GenerationOptions g;
    g.max_tokens = options.max_tokens;
    g.sampling.temperature = options.temperature;
    g.sampling.seed = options.seed;
    g.top_n = 5;

    // The original on a second thread, so both columns grow together; only this
    // thread reports progress (the job's callback is not thread-safe), and a stop
    // reaches the original through the flag.
    std::atomic<bool> stop = false;
    std::atomic<int64_t> original_done = 0;
    auto original = std::async(std::launch::async, [&] {
        return generate(original_model, &tokenizer, ids, g, [&](const GeneratedToken& t) {
            on_token(CompareColumn::Original, compared(tokenizer, t));
            ++original_done;
            return !stop.load();
        });
    });
    const int64_t total = 2 * options.max_tokens;
    int64_t done = 0;
    auto report = [&] {
        if (progress && !progress(done + original_done.load(), total))
            stop = true;
        return !stop.load();
    };
    Generation compressed;
    try {
        compressed = generate(
            p.run->compressed_model(), &tokenizer, ids, g,
            [&](const GeneratedToken& t) {
                on_token(CompareColumn::Compressed, compared(tokenizer, t));
                ++done;
                return report();
            },
            &original_model);
        while (original.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
            report();
    } catch (...) {
        stop = true;
        original.wait();
        throw;
    }
    const Generation own = original.get(); // or its Cancelled, its error
    if (stop)
        throw Cancelled();
    CompareGenerationSummary s;
    s.original_tokens = static_cast<int64_t>(own.tokens.size());
    s.compressed_tokens = static_cast<int64_t>(compressed.tokens.size());
    for (const auto& t : compressed.tokens)
        s.mean_kl += t.kl / static_cast<double>(compressed.tokens.size());
    const auto n = std::min(own.tokens.size(), compressed.tokens.size());
    for (size_t i = 0; i < n && s.first_difference < 0; ++i)
        if (own.tokens[i].id != compressed.tokens[i].id)
            s.first_difference = static_cast<int64_t>(i);
    if (s.first_difference < 0 && own.tokens.size() != compressed.tokens.size())
        s.first_difference = static_cast<int64_t>(n);
    return s;
}

ComparedText compare_text(const CompressionRequest& request, const std::string& text,
                          const ProgressFn& progress, int64_t max_tokens, int64_t worst)
{
    const Pair p = models_of(request, progress);
    refuse_encoder(*p.original, "it predicts no next token");
    const Tokenizer& tokenizer = *p.original->tokenizer;
    auto ids = tokenizer.encode(text);
    ComparedText r;
    r.total_tokens = static_cast<int64_t>(ids.size());
    if (static_cast<int64_t>(ids.size()) > max_tokens)
        ids.resize(static_cast<size_t>(max_tokens));
    if (ids.size() < 2)
        throw InputError("the text has fewer than 2 tokens: nothing to predict");
    const auto d = text_divergence(p.run->compressed_model(), *p.original->model, &tokenizer, ids,
                                   {.ctx = request.ctx > 0 ? request.ctx : 128, .top_n = 5, .worst = worst},
                                   detail::stage(progress, 900, 100, 1000));
    for (size_t i = 0; i < ids.size(); ++i)
        r.tokens.push_back({ids[i], d.text[i], tokenizer.token_text(ids[i]), d.kl[i],
                            alternatives(tokenizer, d.top[i]), alternatives(tokenizer, d.reference_top[i])});
    r.worst = d.worst;
    for (size_t i = 1; i < ids.size(); ++i)
        r.mean_kl += d.kl[i] / static_cast<double>(ids.size() - 1);
    return r;
}

std::vector<std::string> split_sentences(const std::string& text)
{
    std::vector<std::string> out;
    std::string sentence;
    const auto flush = [&] {
        const auto first = sentence.find_first_not_of(" \t\r");
        const auto last = sentence.find_last_not_of(" \t\r");
        if (first != std::string::npos)
            out.push_back(sentence.substr(first, last - first + 1));
        sentence.clear();
    };
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n') {
            flush();
            continue;
        }
        sentence += c;
        const bool ends = (c == '.' || c == '!' || c == '?') && (i + 1 == text.size() || text[i + 1] == ' ');
        if (ends)
            flush();
    }
    flush();
    return out;
}

ComparedEmbeddings compare_embeddings(const CompressionRequest& request, const std::string& text,
                                      const ProgressFn& progress, int64_t k)
{
    const auto sentences = split_sentences(text);
    if (sentences.size() < 2)
        throw InputError("the text has " + std::to_string(sentences.size()) +
                         " sentence(s); comparing neighbours needs at least 2 (one per line, or ending in "
                         "'.', '!' or '?')");
    const Pair p = models_of(request, detail::stage(progress, 0, 600, 1000));
    const Tokenizer& tokenizer = *p.original->tokenizer;
    const EmbedOptions options; // the model's own pooling, as embed
    const auto before = embed_texts(*p.original->model, tokenizer, sentences, options,
                                    detail::stage(progress, 600, 200, 1000));
    const auto after = embed_texts(p.run->compressed_model(), tokenizer, sentences, options,
                                   detail::stage(progress, 800, 200, 1000));
    const auto n = static_cast<int64_t>(sentences.size());
    ComparedEmbeddings r;
    r.k = std::min<int64_t>(k, n - 1);
    r.pooling = pooling_name(before.pooling);
    const auto unit = [](const torch::Tensor& e) {
        const torch::Tensor v = e.to(torch::kFloat64);
        return v / v.norm(2, 1, true).clamp_min(1e-12);
    };
    const torch::Tensor a = unit(before.values), b = unit(after.values);
    const torch::Tensor own = (a * b).sum(1);
    // Each sentence's neighbours: the most similar other sentences (itself masked out).
    const auto nearest = [&](const torch::Tensor& e, std::vector<std::vector<int64_t>>& ids,
                             std::vector<std::vector<double>>& sims) {
        const torch::Tensor s = e.matmul(e.t()).fill_diagonal_(-2.0);
        const auto [values, indices] = s.topk(r.k, 1);
        ids.resize(static_cast<size_t>(n));
        sims.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < r.k; ++j) {
                ids[i].push_back(indices[i][j].item<int64_t>());
                sims[i].push_back(values[i][j].item<double>());
            }
    };
    std::vector<std::vector<int64_t>> ids_a, ids_b;
    std::vector<std::vector<double>> sims_a, sims_b;
    nearest(a, ids_a, sims_a);
    nearest(b, ids_b, sims_b);
    for (int64_t i = 0; i < n; ++i) {
        r.sentences.push_back(
            {sentences[i], own[i].item<double>(), ids_a[i], ids_b[i], sims_a[i], sims_b[i]});
        r.mean_cosine += own[i].item<double>() / static_cast<double>(n);
    }
    r.neighbour_agreement = retrieval_agreement(before.values, after.values, r.k);
    return r;
}

} // namespace embedlab::app
