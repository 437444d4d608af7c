// The libtorch forward pass: decoders (gpt2, and the rotary family: llama, qwen2,
// qwen3, gemma, gemma2, phi3, gpt_neox, opt) and encoders (bert, distilbert;
// model_config.hpp; pooling and framing in encoder.hpp).
//
//   auto lm = embedlab::load_model("models/tinygpt2-f16");
//   torch::Tensor ids = torch::tensor({{7454, 2402, 257}}, torch::kLong);
//   torch::Tensor logits = lm.model->logits(ids);           // [1, 3, 50257]
//
// Inference (no autograd), except training_logits() for fine-tuning (lora.hpp).
// The token embedding is an interface so that a
// compressed embedding serves the input lookup and a tied output head directly
// from its factors, without a dense V x d copy.
// Thread safety: logits() is const and may run from several threads at once;
// libtorch's intra-op pool already uses every core, so one call at a time is best.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "embedlab/model_config.hpp"
#include "embedlab/model_files.hpp"
#include "embedlab/tokenizer.hpp"
#include "embedlab/weights.hpp"

namespace embedlab {

struct LoraAdapters;
namespace onnx {
class Graph; // the ONNX export's graph (engine/src/io/onnx_graph.hpp, onnx_export.hpp)
}

// A table's rows as mu + Z P (TokenEmbedding::low_rank_factors).
struct LowRankFactors {
    torch::Tensor mu; // [d]; zeros when the rows are not centred
    torch::Tensor Z;  // [V, k]
    torch::Tensor P;  // [k, d]
    // Fitted to a table (pca, svd); false for factors drawn at random (lrf), which
    // fine-tuning --from-scratch has no fitted table to replace with.
    bool fitted = true;
};

class TokenEmbedding;

// A copy of an embedding whose weights shared by every row are fresh leaves that
// require grad (TokenEmbedding::trainable_shared_weights).
struct TrainableCopy {
    std::shared_ptr<const TokenEmbedding> embedding; // holds `tensors`
    std::vector<torch::Tensor> tensors;              // what training moves
    std::string description;                         // for the record: "the Fourier MLP (...)"
};

// Token embedding table, dense or compressed.
class TokenEmbedding {
public:
    virtual ~TokenEmbedding() = default;
    virtual int64_t vocab_size() const = 0;
    virtual int64_t dim() const = 0;
    // ids [..] int64 -> [.., d] float32
    virtual torch::Tensor lookup(const torch::Tensor& ids) const = 0;
    // Tied output head: hidden [N, d] -> logits [N, V] = hidden E^T.
    virtual torch::Tensor project(const torch::Tensor& hidden) const = 0;
    // The [V, d] rows a tied head multiplies with, when project() must rebuild them from
    // the stored values (tt, lle, fourier through its MLP): a caller making many head
    // calls on frozen weights builds them once (LanguageModel::head_rows). Undefined when
    // project() is as cheap straight from what is stored (dense, low rank).
    virtual torch::Tensor rebuilt_rows() const { return {}; }
    // Stored values (an int32 index counts as one value; METHODS 0).
    virtual int64_t parameter_count() const = 0;
    virtual std::string kind() const = 0; // "dense", "pca", ...
    // The tensors that hold it in a compressed directory, named as its stored form
    // declares them (stored_form.hpp) without the table's prefix: "pca.Z". By default
    // InputError "embedding kind '<kind>' cannot be stored as factors".
    virtual std::vector<std::pair<std::string, torch::Tensor>> stored_tensors() const;
    // Whether each row is built on its own, so rows rebuilt a block at a time are the same
    // bits as the whole table at once (tt); an export may then rebuild it in blocks.
    virtual bool rows_built_alone() const { return false; }
    // The ggml block type its rows are stored as ("q4_k"), "" for float values: a GGUF
    // export keeps a quantised table at its own type.
    virtual std::string stored_row_type() const { return {}; }
    // ONNX export (onnx_export.hpp): adds to `graph` the nodes that compute lookup(ids)
    // for int64 `ids` of any shape from the stored values, and returns the output's
    // name. Empty (the default): this embedding cannot be written as ONNX, and the
    // export refuses the model, naming kind().
    virtual std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const;
    // The tied head: hidden [N, d] -> logits [N, V] = hidden E^T. By default every row
    // is looked up in the graph (onnx_lookup of 0..V-1) when it runs, then one product:
    // the rows are rebuilt, never stored. Empty when onnx_lookup is.
    virtual std::string onnx_project(onnx::Graph& graph, const std::string& hidden) const;

    // Capabilities a method provides by overriding (issue 59): callers ask for them
    // instead of naming an embedding's class, so a new method needs no edit elsewhere.
    // The [V, d] table of a plain dense embedding; null for a compressed one.
    virtual const torch::Tensor* plain_table() const { return nullptr; }
    // Its rows as mu + Z P when it stores them so (pca, svd, lrf): LoRA then adapts Z
    // and P, and a merge folds the adapters into them. Empty by default.
    virtual std::optional<LowRankFactors> low_rank_factors() const { return std::nullopt; }
    // The same kind of embedding over other factors of low_rank_factors()'s shapes (a
    // LoRA merge, a copy for training). By default InputError: it has no such factors.
    virtual std::shared_ptr<const TokenEmbedding> with_low_rank_factors(const LowRankFactors& factors) const;
    // The table under the adapters when this wraps one (LoRA, lora.hpp); null for a table.
    virtual const TokenEmbedding* lora_base() const { return nullptr; }
    // Weights shared by every row that recovery fine-tuning may train in full (fourier:
    // its MLP), in a copy of this embedding. Empty by default: it has none.
    virtual std::optional<TrainableCopy> trainable_shared_weights() const { return std::nullopt; }
    // The tied head computed straight from stored blocks (quant's q8_0 / q4_0 rows, a
    // quarter or an eighth of the float rows' bytes): hidden [N, d] -> logits [N, V],
    // up to float summation order. Undefined when has_block_head() is false (the default).
    virtual bool has_block_head() const { return false; }
    virtual torch::Tensor block_head(const torch::Tensor& /*hidden*/) const { return {}; }
};

class DenseTokenEmbedding final : public TokenEmbedding {
public:
    explicit DenseTokenEmbedding(torch::Tensor table); // [V, d] float32
    int64_t vocab_size() const override { return table_.size(0); }
    int64_t dim() const override { return table_.size(1); }
    torch::Tensor lookup(const torch::Tensor& ids) const override;
    torch::Tensor project(const torch::Tensor& hidden) const override;
    int64_t parameter_count() const override { return table_.numel(); }
    std::string kind() const override { return "dense"; }
    std::string onnx_lookup(onnx::Graph& graph, const std::string& ids) const override;
    std::string onnx_project(onnx::Graph& graph, const std::string& hidden) const override;
    const torch::Tensor* plain_table() const override { return &table_; }
    const torch::Tensor& table() const { return table_; }

private:
    torch::Tensor table_;
};

// The table of a dense token embedding; null when `embedding` is null or compressed.
inline const torch::Tensor* dense_table(const TokenEmbedding* embedding)
{
    return embedding ? embedding->plain_table() : nullptr;
}

// Sees the activations of a forward pass (FLAT-LLM calibration). The tensors
// are only valid during the call; copy what you keep.
class ForwardObserver {
public:
    virtual ~ForwardObserver() = default;
    // x [B, T, d]: the residual stream entering / leaving decoder `layer`.
    virtual void decoder_input(int64_t /*layer*/, const torch::Tensor& /*x*/) {}
    virtual void decoder_output(int64_t /*layer*/, const torch::Tensor& /*x*/) {}
    // v [B, T, kv_heads, value_dim]: value projection outputs, bias included.
    virtual void values(int64_t /*layer*/, const torch::Tensor& /*v*/) {}
    // a [B*T, width]: the input of the MLP's down projection.
    virtual void mlp_activations(int64_t /*layer*/, const torch::Tensor& /*a*/) {}
};

// Keys and values of the positions a model has already read, per decoder layer, so
// that the next tokens are decoded without re-reading the prefix (generate.hpp):
//
//   embedlab::KvCache cache;
//   auto h = lm.hidden_states(prompt, cache);   // positions 0..P-1
//   auto g = lm.hidden_states(next, cache);     // positions P.. (next: [1, 1])
//
// Keys are held after the rotary embedding and before grouped-query repetition;
// a layer's sliding window masks old positions (they stay in the cache). One cache
// serves one model and one batch; it is not thread-safe.
class KvCache {
public:
    int64_t length() const { return length_; }
    void clear();
    // For the forward pass: layer `layer`'s keys and values [B, heads, length + T, dim]
    // after appending k [B, heads, T, hd] and v [B, heads, T, vd] at length().
    std::pair<torch::Tensor, torch::Tensor> append(int64_t layer, const torch::Tensor& k,
                                                   const torch::Tensor& v);
    // One position's keys and values as float32 rows k, v [heads * dim] (one-token steps):
    // append()'s writes without its tensors. Returns the layer's whole float32 buffers
    // [1, heads, capacity, dim]; positions after length() are not the sequence's.
    std::pair<const torch::Tensor&, const torch::Tensor&>
    append_position(int64_t layer, const float* k, const float* v, int64_t heads, int64_t dim);
    // Called once all layers appended T positions.
    void advance(int64_t T) { length_ += T; }

private:
    std::vector<torch::Tensor> keys_, values_; // [B, heads, capacity, dim], filled to length_
    int64_t length_ = 0;
};

// Parameter counts by part; a tied head is counted once (in token_embedding).
struct ParameterBreakdown {
    int64_t token_embedding = 0;
    int64_t position_embedding = 0;
    int64_t attention = 0;
    int64_t mlp = 0;
    int64_t norms = 0;
    int64_t output_head = 0; // 0 when tied
    int64_t adapters = 0;    // unmerged LoRA adapters (lora.hpp)
    int64_t total() const
    {
        return token_embedding + position_embedding + attention + mlp + norms + output_head + adapters;
    }
};

class LanguageModel {
public:
    // Validates every tensor's presence and shape against the config; throws
    // InputError naming the tensor (`label` names the model in messages).
    LanguageModel(ModelConfig config, WeightMap weights, const std::string& label);
    // A model whose token embedding is given (compressed); `weights` need not
    // hold the dense table. gpt2: `positions` likewise replaces wpe.weight when
    // given (null: wpe.weight must be in `weights`).
    LanguageModel(ModelConfig config, WeightMap weights, std::shared_ptr<const TokenEmbedding> embedding,
                  const std::string& label, std::shared_ptr<const TokenEmbedding> positions = nullptr);

    const ModelConfig& config() const { return config_; }
    const WeightMap& weights() const { return weights_; }
    const TokenEmbedding& token_embedding() const { return *embedding_; }
    std::shared_ptr<const TokenEmbedding> shared_token_embedding() const { return embedding_; }
    std::shared_ptr<const TokenEmbedding> shared_position_embedding() const { return positions_; }
    // Swap in a compressed embedding (must match V and d).
    void set_token_embedding(std::shared_ptr<const TokenEmbedding> embedding);
    // gpt2's learned position table (rows = positions), dense or compressed;
    // null for llama.
    const TokenEmbedding* position_embedding() const { return positions_.get(); }
    void set_position_embedding(std::shared_ptr<const TokenEmbedding> positions);

    // ids [B, T] int64 -> final hidden states [B, T, d] (after the last norm).
    torch::Tensor hidden_states(const torch::Tensor& ids, ForwardObserver* observer = nullptr) const;
    // ids [B, T] at positions cache.length() .. + T - 1, attending to the cached
    // positions too; appends their keys and values to `cache`.
    torch::Tensor hidden_states(const torch::Tensor& ids, KvCache& cache) const;
    // Encoders (config().is_encoder()): ids [B, T] with segment ids `token_types`
    // [B, T] (undefined: all 0) and `attention_mask` [B, T] (1 = a token, 0 = padding;
    // undefined: all tokens) -> final hidden states [B, T, d]. hidden_states(ids) is
    // this with neither. Decoders: InputError.
    torch::Tensor encoder_hidden_states(const torch::Tensor& ids, const torch::Tensor& token_types = {},
                                        const torch::Tensor& attention_mask = {},
                                        ForwardObserver* observer = nullptr) const;
    // A sequence classifier's logits [B, labels] from hidden states [B, T, d] (bert:
    // pooler then classifier; distilbert: pre_classifier, ReLU, classifier; both read
    // position 0, [CLS]). InputError for a model without that head.
    torch::Tensor classify(const torch::Tensor& hidden) const;
    // bert's pooler output tanh(W h[:, 0] + b) [B, d]; InputError without a pooler.
    torch::Tensor pooler_output(const torch::Tensor& hidden) const;
    // The same two with autograd recording, for fine-tuning a classifier: no
    // InferenceMode guard (callers hold none either).
    torch::Tensor training_encoder_hidden_states(const torch::Tensor& ids, const torch::Tensor& token_types,
                                                 const torch::Tensor& attention_mask) const;
    torch::Tensor training_classify(const torch::Tensor& hidden) const;

    // hidden [N, d] -> logits [N, V] through the output head (tied or not; an
    // encoder's masked-LM head: transform, then the tied table, plus its bias).
    torch::Tensor head(const torch::Tensor& hidden) const;
    // Issue 20 item 8: for many head calls on frozen weights (perplexity's row chunks),
    // the tied head's rebuilt rows once, then head(hidden, rows) per call. Undefined
    // (and ignored by head) for an untied head or an embedding that needs no rebuild.
    torch::Tensor head_rows() const;
    torch::Tensor head(const torch::Tensor& hidden, const torch::Tensor& rows) const;
    // Issue 63 item 3: whether the tied head reads a quant table's q8_0 or q4_0 blocks
    // directly (block_head), a quarter or an eighth of the rebuilt float rows' bytes:
    // generation's one-row heads then hold no head_rows().
    bool has_block_head() const;
    // hidden [N, d] -> logits [N, V] from those blocks; equal to head(hidden, head_rows())
    // up to float summation order. InputError when has_block_head() is false.
    torch::Tensor block_head(const torch::Tensor& hidden) const;
    // ids [B, T] -> logits [B, T, V].
    torch::Tensor logits(const torch::Tensor& ids) const;
    // The same logits with autograd recording, for training adapters: no
    // InferenceMode guard (callers hold none either).
    torch::Tensor training_logits(const torch::Tensor& ids) const;

    // LoRA adapters on the linear layers (attach_lora in lora.hpp sets these and
    // wraps the token embedding for the embedding adapters); null: none.
    void set_lora(std::shared_ptr<const LoraAdapters> adapters);
    const LoraAdapters* lora() const { return lora_.get(); }
    std::shared_ptr<const LoraAdapters> shared_lora() const { return lora_; }
    // Replaces one stored weight by a tensor of the same shape (merging adapters).
    void set_weight(const std::string& name, torch::Tensor value);
    // Once the token embedding is not a dense table (set_token_embedding with a
    // compressed one): removes the dense table from weights(), so its memory is
    // freed when no other handle holds it (issue 21's memory bound). A no-op while
    // the embedding is dense.
    void drop_dense_token_table();

    ParameterBreakdown parameter_breakdown() const;
    // Maximum window the model accepts (learned positions bound gpt2).
    int64_t max_context() const;

private:
    torch::Tensor gpt2_hidden(const torch::Tensor& ids, ForwardObserver* observer, KvCache* cache) const;
    torch::Tensor llama_hidden(const torch::Tensor& ids, ForwardObserver* observer, KvCache* cache) const;
    // engine/src/model/encoder_forward.cpp
    torch::Tensor bert_hidden(const torch::Tensor& ids, const torch::Tensor& token_types,
                              const torch::Tensor& attention_mask, ForwardObserver* observer) const;
    torch::Tensor checked_encoder_hidden(const torch::Tensor& ids, const torch::Tensor& token_types,
                                         const torch::Tensor& attention_mask,
                                         ForwardObserver* observer) const;
    torch::Tensor mlm_transform(const torch::Tensor& hidden) const;
    // x W^T + b for the weights `name`.weight / .bias, plus the adapter of that weight.
    torch::Tensor linear(const torch::Tensor& x, const std::string& name) const;
    // The config's norm of x with the weights `name`.weight (and .bias).
    torch::Tensor norm(const torch::Tensor& x, const std::string& name) const;
    torch::Tensor checked_hidden(const torch::Tensor& ids, ForwardObserver* observer,
                                 KvCache* cache = nullptr, const torch::Tensor& token_types = {},
                                 const torch::Tensor& attention_mask = {}) const;
    // rows: head_rows() (defined only for a tied head that rebuilds its rows).
    torch::Tensor unguarded_head(const torch::Tensor& hidden, const torch::Tensor& rows = {}) const;
    // y + scale (x A^T) B^T when an adapter for `target` is attached, else y.
    torch::Tensor adapted(torch::Tensor y, const torch::Tensor& x, const std::string& target) const;
    const torch::Tensor& w(const std::string& name) const;

    ModelConfig config_;
    WeightMap weights_;
    std::shared_ptr<const TokenEmbedding> embedding_;
    std::shared_ptr<const TokenEmbedding> positions_;
    std::shared_ptr<const LoraAdapters> lora_;
};

struct LoadOptions {
    // llama2.c checkpoints: tokenizer.bin path; default: tokenizer.bin or
    // tok<V>.bin beside the checkpoint.
    std::optional<std::filesystem::path> tokenizer;
    bool need_tokenizer = true; // false: load weights even if no tokenizer is found
    // Compressed directories: check model.safetensors against the sha256 that
    // embedlab.json records (one extra read of the file).
    bool verify = true;
    // ShapesOnly (model_files.hpp): a model to count, not to run (inspect).
    WeightValues values = WeightValues::Load;
};

struct LoadedModel {
    ModelFiles files; // config and provenance; weights moved into `model`
    std::unique_ptr<LanguageModel> model;
    std::unique_ptr<Tokenizer> tokenizer; // null only if need_tokenizer was false
    std::filesystem::path tokenizer_path; // empty for embedded vocabularies
};

// MODEL: a Hugging Face directory, a .gguf or a llama2.c .bin.
LoadedModel load_model(const std::filesystem::path& model, const LoadOptions& options = {});

// The tokenizer that goes with already-read model files (what load_model uses);
// sets *tokenizer_path when the tokenizer comes from a file of its own.
std::unique_ptr<Tokenizer> load_model_tokenizer(const ModelFiles& files, const LoadOptions& options,
                                                std::filesystem::path* tokenizer_path = nullptr);

// Hex sha256 of a file's bytes, read in 1 MiB blocks.
std::string sha256_file(const std::filesystem::path& file);

// Process start-up: libtorch uses every core (EMBEDLAB_THREADS overrides) and
// glibc keeps large freed blocks for reuse. Call once from main(). InputError
// when EMBEDLAB_THREADS is set to anything but thread_count_setting accepts.
void init_runtime();

// The thread count for EMBEDLAB_THREADS = `value` (nullptr: unset, use every core):
// a whole number from 1 to 4 x `cores`, else InputError saying what is allowed.
int thread_count_setting(const char* value, int cores);

// First thing in main(), before any thread starts: when OMP_WAIT_POLICY is
// unset, sets it to PASSIVE and re-executes this program (/proc/self/exe, same
// arguments), because libgomp reads it once, while the program loads. Why:
// libtorch's elementwise work runs on OpenMP threads, its matrix products on
// OpenBLAS's own threads, and libgomp's default idle threads spin on the cores
// OpenBLAS then needs (2 cores: tinyllama evaluated at 3,300-4,900 tokens/s
// instead of 10,700). Costs one more start-up (about 0.35 s). Returns when the
// variable is already set (the user's choice is kept) or exec failed.
void restart_with_passive_openmp(char** argv);

// OMP_WAIT_POLICY as libgomp read it: "PASSIVE", the user's value, or
// "default (spinning)".
std::string openmp_wait_policy();

} // namespace embedlab
