// Crash-safe output: write_file_atomic, write_safetensors and AtomicDirectory.
// Every case checks that failures leave neither the file nor a temp file behind.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "embedlab/error.hpp"
#include "embedlab/file_output.hpp"
#include "embedlab/model_files.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using embedlab::test::read_text;
using embedlab::test::TempDir;

namespace {

// Sorted names of the entries of `dir`.
std::vector<std::string> listing(const fs::path& dir)
{
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
        names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

using Tensors = std::vector<std::pair<std::string, torch::Tensor>>;

std::string raw_bytes(const torch::Tensor& t)
{
    const torch::Tensor c = t.contiguous();
    return {static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel() * c.element_size())};
}

using embedlab::test::expect_input_error;

} // namespace

TEST(FileOutput, SafetensorsRoundTripEveryDtype)
{
    TempDir dir;
    torch::manual_seed(1);
    torch::Tensor f32 = torch::randn({3, 5});
    f32[0][0] = -0.0f;
    f32[0][1] = std::numeric_limits<float>::infinity();
    f32[0][2] = std::numeric_limits<float>::denorm_min();
    const torch::Tensor f16 = torch::randn({4}).to(torch::kHalf);
    const torch::Tensor bf16 = torch::randn({2, 3}).to(torch::kBFloat16);
    const torch::Tensor i64 = torch::tensor({int64_t{1} << 40, int64_t{-7}, int64_t{0}}, torch::kInt64);
    const torch::Tensor i32 = torch::arange(6, torch::kInt32).reshape({2, 3});
    const torch::Tensor transposed = torch::randn({4, 2}).t(); // non-contiguous
    ASSERT_FALSE(transposed.is_contiguous());
    const Tensors tensors = {{"z.f32", f32}, {"a.f16", f16}, {"m.bf16", bf16},
                             {"b.i64", i64}, {"c.i32", i32}, {"t.f32", transposed}};
    const fs::path file = dir / "out.safetensors";
    embedlab::write_safetensors(file, tensors, {{"format", "pt"}, {"note", "round trip"}});
    EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"out.safetensors"});

    const std::string bytes = read_text(file);
    const auto h = embedlab::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                      bytes.size(), file.string());
    EXPECT_EQ((h.data_start - 8) % 8, 0u);
    EXPECT_EQ(h.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "round trip"}}));
    const std::vector<std::string> dtypes = {"F32", "F16", "BF16", "I64", "I32", "F32"};
    ASSERT_EQ(h.entries.size(), tensors.size());
    uint64_t offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) { // sorted by offset = the order given
        const auto& e = h.entries[i];
        EXPECT_EQ(e.name, tensors[i].first);
        EXPECT_EQ(e.dtype, dtypes[i]);
        EXPECT_EQ(e.shape, tensors[i].second.sizes().vec());
        EXPECT_EQ(e.begin, offset) << e.name;
        offset = e.end;
        EXPECT_EQ(bytes.substr(h.data_start + e.begin, e.end - e.begin), raw_bytes(tensors[i].second))
            << e.name;
    }
    EXPECT_EQ(h.data_start + offset, bytes.size());

    const embedlab::WeightMap w = embedlab::load_safetensors(file);
    EXPECT_EQ(w.size(), 6u);
    // Integer tensors (token ids of compressed layouts) load as int64.
    EXPECT_EQ(w.at("b.i64").scalar_type(), torch::kLong);
    EXPECT_TRUE(torch::equal(w.at("b.i64"), i64));
    EXPECT_TRUE(torch::equal(w.at("c.i32"), i32.to(torch::kLong)));
    EXPECT_EQ(raw_bytes(w.at("z.f32")), raw_bytes(f32)); // bit-exact, -0 and denormal included
    EXPECT_EQ(raw_bytes(w.at("t.f32")), raw_bytes(transposed));
    EXPECT_TRUE(torch::equal(w.at("a.f16"), f16.to(torch::kFloat32)));
    EXPECT_TRUE(torch::equal(w.at("m.bf16"), bf16.to(torch::kFloat32)));
}

TEST(FileOutput, SafetensorsWithoutMetadataAndProgressInBytes)
{
    TempDir dir;
    const fs::path file = dir / "x.safetensors";
    std::vector<std::pair<int64_t, int64_t>> calls;
    embedlab::write_safetensors(file, {{"s", torch::tensor(2.5f)}, {"v", torch::ones({3}, torch::kInt32)}},
                                {}, [&](int64_t done, int64_t total) {
                                    calls.emplace_back(done, total);
                                    return true;
                                });
    const std::string bytes = read_text(file);
    EXPECT_EQ(bytes.find("__metadata__"), std::string::npos);
    const auto h = embedlab::parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                      bytes.size(), file.string());
    ASSERT_EQ(h.entries.size(), 2u);
    EXPECT_TRUE(h.entries[0].shape.empty()); // a scalar
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.front().first, static_cast<int64_t>(h.data_start)); // the header
    EXPECT_EQ(calls.back(), std::make_pair(int64_t(bytes.size()), int64_t(bytes.size())));
    for (size_t i = 1; i < calls.size(); ++i)
        EXPECT_GT(calls[i].first, calls[i - 1].first);
}

TEST(FileOutput, SafetensorsBadInputLeavesNothing)
{
    TempDir dir;
    const fs::path file = dir / "bad.safetensors";
    const torch::Tensor ok = torch::zeros({2});
    expect_input_error(
        [&] {
            embedlab::write_safetensors(file, {{"a", ok}, {"b", ok}, {"a", ok}});
        },
        "tensor 'a': duplicate name");
    expect_input_error(
        [&] {
            embedlab::write_safetensors(file, {{"a", ok}, {"cplx", torch::zeros({2}, torch::kComplexFloat)}});
        },
        "tensor 'cplx'");
    expect_input_error(
        [&] {
            embedlab::write_safetensors(file, {{"flags", torch::ones({2}, torch::kBool)}});
        },
        "tensor 'flags'");
    EXPECT_TRUE(listing(dir.path()).empty());
}

TEST(FileOutput, SafetensorsCancelKeepsTheOldFile)
{
    TempDir dir;
    const fs::path file = dir / "m.safetensors";
    embedlab::write_file_atomic(file, "old");
    int calls = 0;
    EXPECT_THROW(embedlab::write_safetensors(file, {{"w", torch::ones({1000})}}, {},
                                             [&](int64_t, int64_t) { return ++calls < 1; }),
                 embedlab::Cancelled);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"m.safetensors"});
    EXPECT_EQ(read_text(file), "old");
}

// The streamed writer gives the same file as write_safetensors, chunk by chunk.
TEST(FileOutput, StreamedSafetensorsMatchesTheInMemoryWriter)
{
    TempDir dir;
    const torch::Tensor a = torch::arange(1000, torch::kFloat32).reshape({10, 100});
    const torch::Tensor b = torch::arange(37, torch::kFloat32).to(torch::kBFloat16);
    const Tensors tensors = {{"a", a}, {"b", b}};
    embedlab::write_safetensors(dir / "memory.safetensors", tensors, {{"format", "pt"}});
    std::vector<std::pair<size_t, uint64_t>> calls;
    embedlab::write_safetensors_streamed(
        dir / "streamed.safetensors", {{"a", "F32", {10, 100}}, {"b", "BF16", {37}}},
        [&](size_t index, uint64_t offset, std::span<char> out) {
            calls.emplace_back(index, offset);
            const std::string bytes = raw_bytes(tensors[index].second).substr(offset, out.size());
            ASSERT_EQ(bytes.size(), out.size());
            std::memcpy(out.data(), bytes.data(), out.size());
        },
        {{"format", "pt"}}, {}, 1024);
    EXPECT_EQ(read_text(dir / "streamed.safetensors"), read_text(dir / "memory.safetensors"));
    const std::vector<std::pair<size_t, uint64_t>> expected = {
        {0, 0}, {0, 1024}, {0, 2048}, {0, 3072}, {1, 0}};
    EXPECT_EQ(calls, expected);
    expect_input_error(
        [&] {
            embedlab::write_safetensors_streamed(dir / "bad.safetensors", {{"x", "F8", {2}}},
                                                 [](size_t, uint64_t, std::span<char>) {});
        },
        "tensor 'x': dtype F8");
    EXPECT_EQ(listing(dir.path()), (std::vector<std::string>{"memory.safetensors", "streamed.safetensors"}));
}

TEST(FileOutput, WriteFileAtomicReplacesContent)
{
    TempDir dir;
    const fs::path file = dir / "a.txt";
    embedlab::write_file_atomic(file, "first version, longer");
    embedlab::write_file_atomic(file, std::string_view("new\0bytes", 9));
    EXPECT_EQ(read_text(file), std::string("new\0bytes", 9));
    EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"a.txt"});
}

TEST(FileOutput, WriteFileAtomicMissingDirectoryNamesPath)
{
    TempDir dir;
    const fs::path file = dir / "missing" / "a.txt";
    expect_input_error([&] { embedlab::write_file_atomic(file, "x"); }, file.string() + ": ");
    expect_input_error([&] { embedlab::write_file_atomic(file, "x"); }, std::strerror(ENOENT));
    EXPECT_TRUE(listing(dir.path()).empty());
}

TEST(AtomicDirectory, CommitMovesFilesIntoPlace)
{
    TempDir dir;
    const fs::path final_dir = dir / "model";
    embedlab::AtomicDirectory out(final_dir);
    EXPECT_EQ(out.path().parent_path(), dir.path());
    EXPECT_TRUE(fs::is_directory(out.path()));
    EXPECT_FALSE(fs::exists(final_dir)); // nothing visible until commit
    embedlab::write_file_atomic(out.path() / "config.json", "{}");
    std::ofstream(out.path() / "notes.txt") << "written by ofstream";
    out.commit();
    EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"model"});
    EXPECT_EQ(listing(final_dir),
              (std::vector<std::string>{embedlab::kWrittenFilesName, "config.json", "notes.txt"}));
    EXPECT_EQ(read_text(final_dir / "notes.txt"), "written by ofstream");
    // The list of what was written, with sizes, for a later --force to check.
    const auto written = nlohmann::json::parse(read_text(final_dir / embedlab::kWrittenFilesName));
    EXPECT_EQ(written["written_by"], "EmbedLab");
    EXPECT_EQ(written["files"], (nlohmann::json{{"config.json", 2}, {"notes.txt", 19}}));
    EXPECT_EQ(embedlab::foreign_content(final_dir), "");
}

TEST(AtomicDirectory, WithoutCommitNothingRemains)
{
    TempDir dir;
    try {
        embedlab::AtomicDirectory out(dir / "model");
        embedlab::write_file_atomic(out.path() / "a.bin", "abc");
        throw std::runtime_error("interrupted");
    } catch (const std::runtime_error&) {
    }
    EXPECT_TRUE(listing(dir.path()).empty());
}

TEST(AtomicDirectory, ExistingOrMissingParentFails)
{
    TempDir dir;
    fs::create_directory(dir / "model");
    std::ofstream(dir / "model" / "keep.txt") << "keep";
    expect_input_error([&] { embedlab::AtomicDirectory out(dir / "model"); },
                       (dir / "model").string() + ": already exists");
    expect_input_error([&] { embedlab::AtomicDirectory out(dir / "no" / "model"); }, "does not exist");
    EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"model"});
    EXPECT_EQ(read_text(dir / "model" / "keep.txt"), "keep");
}

// Issue 35: overwrite replaces only an empty directory or what EmbedLab wrote, unchanged.
TEST(AtomicDirectory, OverwriteRefusesWhatEmbedLabDidNotWrite)
{
    TempDir dir;
    const fs::path mine = dir / "mine";
    fs::create_directory(mine);
    std::ofstream(mine / "thesis.tex") << "years of work";
    expect_input_error([&] { embedlab::AtomicDirectory out(mine, /*overwrite=*/true); },
                       "not written by EmbedLab");
    const fs::path ours = dir / "ours";
    {
        embedlab::AtomicDirectory out(ours);
        embedlab::write_file_atomic(out.path() / "a.txt", "a");
        out.commit();
    }
    std::ofstream(ours / "b.txt") << "added";
    expect_input_error([&] { embedlab::AtomicDirectory out(ours, true); }, "did not write (b.txt)");
    fs::remove(ours / "b.txt");
    std::ofstream(ours / "a.txt") << "edited";
    expect_input_error([&] { embedlab::AtomicDirectory out(ours, true); },
                       "changed since EmbedLab wrote them (a.txt)");
    std::ofstream(ours / "a.txt") << "a";
    EXPECT_NO_THROW(embedlab::AtomicDirectory(ours, true));
    EXPECT_EQ(read_text(mine / "thesis.tex"), "years of work");
}

TEST(AtomicDirectory, OverwriteReplacesOldContent)
{
    TempDir dir;
    const fs::path final_dir = dir / "model";
    {
        embedlab::AtomicDirectory old(final_dir);
        embedlab::write_file_atomic(old.path() / "old.txt", "old");
        old.commit();
    }
    embedlab::AtomicDirectory out(final_dir, /*overwrite=*/true);
    embedlab::write_file_atomic(out.path() / "new.txt", "new");
    EXPECT_EQ(listing(final_dir),
              (std::vector<std::string>{embedlab::kWrittenFilesName, "old.txt"})); // untouched until commit
    out.commit();
    EXPECT_EQ(listing(final_dir), (std::vector<std::string>{embedlab::kWrittenFilesName, "new.txt"}));
    EXPECT_EQ(read_text(final_dir / "new.txt"), "new");
    EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"model"}); // no .old- or .tmp- left
}
