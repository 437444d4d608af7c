// embedlab.Model's in-memory table and per-token calls (issue 64): with_table, a model
// running on a table the caller gives, and token_losses, the NLL of each scored token.
// Like the rest of the module they wrap engine calls and compute nothing.
#include <torch/types.h>

#include <optional>

#include <pybind11/stl.h>

#include "convert.hpp"
#include "embedlab/eval.hpp"
#include "model.hpp"
#include "progress.hpp"

namespace embedlab::python {

namespace {

// with_table's model: the new LanguageModel, and whatever kept the original's tokenizer
// and files alive.
struct TableModel {
    std::shared_ptr<const void> parent;
    std::unique_ptr<LanguageModel> lm;
};

Model with_table(const Model& m, const py::handle& table)
{
    const auto& config = m.live()->config();
    if (m.live()->lora())
        throw InputError("with_table: " + m.path +
                         " has LoRA adapters, which may adapt the token table itself; merge them first "
                         "(finetune --merge) or use the model without them");
    auto rows = table_arg(table, config.vocab_size, config.embedding_dim(), "with_table: table");
    auto out = std::make_shared<TableModel>();
    out->parent = m.owner;
    {
        py::gil_scoped_release release;
        // The same weights (handles, not copies), the table replaced: a tied head reads the
        // new rows through the token embedding; an untied head keeps its own weight.
        WeightMap weights = m.live()->weights();
        weights[token_table_name(config.arch)] = rows;
        out->lm = std::make_unique<LanguageModel>(
            config, std::move(weights), std::make_shared<DenseTokenEmbedding>(rows), "with_table: " + m.path,
            m.live()->shared_position_embedding());
    }
    Model result = m;
    result.lm = out->lm.get();
    result.path = m.path + " (with_table)";
    result.unpicklable = "a with_table model holds a table in memory; pickle the table (or np.save it) and "
                         "call with_table again";
    result.owner = std::move(out);
    return result;
}

// text= or ids=, exactly one (as perplexity() takes them).
std::vector<int32_t> loss_ids(const Model& m, const py::object& text, const py::object& ids)
{
    if (text.is_none() == ids.is_none())
        throw InputError("token_losses: give exactly one of text= or ids=");
    if (!text.is_none()) {
        m.live();
        if (!m.tokenizer)
            throw InputError("token_losses: " + m.path + " was loaded without a tokenizer");
        return m.tokenizer->encode(str_arg(text, "token_losses: text"));
    }
    return token_ids(ids, m.live()->config().vocab_size, "token_losses");
}

py::array token_losses(const Model& m, const py::object& text, const py::object& ids, int64_t ctx,
                       std::optional<int64_t> stride, const py::object& callback)
{
    const auto input = loss_ids(m, text, ids);
    if (input.size() < 2)
        throw InputError("token_losses: the input has " + std::to_string(input.size()) +
                         " token(s); at least 2 are needed");
    if (ctx < 1)
        throw InputError("token_losses: ctx must be at least 1, got " + std::to_string(ctx));
    if (ctx > m.live()->max_context())
        throw InputError("token_losses: ctx=" + std::to_string(ctx) + " exceeds the " +
                         std::to_string(m.live()->max_context()) +
                         "-token context the model was trained for");
    const int64_t s = stride.value_or(ctx);
    if (s < 1 || s > ctx)
        throw InputError("token_losses: stride must be between 1 and ctx (" + std::to_string(ctx) +
                         "), got " + std::to_string(s));
    const PerplexityOptions options{.ctx = ctx, .stride = s};
    PythonProgress progress(callback, "token_losses: progress");
    // The engine's per-position NLLs are kept by its divergence evaluation; against the
    // model itself its scored positions and NLLs are perplexity's.
    auto d = without_gil(progress, [&] {
        return evaluate_divergence(*m.live(), *m.live(), input, options, progress.plain("token_losses"));
    });
    auto nll = std::make_shared<std::vector<double>>(std::move(d.positions.nll));
    py::capsule base(new std::shared_ptr<std::vector<double>>(nll),
                     [](void* p) { delete static_cast<std::shared_ptr<std::vector<double>>*>(p); });
    return py::array_t<double>({static_cast<py::ssize_t>(nll->size())}, nll->data(), base);
}

} // namespace

void bind_tables(py::module_& module)
{
    auto cls = py::reinterpret_borrow<py::class_<Model>>(module.attr("Model"));
    cls.def("with_table", &with_table, py::arg("table"),
            "This model (architecture, tokenizer, other weights) with `table` [V, d] as its token "
            "embedding (copied as float32; a tied head follows it). The model itself is unchanged.")
        .def("token_losses", &token_losses, py::kw_only(), py::arg("text") = py::none(),
             py::arg("ids") = py::none(), py::arg("ctx") = 128, py::arg("stride") = py::none(),
             py::arg("progress") = py::none(),
             "The NLL (nats, float64) of each token perplexity() scores, in its order: as many as its "
             "'tokens', their mean its 'nll_per_token'.");
}

} // namespace embedlab::python
