#include "embedlab/output_checks.hpp"

#include <cstdio>
#include <fstream>
#include <map>

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "embedlab/error.hpp"

namespace embedlab {

namespace fs = std::filesystem;

bool same_or_inside(const fs::path& a, const fs::path& b)
{
    std::error_code ec;
    if (fs::equivalent(a, b, ec))
        return true;
    const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
    const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
    const fs::path rel = ca.lexically_relative(cb);
    return !rel.empty() && *rel.begin() != "..";
}

namespace {

// A directory this process is building (AtomicDirectory's temp): writers nest,
// e.g. a LoRA export saves the compressed base inside its own temp first.
bool own_temporary(const fs::path& dir)
{
    const std::string marker = ".tmp-" + std::to_string(::getpid()) + "-";
    return dir.filename().string().find(marker) != std::string::npos;
}

// The first few names of a list, for a message.
std::string some_names(const std::vector<std::string>& names)
{
    std::string out;
    for (size_t i = 0; i < names.size() && i < 5; ++i)
        out += (i ? ", " : "") + names[i];
    if (names.size() > 5)
        out += " and " + std::to_string(names.size() - 5) + " more";
    return out;
}

// The file of `input` (itself, or one inside it when it is a directory) that `out`
// is a hard link to, or "" when none is: a hard link has no path in common with the
// file it names, so only the inode tells.
std::string hard_link_into(const fs::path& out, const fs::path& input)
{
    struct stat o {};
    if (::stat(out.c_str(), &o) != 0 || !S_ISREG(o.st_mode) || o.st_nlink < 2)
        return "";
    const auto same = [&](const fs::path& p) {
        struct stat s {};
        return ::stat(p.c_str(), &s) == 0 && s.st_dev == o.st_dev && s.st_ino == o.st_ino;
    };
    std::error_code ec;
    if (!fs::is_directory(input, ec))
        return same(input) ? input.string() : "";
    // A model directory holds tens of files; the bound keeps a huge tree cheap.
    int seen = 0;
    for (auto it = fs::recursive_directory_iterator(input, ec);
         !ec && it != fs::recursive_directory_iterator() && ++seen <= 100000; it.increment(ec))
        if (it->is_regular_file(ec) && same(it->path()))
            return it->path().string();
    return "";
}

void refuse_inputs(const fs::path& out, const std::vector<fs::path>& inputs)
{
    for (const fs::path& input : inputs)
        if (!input.empty() && same_or_inside(input, out))
            throw InputError(out.string() + ": " + (same_or_inside(out, input) ? "is" : "holds") +
                             " the input " + input.string() +
                             "; an input is never an output, choose another directory");
}

} // namespace

std::string foreign_content(const fs::path& dir)
{
    std::error_code ec;
    if (fs::is_empty(dir, ec) || own_temporary(dir))
        return "";
    const fs::path list_path = dir / kWrittenFilesName;
    std::map<std::string, uint64_t> listed;
    try {
        if (!fs::is_regular_file(fs::symlink_status(list_path)))
            return std::string("was not written by EmbedLab (it has no ") + kWrittenFilesName +
                   ", the list EmbedLab keeps of the files it wrote; outputs of EmbedLab before "
                   "2026-11-26 have none: remove an old output yourself)";
        std::ifstream in(list_path, std::ios::binary);
        const auto j = nlohmann::json::parse(in);
        if (!j.is_object() || j.value("written_by", "") != "EmbedLab" || !j.contains("files") ||
            !j["files"].is_object())
            return std::string("its ") + kWrittenFilesName + " is not EmbedLab's list of written files";
        for (const auto& [name, size] : j["files"].items()) {
            if (!size.is_number_unsigned())
                return std::string("its ") + kWrittenFilesName + " is not EmbedLab's list of written files";
            listed[name] = size.get<uint64_t>();
        }
    } catch (const std::exception&) {
        return std::string("its ") + kWrittenFilesName + " is not EmbedLab's list of written files";
    }
    std::vector<std::string> unknown, changed;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        const auto status = it->symlink_status(ec);
        if (fs::is_directory(status))
            continue; // a folder of listed files; an empty one holds no data
        const std::string name = it->path().lexically_relative(dir).generic_string();
        if (name == kWrittenFilesName)
            continue;
        const auto row = listed.find(name);
        if (row == listed.end() || !fs::is_regular_file(status))
            unknown.push_back(name);
        else if (fs::file_size(it->path(), ec) != row->second)
            changed.push_back(name);
    }
    if (ec)
        return "cannot list it (" + ec.message() + ")";
    if (!unknown.empty())
        return "holds files EmbedLab did not write (" + some_names(unknown) + ")";
    if (!changed.empty())
        return "holds files changed since EmbedLab wrote them (" + some_names(changed) + ")";
    return "";
}

void check_fits_on_disk(const fs::path& out, uint64_t bytes, const std::string& what, const std::string& hint)
{
    std::error_code ec;
    fs::path existing = fs::absolute(out, ec);
    while (existing.has_parent_path() && existing != existing.parent_path() && !fs::exists(existing, ec))
        existing = existing.parent_path();
    const auto space = fs::space(existing, ec);
    if (ec)
        return; // not knowable here: the writer still fails cleanly on a full disk
    if (bytes <= space.available)
        return;
    const auto gb = [](uintmax_t n) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(n) / 1e9);
        return std::string(buf);
    };
    throw InputError(what + " would take about " + gb(bytes) + " GB, but only " + gb(space.available) +
                     " GB are free on " + existing.string() + " (" + hint + ")");
}

void check_parent_usable(const fs::path& out)
{
    // The first existing ancestor must be a directory for the parent to be creatable.
    std::error_code ec;
    fs::path p = fs::absolute(out, ec).parent_path();
    while (p.has_parent_path() && p != p.parent_path() && !fs::exists(fs::symlink_status(p, ec)))
        p = p.parent_path();
    if (!fs::is_directory(p, ec))
        throw InputError(out.string() + ": " + p.string() + " is not a directory");
}

void check_replaceable_directory(const fs::path& dir, bool overwrite, const std::string& hint,
                                 const std::vector<fs::path>& inputs)
{
    refuse_inputs(dir, inputs);
    check_parent_usable(dir);
    std::error_code ec;
    const auto status = fs::symlink_status(dir, ec);
    if (!fs::exists(status))
        return;
    if (!overwrite)
        throw InputError(dir.string() + ": already exists (" + hint + ")");
    if (!fs::is_directory(status))
        throw InputError(dir.string() + ": is not a directory; not replacing it");
    if (const std::string why = foreign_content(dir); !why.empty())
        throw InputError(dir.string() + ": " + why + "; not replacing it");
}

void check_output_file(const fs::path& out, bool overwrite, const std::vector<fs::path>& inputs,
                       const std::function<std::string(const fs::path&)>& owned, const std::string& hint)
{
    if (out.empty())
        throw InputError("the output file name is empty");
    for (const fs::path& input : inputs) {
        if (input.empty())
            continue;
        if (same_or_inside(out, input) && same_or_inside(input, out))
            throw InputError(out.string() + ": is the input " + input.string() +
                             "; an input is never an output, choose another file");
        // A file of an input directory (a model's weights, its config), also through a
        // symlink or `..`: same_or_inside resolves both.
        if (same_or_inside(out, input))
            throw InputError(out.string() + ": lies inside the input " + input.string() +
                             "; an input is never an output, choose a file outside it");
        if (const std::string name = hard_link_into(out, input); !name.empty())
            throw InputError(out.string() + ": is a hard link to " + name + ", a file of the input " +
                             input.string() + "; an input is never an output, choose another file");
    }
    std::error_code ec;
    const auto status = fs::symlink_status(out, ec);
    if (fs::is_directory(status))
        throw InputError(out.string() + ": is a directory; give a file name");
    if (fs::exists(status)) {
        if (!overwrite)
            throw InputError(out.string() + ": already exists (" + hint + ")");
        if (!fs::is_regular_file(status))
            throw InputError(out.string() + ": is not a regular file; not replacing it");
        if (owned)
            if (const std::string why = owned(out); !why.empty())
                throw InputError(out.string() + ": " + why + "; not replacing it");
    }
    check_parent_usable(out);
}

} // namespace embedlab
