#include "embedlab/train.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numbers>
#include <random>

#include "embedlab/compressed_model.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "embedlab/json_members.hpp"
#include "io/canonical_weights.hpp"
#include "methods/loss_check.hpp"
#include "methods/masked_lm_batch.hpp"
#include "methods/micro_batch.hpp"
#include "methods/training_memory.hpp"
#include "model/manifest_layout.hpp"
#include "model/manifest_support.hpp"
#include "model/shape_check.hpp"

namespace embedlab {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr int64_t kPlanStep = 10; // a time-limited run fixes its number of steps here

bool ends_with(const std::string& s, const std::string& tail)
{
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

double scheduled_lr(const ScratchOptions& o, int64_t step, int64_t planned)
{
    if (o.warmup > 0 && step <= o.warmup)
        return o.lr * static_cast<double>(step) / static_cast<double>(o.warmup);
    const int64_t flat_until = std::max(o.warmup, kPlanStep);
    if (planned <= flat_until || step <= flat_until)
        return o.lr;
    const double progress =
        std::min(1.0, static_cast<double>(step - flat_until) / static_cast<double>(planned - flat_until));
    const double floor = o.min_lr_ratio * o.lr;
    return floor + (o.lr - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

// GPT-2's initialisation (bert: BertPreTrainedModel's) from our own generator (the
// global one is left alone).
WeightMap initial_weights(const ModelConfig& c, bool with_table, int64_t pad_id, at::Generator& gen)
{
    const bool gpt2 = c.arch == Architecture::GPT2;
    const double out_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.num_layers));
    const std::string table = token_table_name(c.arch);
    WeightMap w;
    for (const auto& e : detail::expected_tensors(c)) {
        if (e.name == table && !with_table)
            continue;
        auto t = torch::empty(e.shape, torch::kFloat32);
        const bool norm =
            e.name.find(gpt2 ? "ln_" : "LayerNorm") != std::string::npos && ends_with(e.name, ".weight");
        if (ends_with(e.name, ".bias"))
            t.zero_();
        else if (norm)
            t.fill_(1.0);
        else if (gpt2 && (ends_with(e.name, "attn.c_proj.weight") || ends_with(e.name, "mlp.c_proj.weight")))
            t.normal_(0.0, out_std, gen);
        else
            t.normal_(0.0, 0.02, gen);
        if (!gpt2 && e.name == table && pad_id >= 0)
            t[pad_id].zero_(); // nn.Embedding's padding_idx row
        w.emplace(e.name, t.requires_grad_(true));
    }
    return w;
}

// BertForMaskedLM's config.json for a scratch config: what save writes and, parsed,
// the ModelConfig training builds (so the saved directory loads as it trained).
Json bert_config_json(const ScratchConfig& s, int64_t pad_id)
{
    return {{"model_type", "bert"},
            {"architectures", {"BertForMaskedLM"}},
            {"vocab_size", s.vocab},
            {"hidden_size", s.dim},
            {"num_hidden_layers", s.layers},
            {"num_attention_heads", s.heads},
            {"intermediate_size", 4 * s.dim},
            {"max_position_embeddings", s.positions},
            {"type_vocab_size", 2},
            {"hidden_act", "gelu"},
            {"layer_norm_eps", 1e-12},
            {"hidden_dropout_prob", 0.1},
            {"attention_probs_dropout_prob", 0.1},
            {"initializer_range", 0.02},
            {"position_embedding_type", "absolute"},
            {"pad_token_id", std::max<int64_t>(pad_id, 0)},
            {"tie_word_embeddings", true},
            {"torch_dtype", "float32"}};
}

FourierParams initial_fourier(const ScratchOptions& o, at::Generator& gen)
{
    FourierParams p;
    p.mlp = o.embedding.mlp;
    p.vocab = o.config.vocab;
    p.dim = o.config.dim;
    p.norm = o.norm;
    p.hidden = p.mlp == FourierMlp::GeGLU ? fourier_hidden_size(p.dim, o.hidden_ratio) : 0;
    auto uniform = [&](std::vector<int64_t> shape, int64_t fan_in) {
        const double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
        auto t = torch::empty(shape, torch::kFloat32);
        t.uniform_(-b, b, gen);
        return t.requires_grad_(true);
    };
    const int64_t d = p.dim, width = p.mlp == FourierMlp::Linear ? d : 2 * p.hidden;
    p.w_in = uniform({width, d}, d);
    p.b_in = uniform({width}, d);
    if (p.mlp == FourierMlp::GeGLU) {
        p.w_out = uniform({d, p.hidden}, p.hidden);
        p.b_out = uniform({d}, p.hidden);
    }
    if (p.norm)
        p.norm_weight = torch::full({d}, o.norm_scale, torch::kFloat32).requires_grad_(true);
    return p;
}

// The trained model with plain tensors (no autograd history or requires_grad); `fourier`
// (the model's table when it is one, else null) becomes a plain copy of it.
std::unique_ptr<LanguageModel> detached_model(const LanguageModel& m,
                                              std::shared_ptr<const FourierTokenEmbedding>& fourier)
{
    WeightMap w;
    for (const auto& [name, t] : m.weights())
        w.emplace(name, t.detach().clone());
    if (!fourier)
        return std::make_unique<LanguageModel>(m.config(), std::move(w), "trained model");
    FourierParams p = fourier->params();
    for (auto* t : p.learned())
        *t = t->detach().clone();
    fourier = std::make_shared<FourierTokenEmbedding>(std::move(p));
    return std::make_unique<LanguageModel>(m.config(), std::move(w), fourier, "trained model");
}

void copy_file_into(const fs::path& from, const fs::path& dir)
{
    std::error_code ec;
    fs::copy_file(from, dir / from.filename(), ec);
    if (ec)
        throw InputError((dir / from.filename()).string() + ": cannot copy from " + from.string() + " (" +
                         ec.message() + ")");
    fs::permissions(dir / from.filename(), fs::perms::owner_write, fs::perm_options::add, ec);
}

} // namespace

namespace detail {

MaskedBatch masked_lm_batch(const ScratchOptions& o, const std::vector<int64_t>& window, std::mt19937_64& rng)
{
    const int64_t T = o.seqlen + 2;
    std::vector<int64_t> inputs(static_cast<size_t>(o.batch * T)), labels(inputs.size(), -100);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::uniform_int_distribution<int64_t> any_id(0, o.config.vocab - 1);
    int64_t chosen = 0;
    auto mask_at = [&](size_t at) {
        labels[at] = inputs[at];
        const double r = u(rng);
        if (r < 0.8)
            inputs[at] = o.special.mask;
        else if (r < 0.9)
            inputs[at] = any_id(rng);
        ++chosen;
    };
    for (int64_t b = 0; b < o.batch; ++b) {
        const auto row = static_cast<size_t>(b * T);
        inputs[row] = o.special.cls;
        inputs[row + static_cast<size_t>(T) - 1] = o.special.sep;
        for (int64_t i = 0; i < o.seqlen; ++i)
            inputs[row + 1 + static_cast<size_t>(i)] = window[static_cast<size_t>(b * (o.seqlen + 1) + i)];
        for (int64_t i = 0; i < o.seqlen; ++i)
            if (u(rng) < o.mask_rate)
                mask_at(row + 1 + static_cast<size_t>(i));
    }
    if (chosen == 0) // a step with nothing to predict has no loss
        mask_at(1 + static_cast<size_t>(std::uniform_int_distribution<int64_t>(0, o.seqlen - 1)(rng)));
    auto tensor = [&](std::vector<int64_t>& v) {
        return torch::from_blob(v.data(), {o.batch, T}, torch::kLong).clone();
    };
    return {tensor(inputs), tensor(labels)};
}

} // namespace detail

ScratchConfig scratch_config(const std::string& name, int64_t vocab, const std::string& arch)
{
    if (arch != "gpt2" && arch != "bert")
        throw InputError("train: unknown arch '" + arch +
                         "' (use gpt2: a causal LM, or bert: a masked-LM encoder)");
    ScratchConfig c;
    c.name = name;
    c.vocab = vocab;
    c.arch = arch;
    c.positions = 256;
    if (name == "tiny") {
        c.dim = 128;
        c.layers = 4;
        c.heads = 4;
    } else if (name == "small") {
        c.dim = 256;
        c.layers = 6;
        c.heads = 8;
    } else {
        throw InputError("train: unknown config '" + name +
                         "' (use tiny: d 128, 4 layers, 4 heads; or small: d 256, 6 layers, 8 heads)");
    }
    return c;
}

ModelConfig scratch_model_config(const ScratchConfig& s)
{
    if (s.arch == "bert")
        return parse_hf_config(bert_config_json(s, 0).dump(), "train: the bert config");
    return {.arch = Architecture::GPT2,
            .vocab_size = s.vocab,
            .hidden_size = s.dim,
            .num_layers = s.layers,
            .num_heads = s.heads,
            .num_kv_heads = s.heads,
            .intermediate_size = 4 * s.dim,
            .max_positions = s.positions,
            .norm_eps = 1e-5,
            .tied_embeddings = true,
            .activation = "gelu_new",
            .model_type = "gpt2",
            .norm = NormKind::LayerNorm};
}

ScratchEmbedding parse_scratch_embedding(const std::string& name)
{
    if (name == "table")
        return {};
    if (const auto mlp = parse_fourier_embedding(name))
        return {.fourier = true, .mlp = *mlp};
    throw InputError("train: unknown embedding '" + name +
                     "' (use table, fourier, fourier:linear or fourier:geglu)");
}

std::string scratch_embedding_name(const ScratchEmbedding& e)
{
    return e.fourier ? fourier_embedding_name(e.mlp) : "table";
}

std::string scratch_objective(const ScratchOptions& o)
{
    return !o.objective.empty() ? o.objective : o.config.arch == "bert" ? "mlm" : "clm";
}

void check_scratch_options(const ScratchOptions& o, int64_t text_ids)
{
    const auto& c = o.config;
    const bool bert = c.arch == "bert";
    if (c.arch != "gpt2" && !bert)
        throw InputError("train: unknown arch '" + c.arch + "' (use gpt2 or bert)");
    const std::string objective = scratch_objective(o);
    if (objective != (bert ? "mlm" : "clm"))
        throw InputError("train: --arch " + c.arch + " trains with --objective " + (bert ? "mlm" : "clm") +
                         ", not '" + objective + "' (" +
                         (bert ? "an encoder sees both directions: it predicts masked tokens"
                               : "a causal LM predicts the next token; mlm is for --arch bert") +
                         ")");
    if (c.name != "tiny" && c.name != "small" && c.name != "custom")
        throw InputError("train: unknown config '" + c.name + "' (use tiny or small)");
    if (c.vocab < 2 || c.dim < 2 || c.layers < 1 || c.heads < 1 || c.dim % c.heads != 0 || c.positions < 1)
        throw InputError("train: the config needs vocab >= 2, d >= 2, layers >= 1 and heads dividing d; got "
                         "vocab " +
                         std::to_string(c.vocab) + ", d " + std::to_string(c.dim) + ", " +
                         std::to_string(c.layers) + " layers, " + std::to_string(c.heads) + " heads");
    if (!std::isfinite(o.minutes) || o.minutes < 0)
        throw InputError("train: --minutes must be a positive number, got " + std::to_string(o.minutes));
    if (o.steps < 0)
        throw InputError("train: --steps must be at least 1, got " + std::to_string(o.steps));
    if (o.minutes <= 0 && o.steps == 0)
        throw InputError("train: give a training time (--minutes M, M > 0) or a number of steps (--steps N)");
    if (!(o.lr > 0) || !std::isfinite(o.lr))
        throw InputError("train: the learning rate must be a positive number, got " + std::to_string(o.lr));
    if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1))
        throw InputError("train: the final learning-rate ratio must be in [0, 1], got " +
                         std::to_string(o.min_lr_ratio));
    if (o.batch < 1 || o.seqlen < 1)
        throw InputError("train: batch and seqlen must be at least 1, got " + std::to_string(o.batch) +
                         " and " + std::to_string(o.seqlen));
    if (o.seqlen + (bert ? 2 : 0) > c.positions)
        throw InputError("train: seqlen " + std::to_string(o.seqlen) + (bert ? " + [CLS] and [SEP]" : "") +
                         " exceeds the config's " + std::to_string(c.positions) + " positions");
    if (bert) {
        if (!(o.mask_rate > 0 && o.mask_rate <= 1))
            throw InputError("train: --mask-rate must be in (0, 1], got " + std::to_string(o.mask_rate));
        const auto& t = o.special;
        for (const auto& [id, name] : {std::pair{t.cls, "[CLS]"}, {t.sep, "[SEP]"}, {t.mask, "[MASK]"}})
            if (id < 0 || id >= c.vocab)
                throw InputError(std::string("train: masked-LM training needs the tokenizer's ") + name +
                                 " token (a WordPiece tokenizer: --tokenizer DIR with vocab.txt or "
                                 "tokenizer.json)" +
                                 (id >= c.vocab
                                      ? ", but its id " + std::to_string(id) + " is outside the vocabulary"
                                      : ""));
    }
    if (o.warmup < 0)
        throw InputError("train: warmup must be 0 or more, got " + std::to_string(o.warmup));
    if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay))
        throw InputError("train: weight decay must be 0 or more, got " + std::to_string(o.weight_decay));
    if (!(o.grad_clip >= 0) || !std::isfinite(o.grad_clip))
        throw InputError("train: the gradient clip must be 0 (none) or more, got " +
                         std::to_string(o.grad_clip));
    if (o.norm && !(o.norm_scale > 0 && std::isfinite(o.norm_scale)))
        throw InputError("train: the norm's initial scale must be a positive number, got " +
                         std::to_string(o.norm_scale));
    if (!(o.hidden_ratio > 0 && o.hidden_ratio <= kMaxFourierHiddenRatio)) // its range, whatever the MLP
        throw InputError("train: the hidden ratio must be in (0, " + std::to_string(kMaxFourierHiddenRatio) +
                         "], got " + std::to_string(o.hidden_ratio));
    if (text_ids == 0)
        throw InputError("train: the training text has no tokens (it is empty)");
    const int64_t need = o.batch * o.seqlen + 1;
    if (text_ids < need)
        throw InputError("train: the training text has " + std::to_string(text_ids) +
                         " tokens, shorter than one batch (" + std::to_string(o.batch) + " x " +
                         std::to_string(o.seqlen) + " + 1 = " + std::to_string(need) +
                         "); use a longer text or a smaller --batch/--seqlen");
}

double scratch_memory_estimate(const ScratchOptions& o)
{
    const auto& c = o.config;
    const int64_t d = c.dim, mlm_frame = scratch_objective(o) == "mlm" ? 2 : 0;
    // GPT-2/BERT blocks hold about 12 d^2; a fourier table rebuilds V x d rows each pass.
    const int64_t params = 12 * c.layers * d * d + (c.vocab + c.positions) * d;
    return methods::training_step_bytes(
        {.trained = params,
         .frozen = o.embedding.fourier ? 3 * c.vocab * d : 0,
         .windows = methods::micro_windows(o.batch, o.seqlen + mlm_frame, c.layers, d, c.vocab),
         .seqlen = o.seqlen + mlm_frame,
         .layers = c.layers,
         .dim = d,
         .heads = c.heads,
         .vocab = c.vocab,
         .batch = o.batch});
}

void check_scratch_memory(const ScratchOptions& o, double available)
{
    methods::check_training_memory("train", o.batch, o.seqlen, scratch_memory_estimate(o),
                                   available > 0 ? available : methods::available_memory_bytes());
}

namespace {

// One step's loss with gradients accumulated over micro-batches, each weighted by
// its share of the predicted positions (labels -100 are not predicted); a single
// micro-batch is the whole-batch mean itself. `alive` is asked between passes.
torch::Tensor accumulate_scratch_step(const LanguageModel& model, const torch::Tensor& inputs,
                                      const torch::Tensor& labels, const std::function<bool()>& alive)
{
    const auto& c = model.config();
    const int64_t windows = inputs.size(0);
    const int64_t micro =
        methods::micro_windows(windows, inputs.size(1), c.num_layers, c.hidden_size, c.vocab_size);
    const double predicted = static_cast<double>(labels.ne(-100).sum().item<int64_t>());
    torch::Tensor total;
    for (int64_t at = 0; at < windows; at += micro) {
        const int64_t rows = std::min(micro, windows - at);
        const auto part = labels.narrow(0, at, rows);
        const auto count = static_cast<double>(part.ne(-100).sum().item<int64_t>());
        if (count == 0)
            continue; // nothing predicted here (mlm): no loss, no gradient
        const auto logits = model.training_logits(inputs.narrow(0, at, rows));
        const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                               part.reshape({-1})); // ignores -100
        methods::backward_share(loss, rows == windows ? 1.0 : count / predicted, total, alive);
    }
    return total;
}

} // namespace

ScratchResult train_from_scratch(const ScratchOptions& o, std::span<const int32_t> ids,
                                 const ScratchProgressFn& progress)
{
    const auto n = static_cast<int64_t>(ids.size());
    check_scratch_options(o, n);
    check_scratch_memory(o);
    for (const int32_t id : ids)
        if (id < 0 || id >= o.config.vocab)
            throw InputError("train: token id " + std::to_string(id) + " is outside the vocabulary 0.." +
                             std::to_string(o.config.vocab - 1));
    // Callers may hold InferenceMode; training needs autograd.
    c10::InferenceMode no_inference(false);
    torch::AutoGradMode grad(true);

    const ModelConfig config = scratch_model_config(o.config);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(o.seed);
    WeightMap weights = initial_weights(config, !o.embedding.fourier, o.special.pad, gen);
    const bool mlm = scratch_objective(o) == "mlm";
    std::unique_ptr<LanguageModel> model;
    std::shared_ptr<const FourierTokenEmbedding> fourier; // model's table, when it is one
    std::vector<torch::Tensor> decay, no_decay;
    for (const auto& [name, t] : weights)
        (t.dim() >= 2 ? decay : no_decay).push_back(t);
    if (o.embedding.fourier) {
        auto fe = std::make_shared<FourierTokenEmbedding>(initial_fourier(o, gen));
        const auto& p = fe->params(); // the same tensors, updated in place by the optimiser
        for (const auto& t : p.learned_tensors())
            (t.dim() >= 2 ? decay : no_decay).push_back(t);
        model = std::make_unique<LanguageModel>(config, std::move(weights), fe, "scratch model");
        fourier = fe;
    } else {
        model = std::make_unique<LanguageModel>(config, std::move(weights), "scratch model");
    }

    using torch::optim::AdamWOptions;
    const auto base = AdamWOptions(o.lr).betas({0.9, 0.95}).eps(1e-8);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay,
                        std::make_unique<AdamWOptions>(AdamWOptions(base).weight_decay(o.weight_decay)));
    groups.emplace_back(no_decay, std::make_unique<AdamWOptions>(AdamWOptions(base).weight_decay(0)));
    torch::optim::AdamW optimizer(std::move(groups), AdamWOptions(base).weight_decay(o.weight_decay));
    std::vector<torch::Tensor> all = decay;
    all.insert(all.end(), no_decay.begin(), no_decay.end());

    ScratchResult r;
    r.options = o;
    r.threads = at::get_num_threads();
    r.planned_steps = o.steps;
    std::mt19937_64 rng(o.seed);
    const int64_t span = o.seqlen + 1;
    const auto starts = static_cast<uint64_t>(n - o.seqlen); // window starts 0 .. n - span
    std::vector<int64_t> window(static_cast<size_t>(o.batch * span));
    const double budget = o.minutes * 60.0;
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    r.stopped_by = "steps";
    // Between steps and passes: the finished steps so far (the caller may cancel).
    auto alive = [&] {
        const double last = r.loss_curve.empty() ? 0 : r.loss_curve.back();
        return !progress ||
               progress({r.steps, r.planned_steps, last, 0, elapsed(), r.tokens_per_second, true});
    };
    if (!alive())
        throw Cancelled();
    for (int64_t step = 1; r.planned_steps == 0 || step <= r.planned_steps; ++step) {
        for (int64_t b = 0; b < o.batch; ++b) {
            const auto start = static_cast<int64_t>(rng() % starts);
            for (int64_t i = 0; i < span; ++i)
                window[static_cast<size_t>(b * span + i)] = ids[static_cast<size_t>(start + i)];
        }
        const double lr = scheduled_lr(o, step, r.planned_steps);
        for (auto& group : optimizer.param_groups())
            static_cast<AdamWOptions&>(group.options()).lr(lr);
        optimizer.zero_grad();
        torch::Tensor loss;
        if (mlm) {
            const auto batch = detail::masked_lm_batch(o, window, rng);
            loss = accumulate_scratch_step(*model, batch.inputs, batch.labels, alive);
        } else {
            const auto batch = torch::from_blob(window.data(), {o.batch, span}, torch::kLong).clone();
            loss = accumulate_scratch_step(*model, batch.narrow(1, 0, o.seqlen), batch.narrow(1, 1, o.seqlen),
                                           alive);
        }
        if (o.grad_clip > 0)
            torch::nn::utils::clip_grad_norm_(all, o.grad_clip);
        optimizer.step();
        const double value = methods::finite_loss(loss, "train", step);
        r.loss_curve.push_back(value);
        r.steps = step;
        r.tokens += o.batch * o.seqlen;
        const double seconds = elapsed();
        r.tokens_per_second = seconds > 0 ? static_cast<double>(r.tokens) / seconds : 0;
        if (r.planned_steps == 0 && step == kPlanStep) // time-limited: fix the plan once
            r.planned_steps = std::max<int64_t>(
                kPlanStep, static_cast<int64_t>(budget / (seconds / static_cast<double>(kPlanStep))));
        if (progress && !progress({step, r.planned_steps, value, lr, seconds, r.tokens_per_second}))
            throw Cancelled();
        if (budget > 0 && seconds >= budget) {
            if (r.planned_steps == 0 || step < r.planned_steps)
                r.stopped_by = "time";
            break;
        }
    }
    if (r.planned_steps == 0)
        r.planned_steps = r.steps;
    r.seconds = elapsed();
    r.model = detached_model(*model, fourier);
    r.fourier = fourier;
    const auto breakdown = r.model->parameter_breakdown();
    r.embedding_parameters = breakdown.token_embedding;
    r.total_parameters = breakdown.total();
    return r;
}

Json scratch_training_json(const ScratchResult& r)
{
    const auto& o = r.options;
    const auto& c = o.config;
    Json curve = Json::array();
    const size_t points = r.loss_curve.size(), limit = 500;
    for (size_t i = 0; i < std::min(points, limit); ++i) {
        const size_t at = points <= limit ? i : i * (points - 1) / (limit - 1);
        curve.push_back({{"step", at + 1}, {"loss", r.loss_curve[at]}});
    }
    Json embedding = {{"kind", scratch_embedding_name(o.embedding)}};
    if (o.embedding.fourier) {
        if (o.embedding.mlp == FourierMlp::GeGLU)
            embedding["hidden_ratio"] = o.hidden_ratio;
        embedding["norm"] = o.norm;
        if (o.norm)
            embedding["norm_scale"] = o.norm_scale;
        embedding["output_head"] = "tied: hidden states times all V rows rebuilt from the MLP at every step";
    } else {
        embedding["output_head"] = "tied to the table";
    }
    Json j = {{"config",
               {{"name", c.name},
                {"arch", c.arch},
                {"vocab", c.vocab},
                {"d", c.dim},
                {"layers", c.layers},
                {"heads", c.heads},
                {"positions", c.positions},
                {"mlp_width", 4 * c.dim}}}};
    Json options;
    EMBEDLAB_JSON_MEMBERS(options, o, minutes, steps, lr, min_lr_ratio, warmup, batch, seqlen, weight_decay,
                          grad_clip, seed);
    options["schedule"] = "linear warmup, constant to step max(warmup, 10), cosine to min_lr_ratio lr at "
                          "planned_steps";
    options["optimizer"] = "AdamW (0.9, 0.95, eps 1e-8), weight decay on matrices only";
    options["objective"] = scratch_objective(o);
    if (scratch_objective(o) == "mlm") {
        options["mask_rate"] = o.mask_rate;
        options["masking"] = "windows of seqlen ids framed [CLS] .. [SEP]; each position chosen with "
                             "probability mask_rate (at least one per step): [MASK] 80%, a random id 10%, "
                             "unchanged 10%; loss: mean cross-entropy over the chosen positions";
    }
    j["embedding"] = embedding;
    j["options"] = options;
    EMBEDLAB_JSON_MEMBERS(j, r, steps, planned_steps, stopped_by, tokens, seconds, tokens_per_second, threads,
                          embedding_parameters, total_parameters);
    methods::put_loss_summary(j, r.loss_curve);
    j["loss_curve"] = curve;
    return j;
}

Json save_trained_model(const ScratchResult& r, const fs::path& out, const SaveTrainedOptions& options,
                        const ProgressFn& progress)
{
    if (!r.model)
        throw InputError("train: nothing to save (no trained model)");
    const fs::path& tok = options.tokenizer_dir;
    if (tok.empty() || !fs::is_directory(tok))
        throw InputError((tok.empty() ? std::string("(empty path)") : tok.string()) +
                         ": is not a directory with tokenizer files");
    std::vector<fs::path> tokenizer_files;
    for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "vocab.txt",
                             "tokenizer_config.json", "special_tokens_map.json"})
        if (fs::is_regular_file(tok / name))
            tokenizer_files.push_back(tok / name);
    if (tokenizer_files.empty())
        throw InputError(tok.string() +
                         ": has no tokenizer.json, vocab.json + merges.txt or vocab.txt to copy");

    const auto& model = *r.model;
    const auto& c = r.options.config;
    const bool bert = c.arch == "bert";
    const std::string table = token_table_name(model.config().arch);
    const std::string prefix = table.substr(0, table.size() - std::string("weight").size());
    Json config = bert ? bert_config_json(c, r.options.special.pad)
                       : Json{{"model_type", "gpt2"},
                              {"architectures", {"GPT2LMHeadModel"}},
                              {"vocab_size", c.vocab},
                              {"n_embd", c.dim},
                              {"n_layer", c.layers},
                              {"n_head", c.heads},
                              {"n_inner", 4 * c.dim},
                              {"n_positions", c.positions},
                              {"n_ctx", c.positions},
                              {"layer_norm_epsilon", 1e-5},
                              {"activation_function", "gelu_new"},
                              {"tie_word_embeddings", true},
                              {"torch_dtype", "float32"}};
    if (!bert && c.vocab == 50257) { // GPT-2's tokenizer: its end-of-text token
        config["bos_token_id"] = 50256;
        config["eos_token_id"] = 50256;
    }

    AtomicDirectory dir(out, options.overwrite);
    for (const auto& f : tokenizer_files)
        copy_file_into(f, dir.path());
    write_file_atomic(dir.path() / "config.json", config.dump(2) + "\n");

    WeightMap weights;
    for (const auto& [name, t] : model.weights())
        weights.emplace(name, t.detach());
    auto tensors = io::native_hf_tensors(model.config(), weights);
    const auto* fe = r.fourier.get(); // model's table when it is one
    Json factors = Json::object();
    if (fe)
        for (const auto& [name, t] : embedding_factor_tensors(*fe, prefix)) {
            factors[name] = t.sizes().vec();
            tensors.emplace_back(name, t.detach().contiguous());
        }
    std::map<std::string, std::string> metadata{{"format", "pt"}};
    if (fe)
        metadata["embedlab_method"] = "fourier";
    write_safetensors(dir.path() / "model.safetensors", tensors, metadata, progress);

    Json record = scratch_training_json(r);
    if (options.extra.is_object())
        for (const auto& [key, value] : options.extra.items())
            record[key] = value;
    record["created"] = detail::utc_now();
    write_file_atomic(dir.path() / "training.json", record.dump(1) + "\n");

    if (fe) {
        const auto& p = fe->params();
        Json params = {{"method", "fourier"}, {"mlp", fourier_mlp_name(p.mlp)}};
        if (p.mlp == FourierMlp::GeGLU)
            params["hidden_ratio"] = r.options.hidden_ratio;
        params["norm"] = p.norm;
        params["trained_from_scratch"] = true;
        params["seed"] = r.options.seed;
        Json manifest = {{"format", "embedlab-compressed-model"},
                         {"format_version", detail::kManifestFormatVersion},
                         {"method", "fourier"},
                         {"parameters", params},
                         {"embedding_tensor", table},
                         {"factor_tensors", factors},
                         {"trained_from_scratch", true},
                         {"fit",
                          {{"note", "PETE trained jointly with the transformer from random initialisation "
                                    "(embedlab-cli train); no table was ever fitted"},
                           {"hidden", p.hidden},
                           {"parameters", fe->parameter_count()},
                           {"flops_per_row", fe->flops_per_row()}}},
                         {"tied_output_head", true},
                         // "before": the same model with a learned V x d table instead.
                         {"model_params",
                          {{"before", r.total_parameters - r.embedding_parameters + c.vocab * c.dim},
                           {"after", r.total_parameters}}},
                         {"training", record},
                         {"seed", r.options.seed},
                         {"weights_files", detail::file_digests(dir.path(), {"model.safetensors"})},
                         {"versions", detail::manifest_versions()},
                         {"created", detail::utc_now()}};
        write_file_atomic(dir.path() / "embedlab.json", manifest.dump(1) + "\n");
    }
    dir.commit();
    return record;
}

} // namespace embedlab
