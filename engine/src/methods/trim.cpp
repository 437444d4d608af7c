// Vocabulary trimming (trim.hpp): the kept set from a frequency text and a budget,
// the model directory cut to it, and the record's evaluation.
#include "embedlab/trim.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <torch/torch.h>

#include "embedlab/eval.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/format_parsers.hpp"
#include "embedlab/model.hpp"
#include "embedlab/text_format.hpp"
#include "embedlab/tokenizer.hpp"
#include "io/mapped_file.hpp"
#include "model/manifest_support.hpp"
#include "tokenizer/text_util.hpp"
#include "tokenizer/trim_vocab.hpp"

namespace embedlab {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using tokenizer_impl::TrimVocabulary;

namespace {

bool is_file(const fs::path& p)
{
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

std::string absolute_text(const fs::path& p)
{
    return fs::absolute(p).lexically_normal().string();
}

// Progress over stages: stage i of n maps its own (done, total) into [i, i + 1) of n.
class StagedProgress {
public:
    StagedProgress(const ProgressFn& progress, int64_t stages) : progress_(progress), stages_(stages) {}
    void stage(int64_t index)
    {
        index_ = index;
        report_progress(progress_, index * kScale, stages_ * kScale);
    }
    ProgressFn within() const
    {
        if (!progress_)
            return {};
        return [this](int64_t done, int64_t total) {
            const int64_t part = total > 0 ? std::min<int64_t>(kScale, done * kScale / total) : 0;
            return progress_(index_ * kScale + part, stages_ * kScale);
        };
    }

private:
    static constexpr int64_t kScale = 1000;
    const ProgressFn& progress_;
    int64_t stages_ = 1, index_ = 0;
};

// The safetensors files of a Hugging Face directory, sorted.
std::vector<fs::path> weight_files(const fs::path& dir)
{
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
            files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

// Every integer id a config names under "*_token_id" (a number or a list of numbers).
std::vector<int32_t> config_token_ids(const fs::path& file)
{
    std::vector<int32_t> ids;
    if (!is_file(file))
        return ids;
    const Json config = Json::parse(tokenizer_impl::read_file_bytes(file), nullptr, false);
    if (!config.is_object())
        return ids;
    for (const auto& [key, value] : config.items()) {
        if (!key.ends_with("_token_id"))
            continue;
        if (value.is_number_integer())
            ids.push_back(value.get<int32_t>());
        else if (value.is_array())
            for (const auto& v : value)
                if (v.is_number_integer())
                    ids.push_back(v.get<int32_t>());
    }
    return ids;
}

// The config with `vocab_size` (when set) and its "*_token_id" values renumbered.
std::string trimmed_config(const fs::path& file, const std::vector<int32_t>& new_id, int64_t kept,
                           bool set_vocab_size)
{
    Json config = Json::parse(tokenizer_impl::read_file_bytes(file));
    if (set_vocab_size)
        config["vocab_size"] = kept;
    const auto renumber = [&](Json& id, const std::string& key) {
        const int64_t old = id.get<int64_t>();
        const int32_t n =
            old >= 0 && old < static_cast<int64_t>(new_id.size()) ? new_id[static_cast<size_t>(old)] : -1;
        if (n < 0)
            throw InputError(tokenizer_impl::file_message(
                file, key + " " + std::to_string(old) + " is not a token the trimmed model keeps"));
        id = n;
    };
    for (auto& [key, value] : config.items()) {
        if (!key.ends_with("_token_id"))
            continue;
        if (value.is_number_integer())
            renumber(value, key);
        else if (value.is_array())
            for (auto& v : value)
                if (v.is_number_integer())
                    renumber(v, key);
    }
    return config.dump(2) + "\n";
}

std::vector<int32_t> user_tokens(const fs::path& file, const TrimVocabulary& vocab)
{
    std::unordered_map<std::string, int32_t> ids;
    for (size_t id = 0; id < vocab.tokens.size(); ++id)
        if (!vocab.tokens[id].empty())
            ids.emplace(vocab.tokens[id], static_cast<int32_t>(id));
    const std::string text = tokenizer_impl::read_file_bytes(file);
    std::vector<int32_t> out;
    size_t line_number = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos)
            end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_number;
        if (!line.empty() && line.back() == '\r')
            line.pop_back();
        if (line.empty())
            continue;
        const auto it = ids.find(line);
        if (it == ids.end())
            throw InputError(tokenizer_impl::file_message(
                file,
                "line " + std::to_string(line_number) + ": \"" + printable(line) +
                    "\" is not a token of the vocabulary (write tokens as the vocabulary file spells them)"));
        out.push_back(it->second);
    }
    return out;
}

// The seeds every trimmed model keeps: the family's base tokens, the tokenizer's
// special and named tokens, the configs' token ids and the user's list.
std::vector<int32_t> required_seeds(const fs::path& model, const TrimVocabulary& vocab,
                                    const Tokenizer& tokenizer, const TrimOptions& options)
{
    std::vector<int32_t> seeds = vocab.required;
    const auto size = static_cast<int32_t>(vocab.tokens.size());
    for (int32_t id = 0; id < std::min<int64_t>(size, tokenizer.vocab_size()); ++id)
        if (tokenizer.is_special(id))
            seeds.push_back(id);
    for (const auto& named : {tokenizer.unk_id(), tokenizer.bos_id(), tokenizer.eos_id(), tokenizer.cls_id(),
                              tokenizer.sep_id(), tokenizer.mask_id(), tokenizer.pad_id()})
        if (named)
            seeds.push_back(*named);
    for (const char* config : {"config.json", "generation_config.json"})
        for (int32_t id : config_token_ids(model / config))
            if (id >= 0 && id < size)
                seeds.push_back(id);
    if (!options.keep_tokens.empty())
        for (int32_t id : user_tokens(options.keep_tokens, vocab))
            seeds.push_back(id);
    return seeds;
}

struct Frequency {
    std::vector<int64_t> counts; // by id
    std::vector<int32_t> order;  // ids seen, by count (descending), then id
    int64_t total = 0;           // token occurrences
};

Frequency count_tokens(const std::vector<int32_t>& ids, int64_t vocab, const fs::path& file)
{
    Frequency f;
    f.counts.assign(static_cast<size_t>(vocab), 0);
    for (int32_t id : ids) {
        if (id < 0 || id >= vocab)
            throw InputError(file.string() + ": encodes to id " + std::to_string(id) +
                             ", outside the model's vocabulary (V = " + std::to_string(vocab) + ")");
        ++f.counts[static_cast<size_t>(id)];
    }
    f.total = static_cast<int64_t>(ids.size());
    for (int32_t id = 0; id < vocab; ++id)
        if (f.counts[static_cast<size_t>(id)] > 0)
            f.order.push_back(id);
    std::stable_sort(f.order.begin(), f.order.end(), [&](int32_t a, int32_t b) {
        return f.counts[static_cast<size_t>(a)] > f.counts[static_cast<size_t>(b)];
    });
    return f;
}

// The kept set: the required tokens, then the frequency order's prefix the budget
// allows, each id with its parts.
std::vector<int32_t> choose_kept(const TrimVocabulary& vocab, const std::vector<int32_t>& required,
                                 const Frequency& f, const TrimOptions& options)
{
    std::vector<uint8_t> in(vocab.tokens.size(), 0);
    int64_t size = 0;
    for (int32_t id : required)
        in[static_cast<size_t>(id)] = 1, ++size;
    // What adding `id` brings: itself and its parts not yet kept.
    const auto additions = [&](int32_t id) {
        std::vector<int32_t> out;
        for (int32_t t : tokenizer_impl::close_over_parts(vocab, {id}))
            if (!in[static_cast<size_t>(t)])
                out.push_back(t);
        return out;
    };
    const double need = options.coverage ? *options.coverage * static_cast<double>(f.total) : 0;
    int64_t covered = 0;
    for (int32_t id : f.order) {
        if (options.coverage && static_cast<double>(covered) >= need)
            break;
        const auto more = additions(id);
        if (options.keep && size + static_cast<int64_t>(more.size()) > *options.keep)
            break;
        for (int32_t t : more)
            in[static_cast<size_t>(t)] = 1;
        size += static_cast<int64_t>(more.size());
        covered += f.counts[static_cast<size_t>(id)];
    }
    std::vector<int32_t> kept;
    for (size_t id = 0; id < in.size(); ++id)
        if (in[id])
            kept.push_back(static_cast<int32_t>(id));
    return kept;
}

bool per_token_tensor(const SafetensorsEntry& e, int64_t vocab)
{
    return !e.shape.empty() && e.shape[0] == vocab && e.name.find("position") == std::string::npos;
}

struct WeightsWritten {
    std::vector<std::string> cut; // tensor names cut to the kept rows
    int64_t parameters_before = 0, parameters_after = 0;
    int64_t table_parameters_before = 0, table_parameters_after = 0;
};

// One safetensors file with its per-token tensors cut to the kept rows, bytes as stored.
void write_trimmed_weights(const fs::path& in, const fs::path& out, int64_t vocab,
                           const std::vector<int32_t>& kept, WeightsWritten& w, const ProgressFn& progress)
{
    const auto file = io::MappedFile::open(in);
    const SafetensorsHeader header = parse_safetensors_header(file->data(), file->size(), in.string());
    std::vector<StreamedTensor> tensors;
    std::vector<uint64_t> row_bytes; // 0: copied whole
    for (const auto& e : header.entries) {
        StreamedTensor t{e.name, e.dtype, e.shape};
        int64_t numel = 1;
        for (int64_t s : e.shape)
            numel *= s;
        w.parameters_before += numel;
        const bool cut = per_token_tensor(e, vocab);
        row_bytes.push_back(cut ? (e.end - e.begin) / static_cast<uint64_t>(vocab) : 0);
        if (cut) {
            t.shape[0] = static_cast<int64_t>(kept.size());
            w.cut.push_back(e.name);
            w.table_parameters_before += numel;
            numel = numel / vocab * static_cast<int64_t>(kept.size());
            w.table_parameters_after += numel;
        }
        w.parameters_after += numel;
        tensors.push_back(std::move(t));
    }
    const uint8_t* data = file->data() + header.data_start;
    const auto fill = [&](size_t index, uint64_t offset, std::span<char> dst) {
        const SafetensorsEntry& e = header.entries[index];
        const uint8_t* src = data + e.begin;
        const uint64_t row = row_bytes[index];
        if (row == 0) {
            std::memcpy(dst.data(), src + offset, dst.size());
            return;
        }
        for (size_t done = 0; done < dst.size();) {
            const uint64_t at = offset + done;
            const uint64_t r = at / row, within = at % row;
            const size_t n = static_cast<size_t>(std::min<uint64_t>(row - within, dst.size() - done));
            std::memcpy(dst.data() + done, src + static_cast<uint64_t>(kept[r]) * row + within, n);
            done += n;
        }
    };
    write_safetensors_streamed(out, tensors, fill, header.metadata, progress);
}

// A sharded model's index: the same names, the new total size.
void write_trimmed_index(const fs::path& in, const fs::path& out, const std::vector<fs::path>& written)
{
    Json index = Json::parse(tokenizer_impl::read_file_bytes(in));
    uint64_t total = 0;
    for (const auto& f : written)
        total += fs::file_size(f);
    index["metadata"]["total_size"] = total;
    write_file_atomic(out, index.dump(2) + "\n");
}

// --- The record's evaluation.

struct Span {
    int64_t begin = 0, end = 0;
    int32_t token = 0; // original id
};

// Where each token lies in the text, in the units token_units counts (WordPiece:
// per word, a new word at each token that does not continue one).
std::vector<Span> token_spans(const std::vector<int32_t>& ids, const TrimVocabulary& vocab,
                              const std::vector<int32_t>* original_of)
{
    std::vector<Span> spans;
    spans.reserve(ids.size());
    const bool by_word = vocab.family == tokenizer_impl::TrimFamily::WordPiece;
    int64_t at = 0, word = -1;
    for (int32_t id : ids) {
        const int32_t old = original_of ? (*original_of)[static_cast<size_t>(id)] : id;
        if (by_word && !tokenizer_impl::continues_word(vocab, old))
            ++word, at = 0;
        const int64_t base = by_word ? word << 32 : 0;
        const int64_t units = tokenizer_impl::token_units(vocab, old);
        spans.push_back({base + at, base + at + units, old});
        at += units;
    }
    return spans;
}

// Tokens of `before` with no identical token (same place, same token) in `after`.
int64_t changed_tokens(const std::vector<Span>& before, const std::vector<Span>& after)
{
    int64_t changed = 0;
    size_t j = 0;
    for (const Span& s : before) {
        while (j < after.size() && after[j].begin < s.begin)
            ++j;
        const bool same = j < after.size() && after[j].begin == s.begin && after[j].end == s.end &&
                          after[j].token == s.token;
        changed += same ? 0 : 1;
    }
    return changed;
}

// The mean, over the perplexity protocol's scored positions, of the probability the
// model puts on the dropped ids.
double mean_dropped_mass(const LanguageModel& model, const std::vector<int32_t>& ids, int64_t ctx,
                         const std::vector<int64_t>& dropped, const ProgressFn& progress)
{
    if (dropped.empty())
        return 0;
    c10::InferenceMode guard;
    const auto windows = perplexity_windows(static_cast<int64_t>(ids.size()), ctx, ctx);
    const torch::Tensor columns = torch::tensor(dropped, torch::kLong);
    double mass = 0;
    int64_t positions = 0;
    for (size_t i = 0; i < windows.size(); ++i) {
        const EvalWindow& w = windows[i];
        std::vector<int64_t> window(ids.begin() + w.start, ids.begin() + w.start + w.length);
        const torch::Tensor logits = model.logits(torch::tensor(window, torch::kLong).unsqueeze(0))[0];
        const torch::Tensor scored = logits.slice(0, w.first_scored, w.length - 1).to(torch::kDouble);
        const torch::Tensor p = torch::softmax(scored, -1).index_select(1, columns).sum(1);
        mass += p.sum().item<double>();
        positions += scored.size(0);
        report_progress(progress, static_cast<int64_t>(i + 1), static_cast<int64_t>(windows.size()));
    }
    return positions > 0 ? mass / static_cast<double>(positions) : 0;
}

Json perplexity_record(const PerplexityResult& r)
{
    Json j = {
        {"tokens", r.ids}, {"scored_tokens", r.tokens}, {"ppl", r.ppl}, {"nll_per_token", r.nll_per_token}};
    if (r.scored_bytes > 0) {
        j["scored_bytes"] = r.scored_bytes;
        j["bits_per_byte"] = r.bits_per_byte;
    }
    return j;
}

Json evaluate_trim(const fs::path& original_dir, const fs::path& trimmed_dir, const TrimVocabulary& vocab,
                   const std::vector<int32_t>& kept, const TrimOptions& options, StagedProgress& stages,
                   int64_t first_stage)
{
    const LoadedModel original = load_model(original_dir);
    const LoadedModel trimmed = load_model(trimmed_dir);
    const std::string text = read_text_file(options.eval_text);
    const auto before = original.tokenizer->encode(text);
    const auto after = trimmed.tokenizer->encode(text);
    const int64_t V = original.model->config().vocab_size;
    std::vector<uint8_t> is_kept(static_cast<size_t>(V), 0);
    for (int32_t id : kept)
        is_kept[static_cast<size_t>(id)] = 1;
    int64_t dropped_in_text = 0;
    for (int32_t id : before)
        dropped_in_text += is_kept[static_cast<size_t>(id)] ? 0 : 1;
    const int64_t changed =
        changed_tokens(token_spans(before, vocab, nullptr), token_spans(after, vocab, &kept));
    const double n = std::max<double>(1, static_cast<double>(before.size()));

    Json e = {{"text", absolute_text(options.eval_text)},
              {"text_sha256", sha256_file(options.eval_text)},
              {"tokens_original", before.size()},
              {"tokens_trimmed", after.size()},
              {"dropped_token_share", static_cast<double>(dropped_in_text) / n},
              {"changed_token_share", static_cast<double>(changed) / n}};
    if (original.model->config().is_encoder()) {
        e["note"] = "an encoder: no next-token distribution, so no perplexity, bits per byte or dropped mass";
        return e;
    }
    const int64_t ctx = options.ctx > 0 ? options.ctx : std::min<int64_t>(128, original.model->max_context());
    stages.stage(first_stage);
    PerplexityResult r0 = evaluate_perplexity(*original.model, before, {.ctx = ctx}, stages.within());
    add_bits_per_byte(r0, before, *original.tokenizer);
    stages.stage(first_stage + 1);
    PerplexityResult r1 = evaluate_perplexity(*trimmed.model, after, {.ctx = ctx}, stages.within());
    add_bits_per_byte(r1, after, *trimmed.tokenizer);
    std::vector<int64_t> dropped;
    for (int64_t id = 0; id < V; ++id)
        if (!is_kept[static_cast<size_t>(id)])
            dropped.push_back(id);
    stages.stage(first_stage + 2);
    e["ctx"] = ctx;
    e["original"] = perplexity_record(r0);
    e["trimmed"] = perplexity_record(r1);
    e["delta_ln_ppl"] = std::log(r1.ppl) - std::log(r0.ppl);
    if (r0.scored_bytes > 0 && r1.scored_bytes > 0)
        e["delta_bits_per_byte"] = r1.bits_per_byte - r0.bits_per_byte;
    e["dropped_mass_mean"] = mean_dropped_mass(*original.model, before, ctx, dropped, stages.within());
    e["protocol"] = "METHODS.md section 0 for each model on its own tokenization; perplexities over "
                    "different tokenizations are not comparable, bits per byte is; dropped_mass_mean: the "
                    "original's probability on dropped ids, mean over its scored positions";
    return e;
}

// What the trimmed model's output covers: only a head over the vocabulary loses the dropped ids.
std::string output_distribution(const ModelConfig& c)
{
    const std::string kept = "over the kept tokens only (the original's logits at the kept ids)";
    if (!c.is_encoder())
        return kept;
    if (c.encoder_head == EncoderHead::MaskedLM)
        return "masked-LM logits " + kept;
    return "none over tokens: the encoder's outputs (hidden states, pooled embeddings, class logits) keep "
           "their shape";
}

Json budget_json(const TrimOptions& o)
{
    Json j = {{"freq_text", absolute_text(o.freq_text)}, {"freq_text_sha256", sha256_file(o.freq_text)}};
    if (o.keep)
        j["keep"] = *o.keep;
    if (o.coverage)
        j["coverage"] = *o.coverage;
    if (!o.keep_tokens.empty())
        j["keep_tokens"] = absolute_text(o.keep_tokens);
    return j;
}

void check_model_directory(const fs::path& model, const fs::path& out)
{
    std::error_code ec;
    if (!fs::is_directory(model, ec))
        throw InputError(model.string() + ": trim reads a Hugging Face model directory (config.json, "
                                          "safetensors weights, tokenizer files)");
    if (is_file(model / "embedlab.json"))
        throw InputError(model.string() + ": an EmbedLab compressed directory; trim a plain model directory "
                                          "(export --format hf writes one)");
    if (!is_file(model / "config.json"))
        throw InputError((model / "config.json").string() +
                         ": missing; trim reads a Hugging Face model directory");
    if (weight_files(model).empty())
        throw InputError(model.string() + ": no .safetensors weights (trim cuts safetensors files)");
    if (fs::weakly_canonical(model, ec) == fs::weakly_canonical(out, ec))
        throw InputError(out.string() + ": the output is the input model directory; write elsewhere");
}

} // namespace

void check_trim_options(const TrimOptions& o)
{
    if (o.freq_text.empty())
        throw InputError(
            "trim: freq_text is required (the domain text whose token counts decide what is kept)");
    if (o.keep && o.coverage)
        throw InputError("trim: keep and coverage are two budgets; give one");
    if (!o.keep && !o.coverage)
        throw InputError(
            "trim: a budget is required: keep N (tokens) or coverage C (share of the text's tokens)");
    if (o.coverage && !(*o.coverage > 0 && *o.coverage <= 1))
        throw InputError(
            "trim: coverage " + short_number(*o.coverage) +
            " is outside (0, 1] (the share of the frequency text's token occurrences kept tokens cover)");
    if (o.keep && *o.keep < 1)
        throw InputError("trim: keep " + std::to_string(*o.keep) +
                         " is below 1 (the kept vocabulary's size)");
    if (o.ctx < 0)
        throw InputError("trim: ctx " + std::to_string(o.ctx) + " is negative");
    if (!is_file(o.freq_text))
        throw InputError(o.freq_text.string() + ": freq_text is not a readable file");
    if (!o.keep_tokens.empty() && !is_file(o.keep_tokens))
        throw InputError(o.keep_tokens.string() + ": keep_tokens is not a readable file");
    if (!o.eval_text.empty() && !is_file(o.eval_text))
        throw InputError(o.eval_text.string() + ": eval_text is not a readable file");
}

TrimReport trim_model(const fs::path& model, const fs::path& out, const TrimOptions& options,
                      const ProgressFn& progress)
{
    check_trim_options(options);
    check_model_directory(model, out);
    const ModelConfig config = parse_hf_config(tokenizer_impl::read_file_bytes(model / "config.json"),
                                               (model / "config.json").string());
    const int64_t V = config.vocab_size;
    const TrimVocabulary vocab = tokenizer_impl::read_trim_vocabulary(model);
    if (static_cast<int64_t>(vocab.tokens.size()) > V)
        throw InputError(model.string() + ": the tokenizer has " + std::to_string(vocab.tokens.size()) +
                         " ids, more than config.json's vocab_size " + std::to_string(V));
    const auto tokenizer = load_tokenizer_from_directory(model);
    const auto required =
        tokenizer_impl::close_over_parts(vocab, required_seeds(model, vocab, *tokenizer, options));
    const auto n_required = static_cast<int64_t>(required.size());
    if (options.keep && *options.keep < n_required)
        throw InputError("trim: keep " + std::to_string(*options.keep) + " is below the " +
                         std::to_string(n_required) + " tokens every trimmed " +
                         tokenizer_impl::trim_family_name(vocab.family) +
                         " model keeps (special tokens, the tokens that encode any text, the listed ones)");
    if (options.keep && *options.keep > V)
        throw InputError("trim: keep " + std::to_string(*options.keep) + " is above the vocabulary's " +
                         std::to_string(V) + " tokens");
    const auto freq_ids = tokenizer->encode(read_text_file(options.freq_text));
    if (freq_ids.empty())
        throw InputError(options.freq_text.string() + ": freq_text tokenizes to no tokens");
    const Frequency frequency = count_tokens(freq_ids, V, options.freq_text);
    const auto kept = choose_kept(vocab, required, frequency, options);
    const auto K = static_cast<int64_t>(kept.size());
    std::vector<int32_t> new_id(static_cast<size_t>(V), -1);
    for (size_t i = 0; i < kept.size(); ++i)
        new_id[static_cast<size_t>(kept[i])] = static_cast<int32_t>(i);
    int64_t covered = 0;
    for (int32_t id : kept)
        covered += frequency.counts[static_cast<size_t>(id)];

    const std::vector<fs::path> inputs = weight_files(model);
    const bool evaluate = !options.eval_text.empty();
    const auto n_inputs = static_cast<int64_t>(inputs.size());
    StagedProgress stages(progress, n_inputs + 1 + (evaluate ? 3 : 0));
    stages.stage(0);

    AtomicDirectory dir(out, options.overwrite);
    detail::copy_support_files(model, dir.path());
    for (const auto& [name, bytes] : tokenizer_impl::trimmed_tokenizer_files(model, vocab, kept))
        write_file_atomic(dir.path() / name, bytes);
    write_file_atomic(dir.path() / "config.json", trimmed_config(model / "config.json", new_id, K, true));
    if (is_file(model / "generation_config.json"))
        write_file_atomic(dir.path() / "generation_config.json",
                          trimmed_config(model / "generation_config.json", new_id, K, false));

    WeightsWritten weights;
    std::vector<fs::path> written;
    uint64_t bytes_before = 0, bytes_after = 0;
    for (int64_t i = 0; i < n_inputs; ++i) {
        stages.stage(1 + i);
        const fs::path target = dir.path() / inputs[static_cast<size_t>(i)].filename();
        write_trimmed_weights(inputs[static_cast<size_t>(i)], target, V, kept, weights, stages.within());
        bytes_before += fs::file_size(inputs[static_cast<size_t>(i)]);
        bytes_after += fs::file_size(target);
        written.push_back(target);
    }
    if (weights.cut.empty())
        throw InputError(model.string() + ": no tensor has the vocabulary size " + std::to_string(V) +
                         " as its first dimension (nothing to cut)");
    if (is_file(model / "model.safetensors.index.json"))
        write_trimmed_index(model / "model.safetensors.index.json",
                            dir.path() / "model.safetensors.index.json", written);

    std::vector<std::string> input_names, output_names;
    for (const auto& f : inputs)
        input_names.push_back(f.filename().string());
    for (const auto& f : written)
        output_names.push_back(f.filename().string());
    Json record;
    record["method"] = "trim";
    record["created"] = detail::utc_now();
    record["versions"] = detail::manifest_versions();
    record["source"] = {{"path", absolute_text(model)},
                        {"architecture", architecture_name(config.arch)},
                        {"files", detail::file_digests(model, input_names)}};
    record["settings"] = budget_json(options);
    record["tokenizer"] = {{"family", tokenizer_impl::trim_family_name(vocab.family)},
                           {"files", vocab.files}};
    record["vocab_size_before"] = V;
    record["kept_tokens"] = K;
    record["required_tokens"] = n_required;
    record["frequency"] = {{"tokens", frequency.total},
                           {"distinct", frequency.order.size()},
                           {"covered", static_cast<double>(covered) / static_cast<double>(frequency.total)}};
    record["tensors_cut"] = weights.cut;
    record["parameters_before"] = weights.parameters_before;
    record["parameters_after"] = weights.parameters_after;
    record["table_parameters_before"] = weights.table_parameters_before;
    record["table_parameters_after"] = weights.table_parameters_after;
    record["bytes_before"] = bytes_before;
    record["bytes_after"] = bytes_after;
    record["bytes_ratio"] = static_cast<double>(bytes_after) / static_cast<double>(bytes_before);
    record["weights_files"] = detail::file_digests(dir.path(), output_names);
    record["output_distribution"] = output_distribution(config);
    if (evaluate)
        record["evaluation"] = evaluate_trim(model, dir.path(), vocab, kept, options, stages, n_inputs + 1);
    write_file_atomic(dir.path() / "trim.json", record.dump(2) + "\n");
    report_progress(progress, 1, 1);
    dir.commit();

    TrimReport report;
    report.out = out;
    report.family = tokenizer_impl::trim_family_name(vocab.family);
    report.vocab_before = V;
    report.kept = kept;
    report.required = n_required;
    report.record = std::move(record);
    return report;
}

} // namespace embedlab
