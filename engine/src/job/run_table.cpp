// The token-table methods' part of a compression run (compression_unit.hpp), one for
// every TableMethod: the lle family's frequency text, the fit of the table (and gpt2's
// position table), --store, the accounting in the model's context, LoRA recovery, the
// record and the stored form (save_compressed_model; with LoRA, as finetune writes it).
#include <cmath>

#include "embedlab/compressed_model.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/finetune.hpp"
#include "embedlab/lora.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/table_method.hpp"
#include "embedlab/tensor_train.hpp"
#include "embedlab/tokenizer.hpp"
#include "job/compression_unit.hpp"

namespace embedlab {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;
using run_steps::RunInputs;
using run_steps::StagedProgress;
using run_steps::Training;

namespace {

// The bytes of a compressed table's tensors as an export writes them: the stored
// types' blocks where --store chose one, every other factor at its own width.
double written_factor_bytes(const CompressedEmbedding& c, const std::string& prefix)
{
    double bytes = 0;
    for (const auto& [name, stored] : c.stored_tensors)
        bytes += static_cast<double>(stored.numel() * static_cast<int64_t>(stored.element_size()));
    for (const auto& [name, t] : embedding_factor_tensors(*c.embedding, prefix))
        if (!c.stored_types.contains(name))
            bytes += static_cast<double>(t.numel() * static_cast<int64_t>(t.element_size()));
    return bytes;
}

CompressionSpec embedding_spec(const CompressionRequest& r, const MethodDescriptor& m, const LoadedModel& lm,
                               std::shared_ptr<const FrequencySplit> split)
{
    CompressionSpec spec = table_spec(r, lm.model->config().embedding_dim());
    spec.split = std::move(split);
    spec.unk_id = m.needs_frequency_text && lm.tokenizer ? lm.tokenizer->unk_id().value_or(-1) : -1;
    return spec;
}

std::string embedding_parameters(const CompressedEmbedding& c, const MethodDescriptor& m)
{
    return table_method(m.name).parameters(c.spec) + (c.spec.store.empty() ? "" : ", stored " + c.spec.store);
}

Json recover(CompressionRun& run, const Training& t, const ProgressFn& progress)
{
    const auto& r = run.request;
    auto& model = *run.model.model;
    const LoraOptions lora{
        .rank = r.lora_rank, .alpha = 2.0 * static_cast<double>(r.lora_rank), .seed = r.seed};
    // A fourier table trains its own MLP (PETE keeps no per-token parameters), as
    // finetune does; every other table gets its factors or row adapter trained.
    const bool fourier_mlp = method_descriptor(r.method).recovery_trains_table_network;
    const Trainable trainable = fourier_mlp ? prepare_fourier_mlp_recovery(model, lora)
                                            : prepare_recovery(model, lora, /*from_scratch=*/false);
    const auto result = train_next_token(
        model, trainable.params, t.ids, t.options,
        [&](const TrainStep& s) { return !progress || progress(s.step, s.steps); }, r.train_text);
    Json record = {{"mode", trainable.description["mode"]},
                   {"method", model.token_embedding().kind()},
                   {"trains", trainable.description["trains"]},
                   {"frozen", trainable.description["frozen"]},
                   {"lora", trainable.description["lora"]},
                   {"training", training_json(result, r.train_text, sha256_file(r.train_text), t.ids.size())},
                   {"by", "EmbedLab experiment API (LoRA recovery of a compressed embedding)"}};
    record["training"]["ids_from"] = t.first_id; // the evaluated ids come before
    if (fourier_mlp)                             // the trained MLP is the table an export writes
        run.embedding->embedding = model.shared_token_embedding();
    return record;
}

// --store (issue 38): the factors as the directory will hold them, evaluated so.
std::optional<StoredFactorBytes> store_run_factors(CompressionRun& run, const CompressionSpec& spec,
                                                   const torch::Tensor& table)
{
    if (spec.store.empty())
        return std::nullopt;
    const auto& config = run.model.model->config();
    auto stored = store_factors(*run.embedding, config);
    auto& c = *run.embedding;
    c.reconstruction = measure_reconstruction(table, *c.embedding);
    c.fit["stored"] = {{"type", spec.store},
                       {"tensors", c.stored_types},
                       {"note", "the fit's own figures are of the float32 factors; reconstruction is of "
                                "the stored ones, read back"}};
    if (run.positions)
        store_factors(*run.positions, config, /*positions=*/true);
    return stored;
}

// The table's accounting in the model's context: the tied head, the energy model, the
// input's storage and the stored bytes, positions in eta_emb (issue 20).
void account_table(CompressionRun& run, const CompressionRequest& request,
                   const std::optional<StoredFactorBytes>& stored)
{
    const auto& model = *run.model.model;
    const auto breakdown = model.parameter_breakdown();
    auto& accounting = run.embedding->accounting;
    apply_model_context(accounting, model.config().tied_embeddings, breakdown.position_embedding);
    apply_energy(accounting, request_energy(request));
    // Factors are float32; quant's values take its type's bits (the fit records them).
    apply_storage(accounting, token_embedding_stored_type(run.model.files),
                  accounting.bits_per_value_after > 0 ? accounting.bits_per_value_after : 32);
    if (stored && accounting.bits_per_value_before > 0) { // the stored tensors' own bytes
        const int64_t values = accounting.params_after - accounting.index_values;
        accounting.bits_per_value_after = values > 0 ? 8.0 * static_cast<double>(stored->values) / values : 0;
        accounting.index_bytes = stored->ids;
        accounting.bytes_after = static_cast<double>(stored->values + stored->ids);
        accounting.bytes_ratio = accounting.bytes_after / accounting.bytes_before;
    }
    if (run.positions) {
        const auto& p = run.positions->accounting;
        accounting.eta_emb_with_positions =
            static_cast<double>(accounting.params_before - accounting.params_after + p.params_before -
                                p.params_after) /
            static_cast<double>(accounting.params_before + p.params_before);
    }
}

// The lle family's text: the common/rare split and the examples V_C's coverage is of.
struct FrequencyInputs {
    std::optional<FrequencyText> freq;
    std::vector<std::string> coverage_examples; // coverage_data's examples
};

// The lle family's records: the frequency text and V_C's coverage of a dataset.
void record_frequency_text(CompressionRun& run, const CompressionRequest& request, const FrequencyInputs& in)
{
    if (!in.freq)
        return;
    run.extra["frequency_text"] = in.freq->json();
    if (request.coverage_data.empty())
        return;
    const auto cov = coverage_of_examples(*in.freq->split, *run.model.tokenizer, in.coverage_examples);
    run.extra["example_coverage"] = {{"task", request.coverage_task},
                                     {"data", request.coverage_data},
                                     {"examples", cov.examples},
                                     {"tokens", cov.tokens},
                                     {"token_coverage", cov.token_coverage},
                                     {"example_coverage", cov.example_coverage}};
}

// LoRA recovery (METHODS 1) of the compressed table, counted in the summary.
void recover_table(CompressionRun& run, const CompressionRequest& request, const Training& training,
                   const torch::Tensor& table, const StagedProgress& bar)
{
    const auto& model = *run.model.model;
    RunSummary& s = run.summary;
    run.recovery = recover(run, training, bar.stage("train"));
    s.parameters += " + LoRA r " + std::to_string(request.lora_rank) + ", " +
                    std::to_string(request.lora_steps) + " steps";
    // METHODS 0: unmerged adapters are stored values (an export keeps them beside the table).
    s.params_after += model.parameter_breakdown().adapters;
    s.bytes_after += 4.0 * static_cast<double>(model.parameter_breakdown().adapters); // float32
    // Issue 20 item 3: the recorded reconstruction is the recovered table's (with dZ, dP);
    // the fit's spectrum describes the original table and the start of training.
    auto& c = *run.embedding;
    c.fit["before_recovery"] = {
        {"reconstruction", reconstruction_json(c.reconstruction)},
        {"note", "reconstruction of the table before LoRA recovery; the eigenvalues and explained "
                 "variance here are the original table's and the fit's before training"}};
    c.reconstruction = measure_reconstruction(table, model.token_embedding());
    s.mean_cosine = c.reconstruction.mean_cosine;
}

// The summary's figures of the fitted table (before any recovery).
void summarise_table(CompressionRun& run, const MethodDescriptor& m)
{
    RunSummary& s = run.summary;
    s.part = "token_embedding";
    s.parameters = embedding_parameters(*run.embedding, m) + (run.positions ? " + positions" : "");
    s.params_before = run.embedding->accounting.params_before;
    s.params_after = run.embedding->accounting.params_after;
    if (const auto& a = run.embedding->accounting; a.bytes_after > 0)
        s.bytes_before = a.bytes_before, s.bytes_after = a.bytes_after;
    s.mean_cosine = run.embedding->reconstruction.mean_cosine;
}

// One run of a table method: its frequency text read, and the original model kept for
// the divergence once the table is replaced.
class TableFit final : public MethodFit {
public:
    TableFit(const CompressionRequest& request, const LoadedModel& lm)
        : request_(request), method_(method_descriptor(request.method))
    {
        if (method_.needs_frequency_text)
            texts_.freq = read_frequency_text(request.freq_text, *lm.tokenizer, lm.model->config().vocab_size,
                                              request.keep_ratio);
        if (!request.coverage_data.empty())
            texts_.coverage_examples = task_texts(request.coverage_task, request.coverage_data);
    }

    double fit_work(const CompressionRequest& request, const ModelConfig& c) const override
    {
        return table_method(method_.name).fit_work(request, double(c.vocab_size), double(c.hidden_size));
    }

    // Fit, store, account, put into the model, recover; the summary's part of it.
    void fit(CompressionRun& run, const RunInputs& in, const StagedProgress& bar) override
    {
        auto& model = *run.model.model;
        const torch::Tensor table = dense_token_table(run); // a handle: the model drops its table next
        const CompressionSpec spec =
            embedding_spec(request_, method_, run.model, texts_.freq ? texts_.freq->split : nullptr);
        run.embedding = compress_table(table, spec, model.parameter_breakdown().total(),
                                       bar.stage("compress " + spec.method));
        if (request_.positions)
            run.positions =
                compress_table(model.weights().at("wpe.weight"), spec, 0, bar.stage("compress positions"));
        account_table(run, request_, store_run_factors(run, spec, table));
        if (request_.divergence)
            original_ = std::make_unique<LanguageModel>(model.config(), model.weights(),
                                                        model.shared_token_embedding(), "the original",
                                                        model.shared_position_embedding());
        model.set_token_embedding(run.embedding->embedding);
        if (!in.training) // the dense table is freed at the end of this call (LoRA measures against it)
            model.drop_dense_token_table();
        if (run.positions)
            model.set_position_embedding(run.positions->embedding);
        record_frequency_text(run, request_, texts_);
        summarise_table(run, method_);
        if (in.training)
            recover_table(run, request_, *in.training, table, bar);
    }

    const LanguageModel& reference(const CompressionRun& run) const override
    {
        return original_ ? *original_ : *run.model.model;
    }

    // The export keeps the other weights at the input's dtype.
    double model_bytes_after(const CompressionRun& run, double before, double bits) const override
    {
        const RunSummary& s = run.summary;
        double after = before - s.bytes_before + s.bytes_after;
        // gpt2's --positions: the export writes the position table's factors in place of
        // wpe.weight, so its bytes are replaced too (issue 62 item 5).
        if (run.positions) {
            const auto& config = run.model.model->config();
            after += written_factor_bytes(*run.positions, "wpe.") -
                     static_cast<double>(config.max_positions * config.hidden_size) * bits / 8;
        }
        return after;
    }

    void record_evaluation(CompressionRun& run) const override
    {
        if (texts_.freq && !request_.eval_text.empty()) {
            const auto cov =
                coverage_of(*texts_.freq->split, *run.model.tokenizer, read_text_file(request_.eval_text));
            run.evaluation["coverage"] = {{"token_coverage", cov.token_coverage},
                                          {"line_coverage", cov.line_coverage},
                                          {"tokens", cov.tokens},
                                          {"lines", cov.lines}};
        }
        // TensorSLM Fig. 2a's trade-off: perplexity cost per share of the table removed.
        if (run.embedding->accounting.eta_emb > 0)
            run.evaluation["delta_ln_ppl_per_eta_emb"] =
                run.summary.delta_ln_ppl / run.embedding->accounting.eta_emb;
    }

private:
    const torch::Tensor& dense_token_table(const CompressionRun& run) const
    {
        const auto& model = *run.model.model;
        const auto* dense = dense_table(&model.token_embedding());
        if (!dense)
            throw InputError(request_.model + ": the token embedding is not a dense table (" +
                             model.token_embedding().kind() + "); use the original model");
        return *dense;
    }

    CompressionRequest request_;
    const MethodDescriptor& method_;
    FrequencyInputs texts_;
    std::unique_ptr<LanguageModel> original_; // for the divergence (its weights are shared handles)
};

// A LoRA run is written as finetune writes it: the table as stored, its adapters beside it.
Json save_recovered(const CompressionRun& run, const fs::path& out, const ProgressFn& progress)
{
    const auto base_dir = out / "compressed";
    save_compressed_model(run.model, *run.embedding, base_dir, {.extra = run.extra});
    auto base = load_model(base_dir, {.need_tokenizer = false});
    if (auto adapters = run.model.model->shared_lora()) // the trained adapters on the table as stored
        attach_lora(*base.model, std::move(adapters));
    Json manifest = save_finetuned_model(
        base, *base.model, out, {.overwrite = true, .lora = run.recovery["lora"], .finetune = run.recovery},
        progress);
    // The intermediate directory went with the swap: record where the table came from instead.
    manifest["finetuned_from"] = {{"model", fs::absolute(run.model.files.path).lexically_normal().string()},
                                  {"compressed", run.summary.method + " " + run.summary.parameters},
                                  {"note", "compressed and fine-tuned in one run (experiment API)"}};
    // This run measured the recovered table against the original: not stale.
    manifest.erase("before_finetuning");
    manifest["reconstruction"] = reconstruction_json(run.embedding->reconstruction);
    manifest["fit"] = run.embedding->fit;
    if (!run.evaluation.is_null())
        manifest["evaluation"] = run.evaluation;
    write_file_atomic(out / "embedlab.json", manifest.dump(1) + "\n");
    return manifest;
}

class TableUnit final : public CompressionUnit {
public:
    CompressedPart part() const override { return CompressedPart::TokenEmbedding; }

    std::unique_ptr<MethodFit> begin(const CompressionRequest& request, const LoadedModel& lm,
                                     const RunInputs&) const override
    {
        return std::make_unique<TableFit>(request, lm);
    }

    const LanguageModel& compressed_model(const CompressionRun& run) const override
    {
        return *run.model.model;
    }

    void record(const CompressionRun& run, Json& j) const override
    {
        if (!run.embedding)
            return;
        j["method"] = run.embedding->spec.method;
        j["spec"] = spec_json(run.embedding->spec);
        j["accounting"] = accounting_json(run.embedding->accounting);
        j["reconstruction"] = reconstruction_json(run.embedding->reconstruction);
        j["fit"] = run.embedding->fit;
        j["fit"]["seconds"] = run.embedding->fit_seconds; // as embedlab.json has it
    }

    void check_export(const CompressionRun& run, const fs::path& dir,
                      const ExportOptions& options) const override
    {
        if (options.dense && !run.recovery.is_null())
            throw InputError(dir.string() + ": a LoRA run is written with its adapters stored beside "
                                            "the table, as finetune writes it; it has no dense/ export");
    }

    Json save(const CompressionRun& run, const fs::path& out, const ExportOptions& options,
              const ProgressFn& progress) const override
    {
        if (!run.recovery.is_null())
            return save_recovered(run, out, progress);
        SaveCompressedOptions save{.dense = options.dense, .overwrite = true, .evaluation = run.evaluation};
        save.positions = run.positions ? &*run.positions : nullptr;
        save.extra = run.extra;
        return save_compressed_model(run.model, *run.embedding, out, save, progress);
    }
};

} // namespace

const CompressionUnit& table_compression_unit()
{
    static const TableUnit unit;
    return unit;
}

} // namespace embedlab
