// The request half of the experiment API (experiment.hpp): what one compression
// run is asked to do, the registry of methods, and the request's JSON form, which
// is also the "compress" job of `embedlab-cli worker` / `remote run` (job.hpp).
// Torch-free, so the job checker and its fuzzer reach every check.
//
//   auto r = embedlab::request_from_json(nlohmann::ordered_json::parse(
//       R"({"model": "m", "method": "lle", "freq_text": "t.txt", "keep_ratio": 0.5, "k": 8})"));
//   embedlab::check_request(r, /*d=*/768);        // InputError naming the first bad field
//   embedlab::request_json(r);                    // back to the same JSON
//
// Thread safety: everything here is a pure function of its arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/method_registry.hpp"
#include "embedlab/model_config.hpp"

namespace embedlab {

struct CompressionRequest;
// Whether a flat request compresses the MLP (Nystrom): compress_mlp, or a target
// ratio under the registry's default (target_compresses_mlp) without no_mlp.
bool request_compresses_mlp(const CompressionRequest& r);

// One compression run: the model, the method and its options, what it is
// evaluated on and how. Fields that do not apply to the method stay at their
// defaults (request_json leaves them out; check_request refuses them set).
struct CompressionRequest {
    std::string model;     // directory or file
    std::string tokenizer; // "": the model's own (llama2.c: tokenizer.bin beside it)
    std::string method;

    // pca, svd (METHODS 1)
    int64_t rank = 0;
    // tt (METHODS 5): factors of d (empty: the most balanced 3-factor shape) and
    // inner ranks r_0..r_N, or eps in (0, 1) choosing them.
    std::vector<int64_t> shape, ranks;
    double eps = 0;
    // tucker (METHODS 5's baseline): the same shape (required) and ranks r_1..r_N, one
    // per mode, 1 <= r_k <= I_k (no boundary 1s).
    // tt eps: every token its own ranks (TensorSLM eq. 14), or true: one rank set
    // for all, each position's largest any token needs (JSON "uniform_ranks").
    bool uniform_ranks = false;
    // pca, svd, tt on gpt2: also the learned position table.
    bool positions = false;
    // pca, svd, tt: TensorSLM's energy model (METHODS 5): nu per memory access, tau per
    // operation, or a Table 1 device preset ("raspberry-pi-5", "a100-server") instead.
    double nu = 5.0, tau = 1.0;
    std::string device;
    int64_t energy_tokens = 50; // l, the text length of eqs. 2-5 (CLI --tokens)

    // lle, lle-unk, lle-pca (METHODS 2)
    std::string freq_text;
    double keep_ratio = 1.0;
    int64_t k = 0; // lle: neighbours; lle-pca: basis size
    double reg = 1e-3;
    // lle: the neighbour search, "exact" or "ivf" (an inverted-file index of k-means
    // lists, partial_sparse.hpp) with nlist lists and nprobe searched per rare row
    // (0: automatic); seed seeds its k-means and recall sample.
    std::string knn = "exact";
    int64_t nlist = 0, nprobe = 0;
    // Coverage of a dataset by V_C per example (LLE paper Tables 5, 6): a task
    // ("sst2", "mc", "stsb") and its file; both or neither.
    std::string coverage_task, coverage_data;

    // fourier (METHODS 4)
    std::string mlp = "linear"; // "linear" | "geglu"
    double hidden_ratio = 0.25;
    bool norm = false;
    std::string loss = "mse"; // "mse" | "cosine"
    int64_t steps = 0;
    // The fit's learning rate and rows per step; 0: the method's own default (fourier
    // 1e-3 and 4096; aq the official code's 1e-4 and 64).
    double lr = 0;
    int64_t fit_batch = 0;
    double weight_decay = 0.01;

    // quant (issue 38): a ggml block type as llama-quantize names it ("q8_0", "q4_k", "f16").
    std::string type;
    // aq (issue 38): M codebooks of K codewords (the LLE paper's Shu and Nakayama setting);
    // steps, lr, fit_batch and seed as fourier's.
    int64_t codebooks = 32;
    int64_t codewords = 16;
    // aq's training as the official code's (issue 62): the gradients' global norm bound (0:
    // none) and the held-out rows that pick the checkpoint (0: the last step's codes).
    double clip = 0.001;
    int64_t holdout = 640;
    // Every other token-table method (issue 38 part 2): the type its float factors are
    // stored at, "f32" ("": f32), "f16", "bf16" or a ggml block type; a factor whose rows
    // the type's blocks do not divide stays f32. Evaluated as stored.
    std::string store;

    // flat (METHODS 3)
    double remaining = 0;            // average remaining value rank ratio, (0, 1]
    double target_ratio = 0;         // or: the decoder weights' share to keep (remaining_for_target)
    std::string allocation = "iprs"; // "iprs" | "uniform"
    bool compress_mlp = false;       // Nystrom MLP compression (see request_compresses_mlp)
    bool no_mlp = false;             // with target_ratio: keep the MLP dense (JSON "no_mlp")
    double mlp_lambda = 1.0;
    // "sequential" (each layer's covariances from the model compressed up to it, as the
    // reference's prune_flatllm) or "parallel" (all from the uncompressed model).
    std::string calibration = "sequential";
    // Sequential calibration's MLP covariance of layer l: "reference" (from the pass that
    // sums layer l's value covariances, layer l still uncompressed, as prune_flatllm) or
    // "after_attention" (from a further pass with layer l's attention narrowed).
    std::string mlp_calibration = "reference";
    std::string calib_text;
    int64_t samples = 128, seqlen = 0; // seqlen 0: min(256, the model's context)

    // LoRA recovery (METHODS 1) of a compressed token embedding: adapters of rank
    // lora_rank (alpha 2 rank) trained lora_steps steps on train_text. When that
    // is the evaluation text, only the ids after the evaluated ones are used.
    int64_t lora_rank = 0, lora_steps = 100;
    std::string train_text;

    // Evaluation (METHODS 0): a text, or token ids, or neither (no evaluation);
    // only the first eval_tokens ids (0: all).
    std::string eval_text;
    std::vector<int32_t> eval_ids;
    bool has_eval_ids = false; // eval_ids given (possibly empty: refused)
    int64_t eval_tokens = 0;
    int64_t ctx = 0, stride = 0, batch = 0; // ctx 0: min(128, the model's context)
    // Also measure the compressed model's divergence from the original over the same
    // scored tokens (KL(P_original || P_model), top-1 agreement; eval.hpp).
    bool divergence = false;
    // A zero-shot task run on the compressed model after the evaluation (tasks.hpp):
    // "sst2" or "mc" and its file (both or neither), on its first task_limit examples
    // (0: all). The original's accuracy on the same examples is recorded beside it.
    std::string task, task_data;
    int64_t task_limit = 0;

    uint64_t seed = 0; // fourier fit, calibration windows, LoRA training, lle ivf

    // The values given for methods' own fields (MethodField), by name; a field not
    // here has its default (request_field_value).
    std::map<std::string, nlohmann::ordered_json> method_fields;

    bool evaluates() const { return !eval_text.empty() || has_eval_ids; }
};

// The request as JSON (fields that differ from the defaults, plus model and method).
nlohmann::ordered_json request_json(const CompressionRequest& request);
// Reads the fields of a request from a JSON object (a job may carry more: kind,
// out, dense, force, measure). InputError("job: ...") naming a mistyped or
// out-of-range field, an unknown method, or a field the method does not take.
CompressionRequest request_from_json(const nlohmann::ordered_json& json);
// The request's JSON field names (the built-in ones, then every registered method's own
// fields), and those naming input files (uploaded to a host).
const std::vector<std::string>& request_fields();
// A field's JSON type (RequestFieldType, method_registry.hpp). InputError for an unknown name.
RequestFieldType request_field_type(const std::string& name);
// Sets one field from its JSON value with request_from_json's type checks (InputError
// "job: \"<name>\" must be ..."); the ranges are check_request's.
void set_request_field(CompressionRequest& request, const std::string& name,
                       const nlohmann::ordered_json& value);
// A field's value as JSON (of a default request: its default). InputError for an unknown name.
nlohmann::ordered_json request_field_value(const CompressionRequest& request, const std::string& name);
const std::vector<std::string>& request_input_fields();
// A field's own doc (label, help, range, choices; FieldDoc). InputError for an unknown name.
const FieldDoc& default_field_doc(const std::string& name);
// The doc of `field` as `method` takes it: its override in method.field_docs, else the default.
const FieldDoc& method_field_doc(const MethodDescriptor& method, const std::string& field);
// The range as help prints it for width d (0: unknown): "1..768", "(0, 1]",
// "0 (off) or 1..d", "linear|geglu"; "" for a field with neither range nor choices.
std::string field_range_text(const FieldDoc& doc, int64_t d = 0);
// Whether `value` (a field's JSON value) lies in the doc's range or choices for width d.
bool field_value_allowed(const FieldDoc& doc, const nlohmann::ordered_json& value, int64_t d);

// Checks a request without the file system: method, every option's range and
// which options the method takes. d > 0 also checks ranks, k and shapes against
// the model's hidden size. InputError "<label>: <field> ..." for the first problem;
// a front end passes field_name to name its own spelling (the CLI: "rank" -> "--rank").
using FieldName = std::function<std::string(const std::string& field)>;
void check_request(const CompressionRequest& request, int64_t d = 0, const std::string& label = "request",
                   const FieldName& field_name = {});

// Whether each registry method applies to a model of `config`, and why not.
struct MethodApplicability {
    std::string method;
    bool applies = true;
    std::string reason; // empty when it applies
};
std::vector<MethodApplicability> method_applicability(const ModelConfig& config);

// A setting a method picks from a model's own table, for a front end to offer as the
// method's default (table_method.hpp's default_from_table: the workbench's tt eps).
struct TableDefault {
    CompressionRequest request;      // the base request with the picked fields set
    std::string how;                 // a sentence saying what was picked, and from what
    nlohmann::ordered_json measured; // the figures the pick rests on (tt: eps, sample_ratio, sample_rows)
};
// Whether `method` is a table method that picks a default from the table (false for
// any other name), so a front end knows whether to load a table for it.
bool picks_default_from_table(const std::string& method);

// The request in a few words, e.g. "lle keep 0.5, k 8 + LoRA r 8, 100 steps".
std::string describe_request(const CompressionRequest& request);

} // namespace embedlab
