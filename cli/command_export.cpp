// embedlab-cli export MODEL --format gguf|hf|onnx [--type f32|f16|q8_0] [--embedding-type T]
//                     [--output-type T] [--with-past] [--external-data] [--opset N] --out PATH
#include "common.hpp"
#include "embedlab/model_export.hpp"
#include "embedlab/onnx_export.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

int command_export(const std::vector<std::string>& argv)
{
    Args args("export", argv,
              {"--format", "--type", "--embedding-type", "--output-type", "--out", "--tokenizer", "--opset"},
              {"--force", "--json", "--quiet", "--no-verify", "--with-past", "--external-data"});
    const std::string out = args.required("--out", "PATH", "a .gguf file, or a directory for --format hf");
    const std::string format = args.get("--format").value_or("gguf");
    if (format != "gguf" && format != "hf" && format != "onnx")
        throw InputError("export: --format '" + format + "': use gguf, hf or onnx");
    for (const char* o : {"--type", "--embedding-type", "--output-type"})
        if (format != "gguf" && args.get(o))
            throw InputError(std::string("export: ") + o + " applies to --format gguf (" + format +
                             " writes float32)");
    for (const char* o : {"--with-past", "--external-data", "--opset"})
        if (format != "onnx" && args.has(o))
            throw InputError(std::string("export: ") + o + " applies to --format onnx");
    const bool force = args.has("--force");
    const auto path = model_argument(args);
    // Before any work: the output is free or EmbedLab's own export, and never the input.
    if (format == "hf")
        prepare_output_directory(out, force, {path});
    else if (format == "onnx")
        check_onnx_export_target(out, force, {path});
    else
        check_gguf_export_target(out, force, {path});

    auto options = load_options(args);
    options.need_tokenizer = format != "onnx"; // the ONNX graph takes ids; GGUF embeds the vocabulary
    const auto lm = load_model(path, options);
    print_warnings(lm.files.warnings);
    const bool quiet = args.has("--quiet") || args.has("--json");
    ProgressPrinter bar("export", format == "onnx" ? "layers" : "tensors", quiet);
    ModelExportReport report;
    if (format == "gguf") {
        GgufExportOptions o;
        o.type = gguf_export_type(args.get("--type").value_or("f16"));
        o.embedding_type = args.get("--embedding-type").value_or("");
        o.output_type = args.get("--output-type").value_or("");
        o.overwrite = force;
        report = export_gguf(lm, out, o, bar.callback());
    } else if (format == "onnx") {
        OnnxExportOptions o;
        o.opset = static_cast<int>(args.get_int("--opset", 17, 1, 100));
        o.with_past = args.has("--with-past");
        o.external_data = args.has("--external-data");
        o.overwrite = force;
        report = export_onnx(lm, out, o, bar.callback());
    } else {
        report = export_hf_dense(lm, out, force, bar.callback());
    }
    if (args.has("--json")) {
        print_json({{"model", path.string()},
                    {"out", report.path.string()},
                    {"format", format},
                    {"type", format == "gguf" ? args.get("--type").value_or("f16") : "f32"},
                    {"embedding_type", format == "hf" ? "f32" : report.embedding_type},
                    {"output_type", format == "gguf" ? report.output_type : ""},
                    {"architecture", report.architecture},
                    {"tensors", report.tensors},
                    {"bytes", report.bytes},
                    {"notes", report.notes}});
        return 0;
    }
    std::printf("wrote %s (%s, %s, %lld tensors, %.1f MB)\n", report.path.c_str(), format.c_str(),
                report.architecture.c_str(), (long long)report.tensors,
                static_cast<double>(report.bytes) / 1e6);
    if (format == "gguf")
        std::printf("  token table %s%s\n", report.embedding_type.c_str(),
                    report.architecture == "bert" ? "" // no token head in llama.cpp's bert
                    : report.output_type.empty()  ? " (the head too: tied)"
                                                  : (", output head " + report.output_type).c_str());
    for (const auto& n : report.notes)
        std::printf("  note: %s\n", n.c_str());
    return 0;
}

} // namespace embedlab::cli
