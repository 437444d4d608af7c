// embedlab.Model's methods: the engine's tokenizer, forward pass and evaluations, with
// the same fields as the CLI's eval, task and eval --reference JSON.
#include <torch/types.h>

#include "model.hpp"

#include <chrono>
#include <optional>

#include <pybind11/stl.h>

#include "convert.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/onnx_export.hpp"
#include "embedlab/tasks.hpp"
#include "progress.hpp"

namespace embedlab::python {

namespace {

const Tokenizer& tokenizer_of(const Model& m, const std::string& what)
{
    m.live();
    if (!m.tokenizer)
        throw InputError(what + ": " + m.path + " was loaded without a tokenizer");
    return *m.tokenizer;
}

// text= or ids=, exactly one, as the ids the model reads.
std::vector<int32_t> input_ids(const Model& m, const py::object& text, const py::object& ids,
                               const std::string& what)
{
    if (text.is_none() == ids.is_none())
        throw InputError(what + ": give exactly one of text= or ids=");
    if (!text.is_none())
        return tokenizer_of(m, what).encode(str_arg(text, what + ": text"));
    return token_ids(ids, m.live()->config().vocab_size, what);
}

// `context`: the model's (and the reference's) context, which ctx may not exceed.
PerplexityOptions window_options(const std::vector<int32_t>& ids, int64_t ctx, std::optional<int64_t> stride,
                                 int64_t batch, int64_t context, const std::string& what)
{
    if (ids.size() < 2)
        throw InputError(what + ": the input has " + std::to_string(ids.size()) +
                         " token(s); perplexity needs at least 2");
    // Checked here to name the keywords (the engine's messages name eval's flags).
    if (ctx < 1)
        throw InputError(what + ": ctx must be at least 1, got " + std::to_string(ctx));
    if (ctx > context)
        throw InputError(what + ": ctx=" + std::to_string(ctx) + " exceeds the " + std::to_string(context) +
                         "-token context the model was trained for");
    const int64_t s = stride.value_or(ctx);
    if (s < 1 || s > ctx)
        throw InputError(what + ": stride must be between 1 and ctx (" + std::to_string(ctx) + "), got " +
                         std::to_string(s));
    if (batch < 0)
        throw InputError(what + ": batch must be 0 (automatic) or more, got " + std::to_string(batch));
    return {.ctx = ctx, .stride = s, .batch_windows = batch};
}

py::object perplexity(const Model& m, const py::object& text, const py::object& ids, int64_t ctx,
                      std::optional<int64_t> stride, int64_t batch, const py::object& callback)
{
    const auto input = input_ids(m, text, ids, "perplexity");
    // An encoder: the engine's refusal first (it has no next-token perplexity at any ctx).
    const auto context = m.live()->config().is_encoder() ? INT64_MAX : m.live()->max_context();
    const auto options = window_options(input, ctx, stride, batch, context, "perplexity");
    PythonProgress progress(callback, "perplexity: progress");
    auto r = without_gil(
        progress, [&] { return evaluate_perplexity(*m.live(), input, options, progress.plain("eval")); });
    if (m.tokenizer) // bits per byte compares texts tokenized differently (issue 60)
        add_bits_per_byte(r, input, *m.tokenizer);
    nlohmann::ordered_json j{{"model", m.path}, {"input_kind", text.is_none() ? "ids" : "text"}};
    j.update(perplexity_json(r));
    j["embedding"] = m.live()->token_embedding().kind();
    return to_python(j);
}

py::object export_onnx_to(const Model& m, const py::object& path_like, bool with_past, bool external_data,
                          bool overwrite, const py::object& callback)
{
    const auto out = path_arg(path_like, "export_onnx: path");
    OnnxExportOptions options;
    options.with_past = with_past;
    options.external_data = external_data;
    options.overwrite = overwrite;
    PythonProgress progress(callback, "export_onnx: progress");
    const auto r = without_gil(progress, [&] {
        return export_onnx(*m.live(), out, options, progress.plain("export"),
                           m.files ? m.files->path : std::filesystem::path(), m.files);
    });
    return to_python(nlohmann::ordered_json{{"path", r.path.string()},
                                            {"format", "onnx"},
                                            {"architecture", r.architecture},
                                            {"embedding", r.embedding_type},
                                            {"tensors", r.tensors},
                                            {"bytes", r.bytes},
                                            {"notes", r.notes}});
}

// Per scored position, in scoring order (the engine's ScoredPositions, moved into arrays).
py::dict positions_dict(ScoredPositions&& p)
{
    py::dict out;
    out["input"] = vector_array(std::move(p.input));
    out["target"] = vector_array(std::move(p.target));
    out["kl"] = vector_array(std::move(p.kl));
    out["nll"] = vector_array(std::move(p.nll));
    out["reference_nll"] = vector_array(std::move(p.reference_nll));
    out["same_top"] = vector_array(std::move(p.same_top), "bool");
    return out;
}

py::object divergence(const Model& m, const Model& reference, const py::object& text, const py::object& ids,
                      int64_t ctx, std::optional<int64_t> stride, bool per_token, const py::object& callback)
{
    const auto input = input_ids(m, text, ids, "divergence");
    if (!text.is_none() && tokenizer_of(reference, "divergence").encode(text.cast<std::string>()) != input)
        throw InputError("divergence: " + m.path + " and the reference " + reference.path +
                         " tokenize the text differently; divergence needs one tokenizer");
    const auto options =
        window_options(input, ctx, stride, 0,
                       std::min(m.live()->max_context(), reference.live()->max_context()), "divergence");
    PythonProgress progress(callback, "divergence: progress");
    auto d = without_gil(progress, [&] {
        return evaluate_divergence(*m.live(), *reference.live(), input, options,
                                   progress.plain("divergence"));
    });
    nlohmann::ordered_json j{{"model", m.path},    {"reference", reference.path},
                             {"tokens", d.tokens}, {"windows", d.windows},
                             {"ctx", d.ctx},       {"stride", d.stride},
                             {"ppl", d.ppl},       {"reference_ppl", d.reference_ppl}};
    j.update(divergence_json(d));
    j["delta_ln_ppl"] = d.delta_ln_ppl;
    j["seconds"] = d.seconds;
    py::dict out = to_python(j);
    if (per_token)
        out["per_token"] = positions_dict(std::move(d.positions));
    return out;
}

py::object llamacpp_divergence(const Model& m, const py::object& file_like, const py::object& callback)
{
    const auto file = path_arg(file_like, "llamacpp_divergence: file");
    PythonProgress progress(callback, "llamacpp_divergence: progress");
    const auto d = without_gil(progress, [&] {
        return evaluate_divergence_llamacpp(*m.live(), file, progress.plain("divergence"));
    });
    nlohmann::ordered_json j{{"model", m.path},    {"reference_logits", file},
                             {"tokens", d.tokens}, {"windows", d.windows},
                             {"ctx", d.ctx},       {"bos", d.bos},
                             {"ppl", d.ppl},       {"reference_ppl", d.reference_ppl}};
    j.update(divergence_json(d));
    j["seconds"] = d.seconds;
    return to_python(j);
}

py::object task(const Model& m, const std::string& name, const py::object& data_path,
                std::optional<int64_t> limit, const py::object& callback)
{
    const auto data = path_arg(data_path, "task: data");
    const TaskReadOptions read{.limit = limit.value_or(0)};
    const Tokenizer& tokenizer = tokenizer_of(m, "task");
    PythonProgress progress(callback, "task: progress");
    nlohmann::ordered_json j{{"task", name}, {"model", m.path}, {"data", data}};
    if (name == "stsb") {
        const auto pairs = read_sentence_pairs(data, read);
        j.update(similarity_json(without_gil(progress, [&] {
            return evaluate_similarity(*m.live(), tokenizer, pairs, progress.plain(name));
        })));
    } else {
        const auto examples = read_task_data(name, data, read);
        j.update(task_json(without_gil(
            progress, [&] { return evaluate_task(*m.live(), tokenizer, examples, progress.plain(name)); })));
    }
    return to_python(j);
}

// The model generate() reads: with half weights, a loaded f16/bf16 model's matrices as
// stored (loaded once, on first use), as embedlab-cli generate reads them; otherwise, or
// when the files hold no half matrices after all, the float32 model itself.
std::shared_ptr<const LanguageModel> generation_model(const Model& m, GenerationWeights weights)
{
    const LanguageModel* lm = m.live();
    const std::shared_ptr<const LanguageModel> float_model(m.owner, lm);
    const auto half = m.half_generation;
    if (weights == GenerationWeights::F32 || !half || half->float_model != lm)
        return float_model;
    py::gil_scoped_release release; // loading reads the files
    std::lock_guard lock(half->mutex);
    if (!half->tried) {
        auto loaded = std::make_shared<const LoadedModel>(
            load_model_for_generation(half->path, half->options, GenerationWeights::Half));
        if (holds_half_weights(*loaded->model))
            half->loaded = std::move(loaded);
        half->tried = true;
    }
    if (!half->loaded)
        return float_model;
    return {half->loaded, half->loaded->model.get()};
}

py::object generate_text(const Model& m, const py::object& prompt, const py::object& ids, int64_t max_tokens,
                         double temperature, int64_t top_k, double top_p, uint64_t seed,
                         const py::object& stop, bool bos, int64_t top_n, const py::object& compare,
                         const py::object& on_token, const std::string& sampler, std::optional<double> min_p,
                         bool ignore_eos, const std::string& weights_name)
{
    const auto weights = parse_generation_weights(weights_name, "generate: weights=");
    if (prompt.is_none() == ids.is_none())
        throw InputError("generate: give exactly one of prompt= or ids=");
    const auto text = prompt.is_none() ? std::string() : str_arg(prompt, "generate: prompt");
    const auto input = prompt.is_none() ? token_ids(ids, m.live()->config().vocab_size, "generate")
                                        : prompt_ids(tokenizer_of(m, "generate"), text, bos);
    const Model* original = compare.is_none() ? nullptr : &model_arg(compare, "generate: compare");
    if (original && !prompt.is_none() && prompt_ids(tokenizer_of(*original, "generate"), text, bos) != input)
        throw InputError("generate: " + m.path + " and " + original->path +
                         " tokenize the prompt differently; a comparison needs one tokenizer");
    GenerationOptions options{.max_tokens = max_tokens,
                              .sampling = {.temperature = temperature,
                                           .top_k = top_k,
                                           .top_p = top_p,
                                           .seed = seed,
                                           .sampler = sampler,
                                           .min_p = min_p},
                              .stop_at_eos = !ignore_eos,
                              .top_n = top_n};
    if (!stop.is_none())
        options.stop = py::isinstance<py::str>(stop) ? std::vector<std::string>{stop.cast<std::string>()}
                                                     : str_list_arg(stop, "generate: stop");
    PythonProgress progress(on_token, "generate: on_token");
    // on_token's False ends the generation where it is (stop_reason "callback"); the engine
    // throws Cancelled for it, so the tokens so far are kept here.
    std::vector<GeneratedToken> so_far;
    bool stopped = false;
    const TokenFn each = [&](const GeneratedToken& t) {
        so_far.push_back(t);
        if (progress.call([&] {
                return on_token.is_none() ? py::none() : on_token(to_python(generated_token_json(t)));
            }))
            return true;
        stopped = !progress.pending(); // a False return, not an exception or Ctrl-C
        return false;
    };
    const auto model = generation_model(m, weights);
    const auto original_model = original ? generation_model(*original, weights) : nullptr;
    const auto start = std::chrono::steady_clock::now();
    Generation g;
    try {
        g = without_gil(progress, [&] {
            return generate(*model, m.tokenizer, input, options, each, original_model.get());
        });
    } catch (const Cancelled&) {
        if (!stopped)
            throw;
        // What generate returns, from the tokens on_token saw: the text is their new
        // characters (complete ones: a stop string's prefix or half a UTF-8 character
        // still held back is not shown). The timing is the whole call's.
        g.prompt = input;
        g.tokens = std::move(so_far);
        for (const auto& t : g.tokens)
            g.text += t.text;
        g.stop_reason = "callback";
        g.generate_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        g.tokens_per_second =
            g.generate_seconds > 0 ? static_cast<double>(g.tokens.size()) / g.generate_seconds : 0;
    }
    nlohmann::ordered_json j{{"model", m.path}};
    j.update(generation_json(g));
    j["embedding"] = m.live()->token_embedding().kind();
    if (original) {
        // Stopped early: the compared model's continuation is as long at most.
        if (stopped)
            options.max_tokens = static_cast<int64_t>(g.tokens.size());
        const auto og = without_gil(progress, [&] {
            return generate(*original_model, original->tokenizer, input, options,
                            [&](const GeneratedToken&) { return progress.call([] { return py::none(); }); });
        });
        nlohmann::ordered_json o{{"model", original->path}};
        o.update(generation_json(og));
        j["original"] = o;
    }
    return to_python(j);
}

py::array embedding_table(const Model& m)
{
    const TokenEmbedding& e = m.live()->token_embedding();
    torch::Tensor rows;
    if (const torch::Tensor* table = dense_table(&e)) {
        rows = *table;
    } else {
        py::gil_scoped_release release;
        c10::InferenceMode guard;
        rows = e.lookup(torch::arange(e.vocab_size(), torch::kLong));
    }
    auto a = to_numpy(rows);
    a.attr("setflags")(py::arg("write") = false); // a view of the model's own table
    return a;
}

} // namespace

const LanguageModel* Model::live() const
{
    if (!lm)
        throw InputError(path + " is closed (its with block ended, or close() was called): load it again");
    return lm;
}

void Model::close()
{
    lm = nullptr;
    tokenizer = nullptr;
    files = nullptr;
    owner.reset();
    half_generation.reset();
}

const Model& model_arg(const py::handle& value, const std::string& what)
{
    if (!py::isinstance<Model>(value))
        throw py::type_error(what + " must be an embedlab.Model, not " + type_name(value));
    return value.cast<const Model&>();
}

Model load(const py::object& path_like, const py::object& tokenizer, bool verify)
{
    // str or os.PathLike (pathlib.Path), as open() takes.
    const auto path = path_arg(path_like, "load: path");
    const auto tokenizer_path = tokenizer.is_none() ? std::string() : path_arg(tokenizer, "load: tokenizer");
    LoadOptions options;
    options.verify = verify;
    if (!tokenizer.is_none())
        options.tokenizer = tokenizer_path;
    auto loaded = [&] {
        py::gil_scoped_release release;
        return std::make_shared<LoadedModel>(load_model(path, options));
    }();
    Model m;
    m.lm = loaded->model.get();
    m.tokenizer = loaded->tokenizer.get();
    m.files = &loaded->files;
    m.path = path;
    m.tokenizer_option = tokenizer_path;
    m.verify = verify;
    // f16/bf16 matrices (any "F16"/"BF16", or a mix): generate() reads them as stored.
    const auto& stored = loaded->files.stored_dtype;
    if (loaded->files.embedlab_manifest.empty() && loaded->files.format != ModelFormat::Llama2c &&
        (stored.find("F16") != std::string::npos || stored == "mixed")) {
        m.half_generation = std::make_shared<HalfGeneration>();
        m.half_generation->path = path;
        m.half_generation->options = options;
        m.half_generation->options.need_tokenizer = false; // generate() uses the Model's own
        m.half_generation->float_model = m.lm;
    }
    m.owner = std::move(loaded);
    return m;
}

void bind_model(py::module_& m)
{
    py::class_<Model>(m, "Model", "A loaded model (embedlab.load) or a run's compressed model (Run.model).")
        .def_readonly("path", &Model::path)
        .def_property_readonly(
            "config", [](const Model& x) { return to_python(model_config_json(x.live()->config())); })
        .def_property_readonly("architecture", [](const Model& x) { return x.live()->config().type_name(); })
        .def_property_readonly("vocab_size", [](const Model& x) { return x.live()->config().vocab_size; })
        .def_property_readonly("dim", [](const Model& x) { return x.live()->config().embedding_dim(); })
        .def_property_readonly("embedding_kind",
                               [](const Model& x) { return x.live()->token_embedding().kind(); })
        .def_property_readonly("warnings",
                               [](const Model& x) {
                                   x.live();
                                   return x.files->warnings;
                               })
        .def(
            "tokenize",
            [](const Model& x, const std::string& text) {
                const auto ids = tokenizer_of(x, "tokenize").encode(text);
                return to_numpy(torch::tensor(std::vector<int64_t>(ids.begin(), ids.end()), torch::kLong));
            },
            py::arg("text"), "The text's token ids (int64), as eval --text tokenizes it: no BOS.")
        .def(
            "detokenize",
            [](const Model& x, const py::handle& ids) {
                return tokenizer_of(x, "detokenize")
                    .decode(token_ids(ids, x.live()->config().vocab_size, "detokenize"));
            },
            py::arg("ids"))
        .def("embedding_table", &embedding_table,
             "The token table [V, d] float32: the dense table as a read-only view, or a compressed "
             "model's rows as its lookup rebuilds them.")
        .def("perplexity", &perplexity, py::kw_only(), py::arg("text") = py::none(),
             py::arg("ids") = py::none(), py::arg("ctx") = 128, py::arg("stride") = py::none(),
             py::arg("batch") = 0, py::arg("progress") = py::none(),
             "Perplexity by METHODS.md section 0: eval --json's fields.")
        .def("export_onnx", &export_onnx_to, py::arg("path"), py::kw_only(), py::arg("with_past") = false,
             py::arg("external_data") = false, py::arg("overwrite") = false, py::arg("progress") = py::none(),
             "The model (decoder or encoder) as an ONNX graph with the token table as stored (export "
             "--format onnx); "
             "returns the report: path, bytes, tensors, notes.")
        .def("generate", &generate_text, py::arg("prompt") = py::none(), py::kw_only(),
             py::arg("ids") = py::none(), py::arg("max_tokens") = 64, py::arg("temperature") = 0.0,
             py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("seed") = 0, py::arg("stop") = py::none(),
             py::arg("bos") = true, py::arg("top_n") = 5, py::arg("compare") = py::none(),
             py::arg("on_token") = py::none(), py::arg("sampler") = "llamacpp", py::arg("min_p") = py::none(),
             py::arg("ignore_eos") = false, py::arg("weights") = "half",
             "A continuation of the prompt over a KV cache: generate --json's fields. compare=Model adds "
             "per-token KL(P_compare || P_model) and ranks, and the compared model's own continuation "
             "under 'original'; on_token(dict) is called per token (False stops). sampler: 'llamacpp' "
             "(top-k, top-p, min-p, temperature) or 'hf' (temperature first); min_p=None: the chain's "
             "default (0.05, hf 0); ignore_eos=True goes on past the end-of-sequence token. weights: 'half' "
             "(the CLI's default: an f16/bf16 model's matrices as stored, loaded once on first use) or "
             "'f32' (the float32 weights evaluation reads).")
        .def("divergence", &divergence, py::arg("reference"), py::kw_only(), py::arg("text") = py::none(),
             py::arg("ids") = py::none(), py::arg("ctx") = 128, py::arg("stride") = py::none(),
             py::arg("per_token") = false, py::arg("progress") = py::none(),
             "KL(P_reference || P_model) per scored token and top-1 agreement: eval --reference's fields. "
             "per_token=True adds 'per_token', each scored position in scoring order as NumPy arrays: "
             "input and target (int32: the last id read, the id predicted), kl, nll and reference_nll "
             "(float64, nats) and same_top (bool: the two argmaxes agree).")
        .def("llamacpp_divergence", &llamacpp_divergence, py::arg("file"), py::kw_only(),
             py::arg("progress") = py::none(),
             "llama-perplexity --kl-divergence against the base log-probabilities its "
             "--kl-divergence-base FILE saved, on its tokens and chunks: eval --reference-logits' fields.")
        .def("task", &task, py::arg("name"), py::arg("data"), py::kw_only(), py::arg("limit") = py::none(),
             py::arg("progress") = py::none(),
             "sst2, mc, GLUE's classification tasks on a classifier (accuracy; cola mcc, mrpc and qqp f1) "
             "or stsb (correlation): task --json's fields.")
        .def(
            "close", [](Model& x) { x.close(); },
            "Releases this handle's share of the model now (as the end of a with block does); other "
            "handles (a with_table model, a Run) keep theirs, and arrays already returned stay valid. "
            "Any later call raises InputError.")
        .def("__enter__",
             [](const py::object& self) {
                 self.cast<const Model&>().live();
                 return self;
             })
        .def("__exit__", [](Model& x, const py::args&) { x.close(); })
        // Pickled by path (absolute), tokenizer= and verify=: unpickling loads the files again.
        .def(py::pickle(
            [](const Model& x) {
                x.live();
                if (!x.unpicklable.empty())
                    throw py::type_error("cannot pickle " + x.path + ": " + x.unpicklable);
                const auto absolute = [](const std::string& p) {
                    return py::str(std::filesystem::absolute(p).string());
                };
                return py::make_tuple(absolute(x.path),
                                      x.tokenizer_option.empty() ? py::object(py::none())
                                                                 : py::object(absolute(x.tokenizer_option)),
                                      x.verify);
            },
            [](const py::tuple& state) {
                if (state.size() != 3)
                    throw InputError("Model.__setstate__: not an embedlab.Model's pickled state");
                return load(state[0], state[1], state[2].cast<bool>());
            }))
        .def("__repr__", [](const Model& x) {
            if (!x.lm)
                return "<embedlab.Model " + x.path + ": closed>";
            return "<embedlab.Model " + x.path + ": " + x.live()->config().type_name() + ", V " +
                   std::to_string(x.live()->config().vocab_size) + ", embedding " +
                   x.live()->token_embedding().kind() + encoder_repr(x.live()->config()) + ">";
        });
}

} // namespace embedlab::python
