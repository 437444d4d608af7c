// Running an exported .onnx file in ONNX Runtime from tests: the npm package onnxruntime-node
// (1.30.0), which scripts/setup.sh --with-tests installs into <build>/test-tools/onnxruntime,
// run by node with resources/onnx/ort_run.mjs (the script `embedlab-cli bench onnx` runs too),
// one node process per call.
//
//   if (!test::have_onnxruntime())
//       GTEST_SKIP() << test::onnxruntime_skip_reason();
//   const auto run = test::run_onnx(path, {{"input_ids", ids}, {"hidden", h}}, {"logits"});
//   run.outputs.at("logits");   // float32, in the shape ONNX Runtime gave it
//
// Inputs are int64, int32 or float32 tensors of any shape (on the CPU or not, contiguous or
// not); outputs come back as float32 (ort_run.mjs converts other element types). A call
// costs node's start and the library's load (about 0.2 s) besides the model's. The times and
// the peak resident set are the node process's: load_seconds is the session's creation (the
// model's parsing and graph optimisation), run_seconds the mean of `repeat` runs,
// peak_rss_bytes includes node's own (about 40 MB) and the library's with an empty session
// (about 40 MB more). ONNX Runtime runs on EMBEDLAB_THREADS intra-op threads when that is set
// (scripts/test.sh sets 1), else on its own choice (a thread per core).
// run_onnx throws std::runtime_error with node's stderr when the run fails, and when ONNX
// Runtime is not installed (test with have_onnxruntime() first).
//
// The installation: EMBEDLAB_ONNXRUNTIME_DIR when set, else <build>/test-tools/onnxruntime,
// found from the test executable (<build>/tests/<exe>, by /proc/self/exe). node is `node` on
// PATH, or EMBEDLAB_NODE (Debian 12's nodejs 18 and NodeSource's 20 both run it).
//
// arm64: run_onnx(..., repeat, "arm64") runs the file in the same package's arm64 build of
// ONNX Runtime (bin/napi-v6/linux/arm64) with Debian's arm64 node under qemu's user mode
// emulation: `qemu-aarch64-static -L ROOT ROOT/usr/bin/node`. qemu is qemu-aarch64-static on
// PATH (Debian's qemu-user-static; no binfmt_misc needed) or EMBEDLAB_QEMU_AARCH64; ROOT is
// EMBEDLAB_ARM64_ROOT, else <build>/test-tools/arm64-node, into which the arm64 .debs of
// Debian's nodejs and what it needs (18 packages, 25 MB) are extracted, without touching
// apt's or dpkg's configuration (about 10 s):
//   R=build/test-tools/arm64-node T=$R.apt
//   A="-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::State::Lists=$T/lists
//      -o Dir::State::status=$T/status -o Dir::Cache=$T/cache"
//   mkdir -p $T/lists/partial $T/cache/archives/partial $R && touch $T/status
//   apt-get $A update
//   (cd $T && apt-get $A download $(apt-get $A install -s --no-install-recommends nodejs |
//                                   awk '/^Inst/ {print $2}'))
//   for d in $T/*.deb; do dpkg-deb -x $d $R; done
// have_onnxruntime("arm64") and onnxruntime_skip_reason("arm64") say whether it is there.
// Emulated, node starts in about 1 s and the model loads and runs some 10-30 times slower;
// the times and the peak resident set are the emulation's (qemu's own memory included).
//
// Thread safety: every function may be called from several threads at once: each run_onnx call
// has its own temporary directory and node process, and the others only read the environment,
// /proc/self/exe and the file system.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <torch/torch.h>

#include "test_support.hpp"

namespace embedlab::test {

namespace onnx_runtime_detail {

inline std::string env_or(const char* name, const std::string& otherwise)
{
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : otherwise;
}

// `s` in single quotes for sh.
inline std::string quoted(const std::string& s)
{
    std::string out = "'";
    for (char c : s)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

inline std::filesystem::path script_path()
{
#ifdef EMBEDLAB_SOURCE_DIR
    return std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "resources" / "onnx" / "ort_run.mjs";
#else
    return std::filesystem::path(__FILE__).parent_path().parent_path() / "resources" / "onnx" / "ort_run.mjs";
#endif
}

inline std::string host_arch()
{
#if defined(__aarch64__)
    return "arm64";
#else
    return "x64";
#endif
}

// Whether sh finds `program` (a name on PATH or a path).
inline bool runnable(const std::string& program)
{
    return std::system(("command -v " + quoted(program) + " > /dev/null 2>&1").c_str()) == 0;
}

// <build>, from <build>/tests/<exe>.
inline std::filesystem::path build_dir()
{
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path("build") : exe.parent_path().parent_path();
}

inline std::filesystem::path arm64_root()
{
    if (const char* env = std::getenv("EMBEDLAB_ARM64_ROOT"); env && *env)
        return env;
    return build_dir() / "test-tools" / "arm64-node";
}

inline std::string qemu_aarch64()
{
    return env_or("EMBEDLAB_QEMU_AARCH64", "qemu-aarch64-static");
}

inline std::string node_program()
{
    return env_or("EMBEDLAB_NODE", "node");
}

} // namespace onnx_runtime_detail

// The directory that holds node_modules/onnxruntime-node.
inline std::filesystem::path onnxruntime_dir()
{
    if (const char* env = std::getenv("EMBEDLAB_ONNXRUNTIME_DIR"); env && *env)
        return env;
    return onnx_runtime_detail::build_dir() / "test-tools" / "onnxruntime";
}

// Why ONNX Runtime cannot run here for `arch` ("x64" or "arm64"); empty when it can.
inline std::string onnxruntime_missing(const std::string& arch = onnx_runtime_detail::host_arch())
{
    namespace d = onnx_runtime_detail;
    const auto package = onnxruntime_dir() / "node_modules" / "onnxruntime-node";
    if (!std::filesystem::exists(package / "package.json"))
        return "npm's onnxruntime-node is not installed in " + onnxruntime_dir().string() +
               " (scripts/setup.sh --with-tests installs it there; or set EMBEDLAB_ONNXRUNTIME_DIR to a "
               "directory that holds node_modules/onnxruntime-node)";
    const auto binding = package / "bin" / "napi-v6" / "linux" / arch / "onnxruntime_binding.node";
    if (!std::filesystem::exists(binding))
        return "ONNX Runtime's " + arch + " library is not in " + binding.parent_path().string() +
               " (a partial install? scripts/setup.sh --with-tests installs it anew after rm -r " +
               onnxruntime_dir().string() + ")";
    if (arch == d::host_arch()) {
        if (!d::runnable(d::node_program()))
            return "node (" + d::node_program() +
                   ") is not on PATH (Debian package nodejs; scripts/setup.sh --with-tests installs it)";
        return "";
    }
    if (arch != "arm64")
        return "ONNX Runtime runs on the host's architecture (" + d::host_arch() + ") or arm64, not " + arch;
    if (!d::runnable(d::qemu_aarch64()))
        return d::qemu_aarch64() +
               " is not on PATH (Debian package qemu-user-static; or set EMBEDLAB_QEMU_AARCH64)";
    if (!std::filesystem::exists(d::arm64_root() / "usr" / "bin" / "node"))
        return "no arm64 node in " + d::arm64_root().string() +
               " (EMBEDLAB_ARM64_ROOT): extract the arm64 .debs of Debian's nodejs and what it needs there "
               "(tests/onnx_runtime.hpp says how)";
    return "";
}

inline bool have_onnxruntime(const std::string& arch = onnx_runtime_detail::host_arch())
{
    return onnxruntime_missing(arch).empty();
}

// The message for GTEST_SKIP() when !have_onnxruntime(arch).
inline std::string onnxruntime_skip_reason(const std::string& arch = onnx_runtime_detail::host_arch())
{
    const auto why = onnxruntime_missing(arch);
    return why.empty() ? "ONNX Runtime is available" : "needs ONNX Runtime (" + arch + "): " + why;
}

namespace onnx_runtime_detail {

// The shell command that runs ort_run.mjs' node for `arch`, with EMBEDLAB_ONNXRUNTIME_DIR set
// (arguments follow it).
inline std::string node_command(const std::string& arch = host_arch())
{
    const std::string env = "EMBEDLAB_ONNXRUNTIME_DIR=" + quoted(onnxruntime_dir().string()) + " ";
    if (arch == host_arch())
        return env + quoted(node_program());
    // qemu -L: the guest's absolute paths (its loader, libraries, Debian node's
    // /usr/share/nodejs) are looked up in the root first.
    const auto root = arm64_root();
    return env + quoted(qemu_aarch64()) + " -L " + quoted(root.string()) + " " +
           quoted((root / "usr" / "bin" / "node").string());
}

inline const char* type_name(const torch::Tensor& t)
{
    switch (t.scalar_type()) {
    case torch::kLong:
        return "int64";
    case torch::kInt:
        return "int32";
    case torch::kFloat:
        return "float32";
    default:
        return nullptr;
    }
}

} // namespace onnx_runtime_detail

struct OrtRun {
    std::map<std::string, torch::Tensor> outputs; // float32, ONNX Runtime's shapes
    double load_seconds = 0;                      // the session's creation
    double run_seconds = 0;                       // per run, the mean of `repeat`
    int64_t peak_rss_bytes = 0;                   // node's peak resident set
};

// Runs `model` once per `repeat` with `inputs` (name, tensor) and returns the `outputs` named.
// `arch`: "x64" (on an x86 host; the default is the host's), or "arm64" under qemu (above).
inline OrtRun run_onnx(const std::filesystem::path& model,
                       const std::vector<std::pair<std::string, torch::Tensor>>& inputs,
                       const std::vector<std::string>& outputs, int repeat = 1,
                       const std::string& arch = onnx_runtime_detail::host_arch())
{
    namespace d = onnx_runtime_detail;
    if (const auto why = onnxruntime_missing(arch); !why.empty())
        throw std::runtime_error("run_onnx(" + model.string() + "): " + why);
    TempDir tmp;
    nlohmann::json request{
        {"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()}, {"repeat", repeat}};
    for (size_t i = 0; i < inputs.size(); ++i) {
        const auto& [name, tensor] = inputs[i];
        const char* type = d::type_name(tensor);
        if (!type)
            throw std::runtime_error("run_onnx: input '" + name + "' is " +
                                     std::string(c10::toString(tensor.scalar_type())) +
                                     "; it can be int64, int32 or float32");
        const auto t = tensor.to(torch::kCPU).contiguous();
        const std::string file = "in" + std::to_string(i) + ".bin";
        std::ofstream out(tmp / file, std::ios::binary);
        out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
        if (!out.flush())
            throw std::runtime_error("run_onnx: cannot write " + (tmp / file).string());
        request["inputs"].push_back(
            {{"name", name}, {"type", type}, {"shape", t.sizes().vec()}, {"file", file}});
    }
    if (const char* threads = std::getenv("EMBEDLAB_THREADS"); threads && std::atoi(threads) > 0)
        request["threads"] = std::atoi(threads);
    for (size_t i = 0; i < outputs.size(); ++i)
        request["outputs"].push_back({{"name", outputs[i]}, {"file", "out" + std::to_string(i) + ".bin"}});
    std::ofstream(tmp / "request.json") << request.dump();

    const auto out_file = tmp / "stdout", err_file = tmp / "stderr";
    const std::string command = d::node_command(arch) + " " + d::quoted(d::script_path().string()) + " " +
                                d::quoted(std::filesystem::absolute(model).string()) + " " +
                                d::quoted((tmp / "request.json").string()) + " > " +
                                d::quoted(out_file.string()) + " 2> " + d::quoted(err_file.string());
    const int status = std::system(command.c_str());
    const std::string err = read_text(err_file);
    if (status != 0) {
        const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                                  : "status " + std::to_string(status);
        throw std::runtime_error("ONNX Runtime failed on " + model.string() + " (" + how + "): " + err);
    }
    nlohmann::json reply;
    try {
        std::istringstream lines(read_text(out_file));
        std::string line, last;
        while (std::getline(lines, line))
            if (!line.empty())
                last = line;
        reply = nlohmann::json::parse(last);
    } catch (const std::exception& e) {
        throw std::runtime_error("ONNX Runtime on " + model.string() + ": unreadable reply (" + e.what() +
                                 "): " + read_text(out_file) + err);
    }

    OrtRun run;
    run.load_seconds = reply.at("load_seconds").get<double>();
    run.run_seconds = reply.at("run_seconds").get<double>();
    run.peak_rss_bytes = reply.at("peak_rss_bytes").get<int64_t>();
    const auto& reported = reply.at("outputs");
    for (size_t i = 0; i < outputs.size(); ++i) {
        const auto shape = reported.at(i).at("shape").get<std::vector<int64_t>>();
        auto t = torch::empty(shape, torch::kFloat);
        const auto file = tmp / ("out" + std::to_string(i) + ".bin");
        std::ifstream in(file, std::ios::binary);
        in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
        if (in.gcount() != static_cast<std::streamsize>(t.nbytes()) ||
            in.peek() != std::ifstream::traits_type::eof())
            throw std::runtime_error("ONNX Runtime on " + model.string() + ": output '" + outputs[i] +
                                     "' does not hold the float32 data of its shape");
        run.outputs[outputs[i]] = t;
    }
    return run;
}

} // namespace embedlab::test
