// embedlab.Model's encoder calls (issue 42): pooled embeddings (embed), a classifier's
// logits, masked-LM pseudo-perplexity, and what the model is. Each wraps the engine's
// call (encoder.hpp, masked_lm.hpp) with the CLI's fields; none computes.
#include <torch/types.h>

#include <algorithm>

#include "model.hpp"

#include <pybind11/stl.h>

#include "convert.hpp"
#include "embedlab/encoder.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/masked_lm.hpp"
#include "progress.hpp"

namespace embedlab::python {

namespace {

const Tokenizer& tokenizer_for(const Model& m, const std::string& what)
{
    m.live();
    if (!m.tokenizer)
        throw InputError(what + ": the model was loaded without a tokenizer");
    return *m.tokenizer;
}

// `what`: the call and the argument ("embed: texts").
std::vector<std::string> text_list(const py::handle& texts, const std::string& what)
{
    if (py::isinstance<py::str>(texts))
        throw InputError(what + " must be a list of texts, not one string");
    return str_list_arg(texts, what);
}

py::array embed(const Model& m, const py::handle& texts, const std::string& pooling,
                const py::object& normalize, int64_t batch, const py::object& callback)
{
    EmbedOptions o{.pooling = std::nullopt, .normalize = false, .batch_size = batch};
    if (pooling != "model") {
        o.pooling = parse_pooling(pooling);
        if (!o.pooling)
            throw InputError("embed: pooling '" + pooling + "' is not cls, mean, max or model");
    }
    if (!normalize.is_none()) {
        if (!py::isinstance<py::bool_>(normalize))
            throw InputError("embed: normalize must be None (the model's own), True or False");
        o.normalize = normalize.cast<bool>();
        // The engine applies the model's Normalize only to its own pooling left unnamed:
        // naming that pooling gives the rows without it (embed --pooling mean on minilm-st).
        if (!o.normalize && !o.pooling)
            o.pooling = default_pooling(m.live()->config());
    }
    const auto list = text_list(texts, "embed: texts");
    const Tokenizer& tok = tokenizer_for(m, "embed");
    PythonProgress progress(callback, "embed: progress");
    const auto e =
        without_gil(progress, [&] { return embed_texts(*m.live(), tok, list, o, progress.plain("embed")); });
    return to_numpy(e.values.contiguous());
}

// The engine's framing and head, `batch` texts per forward pass (as embed_texts batches),
// with a progress report per batch so that Ctrl-C and progress's False stop it.
py::array classify(const Model& m, const py::handle& texts, const py::object& pairs, int64_t batch,
                   const py::object& callback)
{
    const auto list = text_list(texts, "classify: texts");
    if (list.empty())
        throw InputError("classify: no texts");
    if (batch < 1)
        throw InputError("classify: batch must be at least 1, got " + std::to_string(batch));
    std::vector<std::string> second;
    if (!pairs.is_none()) {
        second = text_list(pairs, "classify: pairs");
        // Checked whole: each batch's own counts would misname the lists.
        if (second.size() != list.size())
            throw InputError("classify: " + std::to_string(list.size()) + " texts but " +
                             std::to_string(second.size()) + " pairs");
    }
    const Tokenizer& tok = tokenizer_for(m, "classify");
    PythonProgress progress(callback, "classify: progress");
    const ProgressFn report = progress.plain("classify");
    const auto n = static_cast<int64_t>(list.size());
    const auto out = without_gil(progress, [&] {
        std::vector<torch::Tensor> parts;
        for (int64_t start = 0; start < n; start += batch) {
            report_progress(report, start, n);
            const auto end = std::min(n, start + batch);
            const std::vector<std::string> a(list.begin() + start, list.begin() + end);
            std::vector<std::string> b;
            if (!second.empty())
                b.assign(second.begin() + start, second.begin() + end);
            c10::InferenceMode guard;
            const auto framed =
                frame_texts(tok, m.live()->config(), a, second.empty() ? nullptr : &b, start + 1);
            parts.push_back(m.live()->classify(batch_hidden_states(*m.live(), framed)));
        }
        report_progress(report, n, n);
        return torch::cat(parts, 0).contiguous();
    });
    return to_numpy(out);
}

py::object masked_lm(const Model& m, const py::object& text, int64_t ctx, double mask_rate, uint64_t seed,
                     const py::object& reference, const py::object& callback)
{
    if (text.is_none())
        throw InputError("masked_lm: give text=");
    const Tokenizer& tok = tokenizer_for(m, "masked_lm");
    const auto ids = tok.encode(str_arg(text, "masked_lm: text"));
    const MaskedLmOptions o{.ctx = ctx, .mask_rate = mask_rate, .seed = seed};
    const LanguageModel* ref =
        reference.is_none() ? nullptr : model_arg(reference, "masked_lm: reference").live();
    PythonProgress progress(callback, "masked_lm: progress");
    const auto r = without_gil(progress, [&] {
        return evaluate_masked_lm(*m.live(), tok, ids, o, ref, progress.plain("masked_lm"));
    });
    return to_python(masked_lm_json(r, o));
}

const char* head_name(const ModelConfig& c)
{
    switch (c.encoder_head) {
    case EncoderHead::MaskedLM:
        return "masked_lm";
    case EncoderHead::Classification:
        return "classification";
    default:
        return c.is_encoder() ? "none" : "causal_lm";
    }
}

} // namespace

std::string encoder_repr(const ModelConfig& c)
{
    if (!c.is_encoder())
        return "";
    std::string s = std::string(", encoder, head ") + head_name(c);
    if (!c.labels.empty()) {
        s += " (";
        for (size_t i = 0; i < c.labels.size(); ++i)
            s += (i ? ", " : "") + c.labels[i];
        s += ")";
    }
    s += std::string(", pooling ") + pooling_name(default_pooling(c));
    if (c.normalize_embeddings)
        s += " + normalize";
    return s;
}

void bind_encoder(py::module_& module)
{
    auto cls = py::reinterpret_borrow<py::class_<Model>>(module.attr("Model"));
    cls.def_property_readonly("is_encoder", [](const Model& x) { return x.live()->config().is_encoder(); })
        .def_property_readonly(
            "head", [](const Model& x) { return std::string(head_name(x.live()->config())); },
            "causal_lm (decoders), masked_lm, classification, or none (an encoder body).")
        .def_property_readonly(
            "labels", [](const Model& x) { return x.live()->config().labels; },
            "A sequence classifier's labels by id (its id2label); empty otherwise.")
        .def_property_readonly(
            "pooling",
            [](const Model& x) { return std::string(pooling_name(default_pooling(x.live()->config()))); },
            "The pooling embed() uses by default: the model's own, else cls for a classifier, else mean.")
        .def_property_readonly(
            "normalize_embeddings", [](const Model& x) { return x.live()->config().normalize_embeddings; },
            "Whether embed()'s default L2-normalises each row (sentence-transformers' Normalize module).")
        .def(
            "embed", &embed, py::arg("texts"), py::kw_only(), py::arg("pooling") = "model",
            py::arg("normalize") = py::none(), py::arg("batch") = 32, py::arg("progress") = py::none(),
            "One pooled embedding per text, [n, d] float32, as embedlab-cli embed: pooling cls, mean, max or "
            "model (its own, with its Normalize); decoders by the mean of their final hidden states. "
            "normalize: None the model's own, True L2-normalises every row (--normalize), False never.")
        .def("classify", &classify, py::arg("texts"), py::kw_only(), py::arg("pairs") = py::none(),
             py::arg("batch") = 32, py::arg("progress") = py::none(),
             "A sequence classifier's logits [n, labels] float32, each text framed [CLS] .. [SEP] (with "
             "pairs: [CLS] a [SEP] b [SEP]); the order of Model.labels.")
        .def("masked_lm", &masked_lm, py::kw_only(), py::arg("text") = py::none(), py::arg("ctx") = 128,
             py::arg("mask_rate") = 0.0, py::arg("seed") = 0, py::arg("reference") = py::none(),
             py::arg("progress") = py::none(),
             "A masked-LM encoder's pseudo-perplexity and masked-token accuracy: eval --json's fields "
             "(reference=Model adds the KL on the same masked inputs).");
}

} // namespace embedlab::python
