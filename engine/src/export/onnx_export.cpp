// ONNX export: the graph from onnx_decoder.cpp (or one embedding's), written with the
// ONNX project's protobuf classes, checked by its checker and strict shape inference,
// then written atomically (with external data: the data file first, then the graph). The
// tensors' bytes never enter the protobuf message: they are written from the graph's
// initializers a tensor at a time, so the peak is the model plus one converted block.
#include "embedlab/onnx_export.hpp"

#include <fstream>

#include <google/protobuf/message.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "embedlab/file_output.hpp"
#include "embedlab/output_checks.hpp"
#include "embedlab/quant_types.hpp"
#include "embedlab/quantised_table.hpp"
#include "export/onnx_decoder.hpp"
#include "export/onnx_encoder.hpp"
#include "io/atomic_stream.hpp"
#include "io/onnx_graph.hpp"
#include "io/safetensors.hpp"

namespace embedlab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kProducer = "EmbedLab";
// Past this many bytes of tensors a single protobuf message cannot hold them (2 GiB).
constexpr uint64_t kInlineLimit = uint64_t{1} << 31;
// Tensors of this size or more start at a page in the data file, so a runtime can map them.
constexpr uint64_t kAlignFrom = 64 * 1024, kAlignment = 4096;
// With external data, smaller tensors (shapes, axes, scalars) stay in the graph, where
// shape inference and a runtime's constant folding read them (as Optimum's exports do).
constexpr uint64_t kExternalFrom = 1024;

int32_t element_type(torch::ScalarType t)
{
    switch (t) {
    case torch::kFloat32:
        return ::onnx::TensorProto::FLOAT;
    case torch::kFloat16:
        return ::onnx::TensorProto::FLOAT16;
    case torch::kBFloat16:
        return ::onnx::TensorProto::BFLOAT16;
    case torch::kInt64:
        return ::onnx::TensorProto::INT64;
    case torch::kInt32:
        return ::onnx::TensorProto::INT32;
    case torch::kInt8:
        return ::onnx::TensorProto::INT8;
    case torch::kUInt8:
        return ::onnx::TensorProto::UINT8;
    default:
        throw InputError("ONNX export: no ONNX element type for " + std::string(c10::toString(t)));
    }
}

void set_value_info(::onnx::ValueInfoProto* info, const onnx::GraphValue& v)
{
    info->set_name(v.name);
    auto* tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(static_cast<int32_t>(v.type));
    auto* shape = tensor->mutable_shape();
    for (const auto& d : v.dims) {
        auto* dim = shape->add_dim();
        if (std::holds_alternative<int64_t>(d))
            dim->set_dim_value(std::get<int64_t>(d));
        else
            dim->set_dim_param(std::get<std::string>(d));
    }
}

void set_attribute(::onnx::AttributeProto* a, const onnx::Attribute& attribute)
{
    a->set_name(attribute.name);
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, int64_t>) {
                a->set_type(::onnx::AttributeProto::INT);
                a->set_i(v);
            } else if constexpr (std::is_same_v<T, float>) {
                a->set_type(::onnx::AttributeProto::FLOAT);
                a->set_f(v);
            } else if constexpr (std::is_same_v<T, std::string>) {
                a->set_type(::onnx::AttributeProto::STRING);
                a->set_s(v);
            } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
                a->set_type(::onnx::AttributeProto::INTS);
                for (auto x : v)
                    a->add_ints(x);
            } else {
                a->set_type(::onnx::AttributeProto::FLOATS);
                for (auto x : v)
                    a->add_floats(x);
            }
        },
        attribute.value);
}

// A tensor of the graph whose bytes are not in the proto: written from the graph's
// initializer (the model's own memory, or converted a block at a time) as the file is.
struct Payload {
    int index = 0; // among the graph proto's initializers
    onnx::Initializer tensor;
    uint64_t offset = 0; // in the data file, with external data
};

struct Written {
    ::onnx::ModelProto model; // the payloads' tensors without their bytes
    std::vector<Payload> payloads;
    uint64_t data_bytes = 0; // the external data file's size; 0 when inline
};

// The model proto of `graph`. Tensors of kExternalFrom bytes or more are payloads: with
// external data they are given their place in the data file (named `data_name`), inline
// their raw_data is streamed into the file by write_inline.
Written to_proto(const onnx::Graph& graph, const std::vector<onnx::GraphValue>& inputs,
                 const std::vector<onnx::GraphValue>& outputs, const OnnxExportOptions& options,
                 bool external, const std::string& data_name, const std::string& graph_name,
                 const std::map<std::string, std::string>& metadata)
{
    Written w;
    auto& m = w.model;
    m.set_ir_version(8); // opset 17's IR version
    m.set_producer_name(kProducer);
    m.set_producer_version(EMBEDLAB_VERSION);
    auto* opset = m.add_opset_import();
    opset->set_domain("");
    opset->set_version(options.opset);
    for (const auto& [k, v] : metadata) {
        auto* p = m.add_metadata_props();
        p->set_key(k);
        p->set_value(v);
    }
    auto* g = m.mutable_graph();
    g->set_name(graph_name);
    for (const auto& v : inputs)
        set_value_info(g->add_input(), v);
    for (const auto& v : outputs)
        set_value_info(g->add_output(), v);
    for (const auto& tensor : graph.initializers()) {
        auto* p = g->add_initializer();
        p->set_name(tensor.name);
        for (auto s : tensor.value.sizes())
            p->add_dims(s);
        p->set_data_type(element_type(tensor.type));
        const auto bytes = tensor.bytes();
        if (bytes < kExternalFrom) {
            tensor.write_bytes([&](std::string_view b) { p->mutable_raw_data()->append(b); });
            continue;
        }
        w.payloads.push_back({g->initializer_size() - 1, tensor, 0});
        if (!external)
            continue;
        if (bytes >= kAlignFrom && w.data_bytes % kAlignment)
            w.data_bytes = (w.data_bytes / kAlignment + 1) * kAlignment;
        w.payloads.back().offset = w.data_bytes;
        p->set_data_location(::onnx::TensorProto::EXTERNAL);
        for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", data_name},
                                   {"offset", std::to_string(w.data_bytes)},
                                   {"length", std::to_string(bytes)}}) {
            auto* e = p->add_external_data();
            e->set_key(k);
            e->set_value(v);
        }
        w.data_bytes += bytes;
    }
    int64_t index = 0;
    for (const auto& node : graph.nodes()) {
        auto* n = g->add_node();
        n->set_op_type(node.op);
        n->set_name(node.op + "_" + std::to_string(index++));
        for (const auto& i : node.inputs)
            n->add_input(i);
        for (const auto& o : node.outputs)
            n->add_output(o);
        for (const auto& a : node.attributes)
            set_attribute(n->add_attribute(), a);
    }
    return w;
}

// The ONNX checker and strict shape inference (types too), on the graph in memory or,
// with external data, on the file written at `path`.
void check(::onnx::ModelProto& model, const fs::path& path, bool external, const std::string& label)
{
    try {
        if (external)
            ::onnx::checker::check_model(path.string());
        else
            ::onnx::checker::check_model(model);
        ::onnx::shape_inference::InferShapes(model, ::onnx::OpSchemaRegistry::Instance(),
                                             ::onnx::ShapeInferenceOptions(true, 1, false));
        model.mutable_graph()->clear_value_info();
    } catch (const std::exception& e) {
        throw InputError(label +
                         ": the ONNX checker refused the exported graph (an EmbedLab bug; please "
                         "report it): " +
                         e.what());
    }
}

std::string data_file_name(const fs::path& out)
{
    return out.filename().string() + ".data";
}

// "" when `path` is an ONNX file EmbedLab exported, else why not.
std::string onnx_written_by_embedlab(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    ::onnx::ModelProto m;
    if (!in || !m.ParseFromIstream(&in))
        return "is not an ONNX file EmbedLab wrote";
    if (m.producer_name() != kProducer)
        return "is an ONNX file EmbedLab did not write (producer '" + m.producer_name() + "')";
    return "";
}

// A ByteSink that gathers small pieces into 1 MiB writes; large ones go straight through.
class BufferedSink {
public:
    explicit BufferedSink(const io::ByteSink& sink) : sink_(sink) {}
    void operator()(std::string_view bytes)
    {
        written_ += bytes.size();
        if (buffer_.size() + bytes.size() > kBuffer)
            flush();
        if (bytes.size() >= kBuffer)
            sink_(bytes);
        else
            buffer_.append(bytes);
    }
    void flush()
    {
        if (!buffer_.empty())
            sink_(buffer_);
        buffer_.clear();
    }
    uint64_t written() const { return written_; }

private:
    static constexpr size_t kBuffer = size_t{1} << 20;
    const io::ByteSink& sink_;
    std::string buffer_;
    uint64_t written_ = 0;
};

void append_varint(std::string& out, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    out.push_back(static_cast<char>(v));
}

// A length-delimited field's key and length, as protobuf writes them.
std::string field_head(int number, uint64_t length)
{
    std::string out;
    append_varint(out, (static_cast<uint64_t>(number) << 3) | 2);
    append_varint(out, length);
    return out;
}

// The bytes protobuf writes for the fields of `m` numbered below `number` (`below`) or
// above it: it writes a message's fields in the order of their numbers, so the two halves
// around a field are these.
std::string fields_around(const google::protobuf::Message& m, int number, bool below)
{
    std::unique_ptr<google::protobuf::Message> part(m.New());
    part->CopyFrom(m);
    const auto* reflection = part->GetReflection();
    std::vector<const google::protobuf::FieldDescriptor*> fields;
    reflection->ListFields(*part, &fields);
    for (const auto* f : fields)
        if (below ? f->number() >= number : f->number() <= number)
            reflection->ClearField(part.get(), f);
    return part->SerializeAsString();
}

// Writes w.model with each payload's bytes as its raw_data: the bytes protobuf's serialiser
// writes for the model holding them all (what an export wrote before, when it did hold
// them: the model twice over at the peak, issue 57 item 9), a tensor at a time. The graph
// and its tensors are taken apart (w.model keeps neither). Returns the bytes written.
uint64_t write_inline(Written& w, const io::ByteSink& out)
{
    using Model = ::onnx::ModelProto;
    using Graph = ::onnx::GraphProto;
    using Tensor = ::onnx::TensorProto;
    Graph graph;
    graph.Swap(w.model.mutable_graph());
    w.model.clear_graph();
    google::protobuf::RepeatedPtrField<Tensor> tensors;
    tensors.Swap(graph.mutable_initializer());
    // Each tensor as its bytes before its raw_data, the raw_data (a payload's) and those after.
    struct Piece {
        std::string before, after;
        const Payload* payload = nullptr;
        uint64_t size = 0; // the tensor message's
    };
    std::vector<Piece> pieces(static_cast<size_t>(tensors.size()));
    for (auto& p : w.payloads)
        pieces[static_cast<size_t>(p.index)].payload = &p;
    uint64_t graph_size = 0;
    for (int i = 0; i < tensors.size(); ++i) {
        auto& piece = pieces[static_cast<size_t>(i)];
        if (!piece.payload) {
            piece.before = tensors.Get(i).SerializeAsString();
        } else {
            piece.before = fields_around(tensors.Get(i), Tensor::kRawDataFieldNumber, true);
            piece.before += field_head(Tensor::kRawDataFieldNumber, piece.payload->tensor.bytes());
            piece.after = fields_around(tensors.Get(i), Tensor::kRawDataFieldNumber, false);
        }
        piece.size =
            piece.before.size() + piece.after.size() + (piece.payload ? piece.payload->tensor.bytes() : 0);
        graph_size += field_head(Graph::kInitializerFieldNumber, piece.size).size() + piece.size;
    }
    tensors.Clear();
    const auto graph_before = fields_around(graph, Graph::kInitializerFieldNumber, true);
    const auto graph_after = fields_around(graph, Graph::kInitializerFieldNumber, false);
    graph_size += graph_before.size() + graph_after.size();

    BufferedSink sink(out);
    sink(fields_around(w.model, Model::kGraphFieldNumber, true));
    sink(field_head(Model::kGraphFieldNumber, graph_size));
    sink(graph_before);
    for (const auto& piece : pieces) {
        sink(field_head(Graph::kInitializerFieldNumber, piece.size));
        sink(piece.before);
        if (piece.payload)
            piece.payload->tensor.write_bytes([&](std::string_view b) { sink(b); });
        sink(piece.after);
    }
    sink(graph_after);
    sink(fields_around(w.model, Model::kGraphFieldNumber, false));
    sink.flush();
    return sink.written();
}

// The model as the ONNX checker sees it inline: each payload a graph input of its type and
// shape instead of an initializer, so that no tensor's bytes are copied into the proto
// (the checker reads only small constants' values, which stay in it).
::onnx::ModelProto model_to_check(const Written& w)
{
    auto m = w.model;
    auto* g = m.mutable_graph();
    google::protobuf::RepeatedPtrField<::onnx::TensorProto> kept;
    size_t next = 0;
    for (int i = 0; i < g->initializer_size(); ++i) {
        const auto& t = g->initializer(i);
        if (next < w.payloads.size() && w.payloads[next].index == i) {
            ++next;
            auto* input = g->add_input();
            input->set_name(t.name());
            auto* type = input->mutable_type()->mutable_tensor_type();
            type->set_elem_type(t.data_type());
            auto* shape = type->mutable_shape();
            for (auto d : t.dims())
                shape->add_dim()->set_dim_value(d);
        } else {
            *kept.Add() = t;
        }
    }
    g->mutable_initializer()->Swap(&kept);
    return m;
}

uint64_t write_model(Written& w, const fs::path& out, bool external, const std::string& label)
{
    const auto data_path = out.parent_path() / data_file_name(out);
    if (!external) {
        auto checked = model_to_check(w);
        check(checked, out, false, label);
        uint64_t bytes = 0;
        io::write_file_atomic_streamed(out, [&](const io::ByteSink& sink) { bytes = write_inline(w, sink); });
        return bytes;
    }
    // The data file a tensor at a time, each at its offset (zeros between, for alignment).
    io::write_file_atomic_streamed(data_path, [&](const io::ByteSink& sink) {
        const std::string zeros(kAlignment, '\0');
        uint64_t at = 0;
        for (const auto& p : w.payloads) {
            if (p.offset > at)
                sink(std::string_view(zeros).substr(0, p.offset - at));
            p.tensor.write_bytes(sink);
            at = p.offset + p.tensor.bytes();
        }
    });
    std::string bytes;
    try {
        if (!w.model.SerializeToString(&bytes))
            throw InputError(label + ": could not serialise the ONNX graph");
        // Checked as a file (the checker reads the data file beside it), then renamed.
        const auto temp = out.parent_path() / (out.filename().string() + ".tmp-check");
        write_file_atomic(temp, bytes);
        try {
            check(w.model, temp, true, label);
        } catch (...) {
            fs::remove(temp);
            throw;
        }
        fs::rename(temp, out);
    } catch (...) {
        std::error_code ec;
        fs::remove(data_path, ec);
        throw;
    }
    return bytes.size() + w.data_bytes;
}

uint64_t initializer_bytes(const onnx::Graph& g)
{
    uint64_t total = 0;
    for (const auto& t : g.initializers())
        total += t.bytes();
    return total;
}

// Factors a compressed directory stores at a ggml type (compress --store): the graph
// reads their blocks as stored and dequantises them (quant's own ONNX lookup over every
// row), so the file holds the directory's bytes, not the float32 the model was built from.
void substitute_stored_factors(const ModelFiles& files, onnx::Graph& graph)
{
    if (files.embedlab_manifest.empty())
        return;
    const auto manifest = nlohmann::json::parse(files.embedlab_manifest, nullptr, false);
    if (!manifest.is_object() || !manifest.contains("stored_types") ||
        !manifest["stored_types"].is_object() || manifest["stored_types"].empty())
        return;
    const auto file = io::load_safetensors_file(files.path / "model.safetensors");
    for (const auto& [name, type_json] : manifest["stored_types"].items()) {
        const auto* q = type_json.is_string() ? find_quant_type(type_json.get<std::string>()) : nullptr;
        const auto it = file.weights.find(name);
        if (!q || it == file.weights.end() || it->second.dim() != 2)
            continue; // the loader has refused such a directory already
        const auto& blocks = it->second;
        const int64_t rows = blocks.size(0), row_bytes = blocks.size(1);
        const auto bytes_per_block =
            static_cast<int64_t>(std::llround(q->bits_per_value * q->block_values / 8));
        const int64_t n = row_bytes / bytes_per_block * q->block_values;
        auto table = std::make_shared<QuantisedTokenEmbedding>(q->name, n, blocks);
        graph.substitute(
            name + " (" + q->name + ")", table->rebuilt_rows(),
            [table, rows, name](onnx::Graph& g, const std::vector<int64_t>& shape) {
                onnx::Graph::Scope scope(g, name + ".");
                const auto all = g.op("Range", {g.int_scalar(0), g.int_scalar(rows), g.int_scalar(1)});
                return g.reshape(table->onnx_lookup(g, all), shape);
            });
    }
}

ModelExportReport export_decoder(const LanguageModel& model, const fs::path& out,
                                 const OnnxExportOptions& options, const ProgressFn& progress,
                                 const fs::path& source, const std::function<void(onnx::Graph&)>& prepare);

} // namespace

std::string onnx_export_refusal(const LanguageModel& model)
{
    try {
        onnx::Graph g;
        if (model.config().is_encoder())
            onnx::write_encoder(model, g, {});
        else
            onnx::write_decoder(model, g, false, {});
        return "";
    } catch (const InputError& e) {
        return e.what();
    }
}

void check_onnx_export_target(const fs::path& out, bool overwrite, const std::vector<fs::path>& inputs)
{
    check_output_file(out, overwrite, inputs, onnx_written_by_embedlab);
    // Its data file is EmbedLab's when the graph beside it is.
    const auto data = out.parent_path() / data_file_name(out);
    check_output_file(data, overwrite, inputs, [&](const fs::path&) {
        return fs::exists(out) && onnx_written_by_embedlab(out).empty()
                   ? std::string()
                   : "is not the data file of an ONNX export of EmbedLab's";
    });
}

ModelExportReport export_onnx(const LoadedModel& lm, const fs::path& out, const OnnxExportOptions& options,
                              const ProgressFn& progress)
{
    return export_onnx(*lm.model, out, options, progress, lm.files.path, &lm.files);
}

ModelExportReport export_onnx(const LanguageModel& model, const fs::path& out,
                              const OnnxExportOptions& options, const ProgressFn& progress,
                              const fs::path& source, const ModelFiles* files)
{
    return export_decoder(model, out, options, progress, source, [&](onnx::Graph& g) {
        if (files)
            substitute_stored_factors(*files, g);
    });
}

namespace {

ModelExportReport export_decoder(const LanguageModel& model, const fs::path& out,
                                 const OnnxExportOptions& options, const ProgressFn& progress,
                                 const fs::path& source, const std::function<void(onnx::Graph&)>& prepare)
{
    if (options.opset != 17)
        throw InputError("--opset " + std::to_string(options.opset) +
                         ": EmbedLab writes ONNX opset 17 (LayerNormalization's first; the newest "
                         "Debian's ONNX checker knows)");
    const std::string label = out.string();
    check_onnx_export_target(out, options.overwrite,
                             source.empty() ? std::vector<fs::path>{} : std::vector<fs::path>{source});
    create_parent_directories(out);
    onnx::Graph graph;
    if (prepare)
        prepare(graph);
    if (model.config().is_encoder() && options.with_past)
        throw InputError("--with-past is for decoders: an encoder reads its whole input at once");
    const auto io = model.config().is_encoder()
                        ? onnx::write_encoder(model, graph, progress)
                        : onnx::write_decoder(model, graph, options.with_past, progress);
    for (const auto& factor : graph.unused_substitutes())
        graph.note("factor " + factor + " is written as float32: the table holds it rearranged");
    ModelExportReport report;
    const bool external =
        options.external_data || initializer_bytes(graph) >= kInlineLimit - (uint64_t{64} << 20);
    if (external && !options.external_data)
        report.notes.push_back("tensors written to " + data_file_name(out) +
                               " beside the graph: past 2 GiB a single ONNX file cannot hold them");
    const auto& c = model.config();
    const auto& e = model.token_embedding();
    report.tensors = static_cast<int64_t>(graph.initializers().size());
    auto w = to_proto(graph, io.inputs, io.outputs, options, external, data_file_name(out), c.type_name(),
                      {{"embedlab.architecture", c.type_name()},
                       {"embedlab.token_embedding", e.kind()},
                       {"embedlab.source", source.string()}});
    report.bytes = write_model(w, out, external, label);
    report.path = out;
    report.architecture = c.type_name();
    report.embedding_type = e.kind();
    if (!dense_table(&e))
        report.notes.push_back("token embedding written as its " + e.kind() + " factors" +
                               (c.tied_embeddings ? "; the tied head multiplies by them" : ""));
    for (const auto& n : graph.notes())
        report.notes.push_back(n);
    return report;
}

} // namespace

ModelExportReport export_onnx_embedding(const TokenEmbedding& embedding, const fs::path& out,
                                        const OnnxExportOptions& options)
{
    const std::string label = out.string();
    check_onnx_export_target(out, options.overwrite);
    create_parent_directories(out);
    onnx::Graph graph;
    using Dims = std::vector<std::variant<int64_t, std::string>>;
    const auto rows = embedding.onnx_lookup(graph, "ids");
    const auto logits = rows.empty() ? rows : embedding.onnx_project(graph, "hidden");
    if (rows.empty() || logits.empty())
        throw InputError(label + ": the " + embedding.kind() + " token embedding has no ONNX lookup yet");
    graph.op("Identity", {rows}, {}, "rows");
    graph.op("Identity", {logits}, {}, "logits");
    const std::vector<onnx::GraphValue> inputs{{"ids", onnx::kInt64, Dims{"n"}},
                                               {"hidden", onnx::kFloat, Dims{"m", embedding.dim()}}};
    const std::vector<onnx::GraphValue> outputs{{"rows", onnx::kFloat, Dims{"n", embedding.dim()}},
                                                {"logits", onnx::kFloat, Dims{"m", embedding.vocab_size()}}};
    ModelExportReport report;
    report.tensors = static_cast<int64_t>(graph.initializers().size());
    auto w = to_proto(graph, inputs, outputs, options, options.external_data, data_file_name(out),
                      "embedding", {{"embedlab.token_embedding", embedding.kind()}});
    report.bytes = write_model(w, out, options.external_data, label);
    report.path = out;
    report.embedding_type = embedding.kind();
    report.notes = graph.notes();
    return report;
}

} // namespace embedlab
