// embedlab.Model's encoder calls (issue 42): pooled embeddings (embed), a classifier's
// logits, masked-LM pseudo-perplexity, and what the model is. Each wraps the engine's
// call (encoder.hpp, masked_lm.hpp) with the CLI's fields; none computes.
#include <torch/types.h>

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
    if (!m.tokenizer)
        throw InputError(what + ": the model was loaded without a tokenizer");
    return *m.tokenizer;
}

std::vector<std::string> text_list(const py::handle& texts, const std::string& what)
{
    if (py::isinstance<py::str>(texts))
        throw InputError(what + ": give a list of texts, not one string");
    return texts.cast<std::vector<std::string>>();
}

py::array embed(const Model& m, const py::handle& texts, const std::string& pooling, bool normalize,
                int64_t batch, const py::object& callback)
{
    EmbedOptions o{.pooling = std::nullopt, .normalize = normalize, .batch_size = batch};
    if (pooling != "model") {
        o.pooling = parse_pooling(pooling);
        if (!o.pooling)
            throw InputError("embed: pooling '" + pooling + "' is not cls, mean, max or model");
    }
    const auto list = text_list(texts, "embed");
    const Tokenizer& tok = tokenizer_for(m, "embed");
    PythonProgress progress(callback);
    const auto e =
        without_gil(progress, [&] { return embed_texts(*m.lm, tok, list, o, progress.plain("embed")); });
    return to_numpy(e.values.contiguous());
}

py::array classify(const Model& m, const py::handle& texts, const py::object& pairs)
{
    const auto list = text_list(texts, "classify");
    if (list.empty())
        throw InputError("classify: no texts");
    std::vector<std::string> second;
    if (!pairs.is_none())
        second = text_list(pairs, "classify (pairs)");
    const Tokenizer& tok = tokenizer_for(m, "classify");
    torch::Tensor out;
    {
        py::gil_scoped_release release;
        c10::InferenceMode guard;
        const auto batch = frame_texts(tok, m.lm->config(), list, pairs.is_none() ? nullptr : &second);
        out = m.lm->classify(batch_hidden_states(*m.lm, batch)).contiguous();
    }
    return to_numpy(out);
}

py::object masked_lm(const Model& m, const py::object& text, int64_t ctx, double mask_rate, uint64_t seed,
                     const py::object& reference, const py::object& callback)
{
    if (text.is_none())
        throw InputError("masked_lm: give text=");
    const Tokenizer& tok = tokenizer_for(m, "masked_lm");
    const auto ids = tok.encode(text.cast<std::string>());
    const MaskedLmOptions o{.ctx = ctx, .mask_rate = mask_rate, .seed = seed};
    const LanguageModel* ref = reference.is_none() ? nullptr : reference.cast<const Model&>().lm;
    PythonProgress progress(callback);
    const auto r = without_gil(
        progress, [&] { return evaluate_masked_lm(*m.lm, tok, ids, o, ref, progress.plain("masked_lm")); });
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

void bind_encoder(py::module_& module)
{
    auto cls = py::reinterpret_borrow<py::class_<Model>>(module.attr("Model"));
    cls.def_property_readonly("is_encoder", [](const Model& x) { return x.lm->config().is_encoder(); })
        .def_property_readonly(
            "head", [](const Model& x) { return std::string(head_name(x.lm->config())); },
            "causal_lm (decoders), masked_lm, classification, or none (an encoder body).")
        .def_property_readonly(
            "labels", [](const Model& x) { return x.lm->config().labels; },
            "A sequence classifier's labels by id (its id2label); empty otherwise.")
        .def_property_readonly(
            "pooling",
            [](const Model& x) { return std::string(pooling_name(default_pooling(x.lm->config()))); },
            "The pooling embed() uses by default: the model's own, else cls for a classifier, else mean.")
        .def(
            "embed", &embed, py::arg("texts"), py::kw_only(), py::arg("pooling") = "model",
            py::arg("normalize") = false, py::arg("batch") = 32, py::arg("progress") = py::none(),
            "One pooled embedding per text, [n, d] float32, as embedlab-cli embed: pooling cls, mean, max or "
            "model (its own, with its Normalize); decoders by the mean of their final hidden states.")
        .def("classify", &classify, py::arg("texts"), py::kw_only(), py::arg("pairs") = py::none(),
             "A sequence classifier's logits [n, labels] float32, each text framed [CLS] .. [SEP] (with "
             "pairs: [CLS] a [SEP] b [SEP]); the order of Model.labels.")
        .def("masked_lm", &masked_lm, py::kw_only(), py::arg("text") = py::none(), py::arg("ctx") = 128,
             py::arg("mask_rate") = 0.0, py::arg("seed") = 0, py::arg("reference") = py::none(),
             py::arg("progress") = py::none(),
             "A masked-LM encoder's pseudo-perplexity and masked-token accuracy: eval --json's fields "
             "(reference=Model adds the KL on the same masked inputs).");
}

} // namespace embedlab::python
