// embedlab.Model: a loaded model (embedlab.load) or a run's compressed one (Run.model),
// kept alive by whatever owns it. Every method wraps an engine call; none computes.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include <pybind11/pybind11.h>

#include "embedlab/model.hpp"

namespace embedlab::python {

namespace py = pybind11;

// A loaded f16/bf16 model's matrices as stored (load_model_for_generation), which
// generate() reads by default as embedlab-cli generate does; loaded on first use and
// released with the Model. Thread safety: `mutex` guards `tried` and `loaded`.
struct HalfGeneration {
    std::filesystem::path path;
    LoadOptions options;
    // The float32 model it stands for: a with_table copy of the Model (another table) is not.
    const LanguageModel* float_model = nullptr;
    std::mutex mutex;
    bool tried = false;                        // loaded once (loaded stays null without half weights)
    std::shared_ptr<const LoadedModel> loaded; // null: generate reads the float32 model
};

struct Model {
    std::shared_ptr<const void> owner; // a LoadedModel or a CompressionRun
    const LanguageModel* lm = nullptr;
    const Tokenizer* tokenizer = nullptr; // null: loaded without one (tokenize refuses)
    const ModelFiles* files = nullptr;
    std::string path;
    std::string tokenizer_option; // load's tokenizer=, for a compress() of this model
    std::string run_source;       // a run's model: the model the run compressed ("" otherwise)
    bool verify = true;           // load's verify=, for pickling
    // Why it cannot be pickled by its path ("" when it can): a run's model or with_table's.
    std::string unpicklable;
    // Set by load() when the files hold f16/bf16 weights; null for a run's model.
    std::shared_ptr<HalfGeneration> half_generation;

    // The model, or InputError once close() (the end of a with block) released it.
    const LanguageModel* live() const;
    // Releases this handle's share of the model (arrays already returned stay valid).
    // Not while another thread's call on this handle runs: close after it returns.
    void close();
};

// An argument that must be a Model (compare=, reference=): TypeError naming `what` otherwise.
const Model& model_arg(const py::handle& value, const std::string& what);

Model load(const py::object& path_like, const py::object& tokenizer, bool verify);
void bind_model(py::module_& m);
// The encoder calls (encoder.cpp), added to the bound Model class.
void bind_encoder(py::module_& m);
// with_table and token_losses (tables.cpp), added to the bound Model class.
void bind_tables(py::module_& m);
// logits, hidden_states and loglikelihood (arrays.cpp), added to the bound Model class.
void bind_arrays(py::module_& m);
// ", encoder, head classification (negative, positive), pooling cls" for Model's repr; "" for decoders.
std::string encoder_repr(const ModelConfig& config);

} // namespace embedlab::python
