#include "llamacpp_compare.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"
#include "embedlab/model_export.hpp"
#include "embedlab/peer_environment.hpp"
#include "embedlab/resources.hpp"
#include "embedlab/subprocess.hpp"
#include "work_dir.hpp"

namespace embedlab::cli {

namespace fs = std::filesystem;

namespace {

// The name a soname link stored as a small text file holds ("libllama.so.0.5.0"),
// or empty when `file` is not such a file.
std::string text_link_target(const fs::path& file)
{
    std::error_code ec;
    if (!fs::is_regular_file(file, ec) || fs::file_size(file, ec) > 255)
        return {};
    std::ifstream in(file);
    std::string target;
    std::getline(in, target);
    const bool plain_name = !target.empty() && target.find('/') == std::string::npos &&
                            target.find('\0') == std::string::npos && target != "." && target != "..";
    return plain_name ? target : std::string();
}

bool is_elf_file(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

// The tool's soname links (libllama.so.0 -> libllama.so.0.5.0) arrive as small
// text files naming their target when shared/ was copied without symlinks (the
// loader then says "file too short"): recreate them in `links`, which goes on
// LD_LIBRARY_PATH, each pointing at the ELF file its chain of names ends at in the
// same folder (libllama.so -> libllama.so.0 -> libllama.so.0.5.0); the tool's folder
// is left as it is.
void recreate_soname_links(const fs::path& tool_dir, const fs::path& links)
{
    fs::create_directories(links);
    for (const auto& e : fs::directory_iterator(tool_dir)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("lib", 0) != 0)
            continue;
        std::string target = text_link_target(e.path());
        for (int hop = 0; hop < 4 && !target.empty() && !is_elf_file(tool_dir / target); ++hop)
            target = text_link_target(tool_dir / target);
        std::error_code ec;
        if (!target.empty() && is_elf_file(tool_dir / target))
            fs::create_symlink(tool_dir / target, links / name, ec);
    }
}

} // namespace

std::optional<fs::path> find_llamacpp_ppl(const std::optional<std::string>& flag)
{
    const auto tool_in = [](const fs::path& p) -> std::optional<fs::path> {
        std::error_code ec;
        const fs::path tool = fs::is_directory(p, ec) ? p / "llamacpp-ppl" : p;
        if (fs::is_regular_file(tool, ec))
            return fs::absolute(tool, ec);
        return std::nullopt;
    };
    if (flag) {
        if (auto t = tool_in(*flag))
            return t;
        throw InputError(*flag + ": no llamacpp-ppl there (--llamacpp takes the tool or its folder)");
    }
    if (const char* env = std::getenv("EMBEDLAB_LLAMACPP"))
        if (auto t = tool_in(env))
            return t;
    // resources/ sits in the checkout; the project's shared data beside it.
    if (auto t = tool_in(resource_dir() / ".." / ".." / "shared" / "tools" / "llama.cpp"))
        return t;
    return find_executable("llamacpp-ppl");
}

std::optional<fs::path> requested_llamacpp(const std::optional<std::string>& flag, bool compare,
                                           const std::string& command)
{
    if (!compare && !flag)
        return std::nullopt;
    auto tool = find_llamacpp_ppl(flag);
    if (!tool)
        std::fprintf(stderr,
                     "%s: no llama.cpp comparison: llamacpp-ppl not found (looked in $EMBEDLAB_LLAMACPP, "
                     "../shared/tools/llama.cpp and PATH; pass --llamacpp PATH)\n",
                     command.c_str());
    return tool;
}

namespace {

// The model as an f32 GGUF in `work`, and the tool folder's libraries linked into it;
// the reason llama.cpp cannot run it when it cannot.
// The export is named model-f32.gguf whatever `type` is: the callers' one name for it.
std::string prepare_llamacpp_run(const fs::path& tool, const LoadedModel& model, const WorkDir& work,
                                 GgufExportType type = GgufExportType::F32)
{
    if (const auto refusal = gguf_export_refusal(model); !refusal.empty())
        return "no GGUF export: " + refusal;
    export_gguf(model, work.path() / "model-f32.gguf", {.type = type});
    recreate_soname_links(tool.parent_path(), work.path() / "lib");
    return {};
}

CommandResult run_tool(const fs::path& tool, const WorkDir& work, std::vector<std::string> arguments)
{
    // The user's environment, not the one EmbedLab made for itself (peer_environment.hpp).
    std::vector<std::string> prefix{"env"};
    for (auto& unset : unset_for_peers())
        prefix.push_back(std::move(unset));
    prefix.insert(prefix.end(), {"LD_LIBRARY_PATH=" + (work.path() / "lib").string(), tool.string()});
    arguments.insert(arguments.begin(), prefix.begin(), prefix.end());
    auto result = run_command(arguments, "", std::chrono::hours(2));
    if (result.status != 0)
        throw InputError(tool.string() + " failed (exit " + std::to_string(result.status) +
                         "): " + result.err.substr(result.err.size() > 400 ? result.err.size() - 400 : 0));
    return result;
}

} // namespace

LlamaCppRun run_llamacpp_ppl(const fs::path& tool, const LoadedModel& model, std::span<const int32_t> ids,
                             int64_t ctx, int threads)
{
    LlamaCppRun run;
    WorkDir work("embedlab-bench-llamacpp");
    run.skipped = prepare_llamacpp_run(tool, model, work);
    if (!run.skipped.empty())
        return run;
    const fs::path gguf = work.path() / "model-f32.gguf";
    const fs::path ids_file = work.path() / "ids.txt";
    {
        std::ofstream out(ids_file);
        for (const auto id : ids)
            out << id << ' ';
        if (!out.flush())
            throw InputError(ids_file.string() + ": cannot write the ids");
    }
    const auto result = run_tool(
        tool, work, {gguf.string(), ids_file.string(), std::to_string(ctx), std::to_string(threads)});
    const auto line =
        result.out.substr(result.out.rfind('{') == std::string::npos ? 0 : result.out.rfind('{'));
    try {
        const auto j = nlohmann::json::parse(line);
        run.ppl = j.at("ppl").get<double>();
        run.nll_per_token = j.at("nll_per_token").get<double>();
        run.seconds = j.at("seconds").get<double>();
        run.tokens_per_second = j.at("tokens_per_second").get<double>();
        run.tokens = j.at("tokens").get<int64_t>();
    } catch (const nlohmann::json::exception& e) {
        throw InputError(tool.string() + ": unexpected output '" + line + "' (" + e.what() + ")");
    }
    return run;
}

LlamaBenchRun run_llama_bench(const fs::path& tool, const LoadedModel& model, int64_t prompt_tokens,
                              int64_t generated_tokens, int repetitions, int threads, GgufExportType type)
{
    LlamaBenchRun run;
    const fs::path bench = tool.parent_path() / "llama-bench";
    if (!fs::is_regular_file(bench)) {
        run.skipped = "no llama-bench beside " + tool.string();
        return run;
    }
    WorkDir work("embedlab-bench-llamacpp");
    run.skipped = prepare_llamacpp_run(tool, model, work, type);
    if (!run.skipped.empty())
        return run;
    const auto result = run_tool(bench, work,
                                 {"-m", (work.path() / "model-f32.gguf").string(), "-p",
                                  std::to_string(prompt_tokens), "-n", std::to_string(generated_tokens), "-r",
                                  std::to_string(repetitions), "-t", std::to_string(threads), "-o", "json"});
    try {
        for (const auto& test : nlohmann::json::parse(result.out.substr(result.out.find('['))))
            (test.at("n_gen").get<int64_t>() > 0 ? run.tg : run.pp) = {test.at("avg_ts").get<double>(),
                                                                       test.at("stddev_ts").get<double>()};
    } catch (const std::exception& e) { // no '[' (npos) or not llama-bench's JSON
        throw InputError(bench.string() + ": unexpected output (" + e.what() + ")");
    }
    return run;
}

} // namespace embedlab::cli
