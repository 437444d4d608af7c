// embedlab.Model's per-position arrays (issue 64): logits of one sequence or a batch,
// hidden states of chosen layers (Hugging Face's output_hidden_states indexing) and
// lm-evaluation-harness's loglikelihood. Each wraps an engine call (the forward pass, a
// ForwardObserver, evaluate_task) and computes nothing of its own.
#include <torch/types.h>

#include <map>
#include <optional>

#include <pybind11/stl.h>

#include "convert.hpp"
#include "embedlab/tasks.hpp"
#include "model.hpp"
#include "progress.hpp"

namespace embedlab::python {

namespace {

// One sequence's ids, none empty and none longer than the model's context.
std::vector<int32_t> sequence_ids(const Model& m, const py::handle& ids, const std::string& what)
{
    auto input = token_ids(ids, m.live()->config().vocab_size, what);
    if (input.empty())
        throw InputError(what + ": no token ids");
    if (static_cast<int64_t>(input.size()) > m.live()->max_context())
        throw InputError(what + ": " + std::to_string(input.size()) +
                         " ids are more than the model's context of " +
                         std::to_string(m.live()->max_context()));
    return input;
}

torch::Tensor id_tensor(const std::vector<std::vector<int32_t>>& rows)
{
    auto t = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.front().size())},
                          torch::kLong);
    auto a = t.accessor<int64_t, 2>();
    for (size_t i = 0; i < rows.size(); ++i)
        for (size_t j = 0; j < rows[i].size(); ++j)
            a[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = rows[i][j];
    return t;
}

// A batch: a 2-D array, or a list or tuple whose first item is itself a sequence.
bool is_batch(const py::handle& ids)
{
    if (py::isinstance<py::array>(ids))
        return py::reinterpret_borrow<py::array>(ids).ndim() == 2;
    if (!py::isinstance<py::list>(ids) && !py::isinstance<py::tuple>(ids))
        return false;
    const auto items = py::reinterpret_borrow<py::sequence>(ids);
    if (items.size() == 0)
        return false;
    const py::object first = items[0];
    return py::isinstance<py::list>(first) || py::isinstance<py::tuple>(first) ||
           py::isinstance<py::array>(first);
}

py::object logits(const Model& m, const py::handle& ids, const py::object& callback)
{
    PythonProgress progress(callback, "logits: progress");
    if (!is_batch(ids)) {
        const auto input = sequence_ids(m, ids, "logits");
        const auto out = without_gil(progress, [&] {
            c10::InferenceMode guard;
            return m.live()->logits(id_tensor({input}))[0].contiguous();
        });
        return to_numpy(out);
    }
    const auto items = py::reinterpret_borrow<py::sequence>(ids);
    std::vector<std::vector<int32_t>> rows;
    for (size_t i = 0; i < items.size(); ++i)
        rows.push_back(sequence_ids(m, items[i], "logits: ids[" + std::to_string(i) + "]"));
    // Sequences of one length go through the model together.
    std::map<size_t, std::vector<size_t>> by_length;
    for (size_t i = 0; i < rows.size(); ++i)
        by_length[rows[i].size()].push_back(i);
    std::vector<torch::Tensor> out(rows.size());
    torch::Tensor whole; // one length: [B, T, V] as the forward pass returns it
    without_gil(progress, [&] {
        c10::InferenceMode guard;
        const auto report = progress.plain("logits");
        const auto total = static_cast<int64_t>(rows.size());
        int64_t done = 0;
        if (!report(0, total))
            throw Cancelled();
        for (const auto& [length, members] : by_length) {
            std::vector<std::vector<int32_t>> group;
            for (size_t i : members)
                group.push_back(rows[i]);
            const auto l = m.live()->logits(id_tensor(group));
            if (by_length.size() == 1)
                whole = l;
            for (size_t j = 0; j < members.size(); ++j)
                out[members[j]] = l[static_cast<int64_t>(j)];
            done += static_cast<int64_t>(members.size());
            if (!report(done, total))
                throw Cancelled();
        }
        return 0;
    });
    if (whole.defined())
        return to_numpy(whole);
    py::list list;
    for (const auto& t : out)
        list.append(to_numpy(t));
    return list;
}

// Copies the residual stream at the layers asked for: Hugging Face's index 0 is what
// enters decoder 0 (the embeddings), index i in 1..L-1 what leaves decoder i-1; index
// L is the final hidden states the forward pass returns (after a decoder's last norm).
class LayerCopies : public ForwardObserver {
public:
    explicit LayerCopies(std::vector<int64_t> wanted) : wanted_(std::move(wanted)) {}
    void decoder_input(int64_t layer, const torch::Tensor& x) override
    {
        if (layer == 0)
            keep(0, x);
    }
    void decoder_output(int64_t layer, const torch::Tensor& x) override { keep(layer + 1, x); }
    std::map<int64_t, torch::Tensor> copies;

private:
    void keep(int64_t index, const torch::Tensor& x)
    {
        if (std::find(wanted_.begin(), wanted_.end(), index) != wanted_.end() && !copies.count(index))
            copies[index] = x[0].clone(); // valid during the call only
    }
    std::vector<int64_t> wanted_;
};

py::array hidden_states(const Model& m, const py::handle& ids, const py::object& layers_arg,
                        const py::object& callback)
{
    const auto input = sequence_ids(m, ids, "hidden_states");
    const int64_t L = m.live()->config().num_layers;
    const bool one = py::isinstance<py::int_>(layers_arg);
    std::vector<int64_t> layers;
    if (one) {
        layers.push_back(layers_arg.cast<int64_t>());
    } else if (!layers_arg.is_none()) {
        if (!py::isinstance<py::list>(layers_arg) && !py::isinstance<py::tuple>(layers_arg))
            throw py::type_error("hidden_states: layers must be None, an int or a list of int, not " +
                                 type_name(layers_arg));
        for (const auto& item : py::reinterpret_borrow<py::sequence>(layers_arg)) {
            if (!py::isinstance<py::int_>(item))
                throw py::type_error("hidden_states: layers must be a list of int, not of " +
                                     type_name(item));
            layers.push_back(item.cast<int64_t>());
        }
        if (layers.empty())
            throw InputError("hidden_states: layers is empty; give None for the final hidden states");
    }
    for (auto& layer : layers) {
        if (layer < -(L + 1) || layer > L)
            throw InputError("hidden_states: layer " + std::to_string(layer) + " is outside 0.." +
                             std::to_string(L) + " (0 the embeddings, " + std::to_string(L) +
                             " the final hidden states) or -" + std::to_string(L + 1) + "..-1");
        if (layer < 0)
            layer += L + 1;
    }
    PythonProgress progress(callback, "hidden_states: progress");
    const auto out = without_gil(progress, [&] {
        c10::InferenceMode guard;
        const auto report = progress.plain("hidden_states");
        if (!report(0, 1))
            throw Cancelled();
        LayerCopies observer(layers);
        const auto t = id_tensor({input});
        const auto final_states = m.live()->config().is_encoder()
                                      ? m.live()->encoder_hidden_states(t, {}, {}, &observer)
                                      : m.live()->hidden_states(t, &observer);
        if (!report(1, 1))
            throw Cancelled();
        if (layers.empty())
            return final_states[0].contiguous();
        std::vector<torch::Tensor> picked;
        for (int64_t layer : layers)
            picked.push_back(layer == L ? final_states[0] : observer.copies.at(layer));
        auto stacked = torch::stack(picked);
        return one ? stacked[0].contiguous() : stacked;
    });
    return to_numpy(out);
}

// The harness's loglikelihood request through evaluate_task: each pair an example with
// one continuation, scored as the zero-shot tasks score their choices.
py::object loglikelihood(const Model& m, const py::object& context, const py::object& continuation,
                         bool greedy, const py::object& callback)
{
    const std::string what = "loglikelihood";
    m.live();
    if (!m.tokenizer)
        throw InputError(what + ": " + m.path + " was loaded without a tokenizer");
    const bool one = py::isinstance<py::str>(context);
    std::vector<std::string> contexts, continuations;
    if (one) {
        contexts.push_back(context.cast<std::string>());
        continuations.push_back(str_arg(continuation, what + ": continuation"));
    } else {
        contexts = str_list_arg(context, what + ": context");
        continuations = str_list_arg(continuation, what + ": continuation");
        if (contexts.size() != continuations.size())
            throw InputError(what + ": " + std::to_string(contexts.size()) + " contexts and " +
                             std::to_string(continuations.size()) +
                             " continuations; give one of each per request");
        if (contexts.empty())
            throw InputError(what + ": no requests");
    }
    TaskData data{.task = "mc", .source = what, .examples = {}};
    for (size_t i = 0; i < contexts.size(); ++i)
        data.examples.push_back({.context = contexts[i], .continuations = {continuations[i]}, .label = 0});
    PythonProgress progress(callback, what + ": progress");
    const auto r = without_gil(
        progress, [&] { return evaluate_task(*m.live(), *m.tokenizer, data, progress.plain(what)); });
    std::vector<double> scores;
    std::vector<uint8_t> greedy_flags;
    for (const auto& e : r.examples) {
        scores.push_back(e.loglik.at(0));
        greedy_flags.push_back(e.greedy.at(0) ? 1 : 0);
    }
    if (one) {
        const py::float_ score(scores.front());
        if (greedy)
            return py::make_tuple(score, py::bool_(greedy_flags.front() != 0));
        return score;
    }
    auto score_array = vector_array(std::move(scores));
    if (!greedy)
        return score_array;
    return py::make_tuple(score_array, vector_array(std::move(greedy_flags), "bool"));
}

} // namespace

void bind_arrays(py::module_& module)
{
    auto cls = py::reinterpret_borrow<py::class_<Model>>(module.attr("Model"));
    cls.def("logits", &logits, py::arg("ids"), py::kw_only(), py::arg("progress") = py::none(),
            "Logits (float32) of one sequence of ids, [n, V]; of a batch (a 2-D array or a list of "
            "sequences), [B, T, V] when the sequences are of one length, else a list of [n_i, V] arrays "
            "(sequences of one length run together). Each sequence is read from position 0, no BOS added.")
        .def("hidden_states", &hidden_states, py::arg("ids"), py::kw_only(), py::arg("layers") = py::none(),
             py::arg("progress") = py::none(),
             "Hidden states (float32) of one sequence of ids. layers=None: the final hidden states [n, d] "
             "(the output head's input); an int or a list of them, Hugging Face's output_hidden_states "
             "indices: 0 the embeddings entering the first layer, i the output of layer i, num_layers the "
             "final hidden states (after a decoder's last norm), negative from the end; a list gives "
             "[len(layers), n, d].")
        .def("loglikelihood", &loglikelihood, py::arg("context"), py::arg("continuation"), py::kw_only(),
             py::arg("greedy") = false, py::arg("progress") = py::none(),
             "lm-evaluation-harness's loglikelihood: the summed log-probability (nats) of the "
             "continuation's tokens after the context (the context's trailing spaces move to the "
             "continuation; no BOS; cut from the left to the model's context), as task scores a choice. "
             "Two str: a float; two lists of str: float64 [n]. greedy=True returns what the harness "
             "returns, (logprob, is_greedy): is_greedy whether every continuation token is the argmax "
             "of the logits at its position (a bool; with lists, bool [n]).");
}

} // namespace embedlab::python
