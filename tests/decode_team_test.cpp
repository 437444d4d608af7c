// The workers that split token-by-token products (model/decode_team.hpp), the huge-page
// arena generation copies half matrices into (io/weight_arena.hpp) and the OpenBLAS
// thread scope of generation on half weights (model/blas_threads.hpp).
#include <ATen/Parallel.h>
#include <atomic>
#include <dlfcn.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "embedlab/generation_weights.hpp"
#include "embedlab/model.hpp"
#include "io/weight_arena.hpp"
#include "model/blas_threads.hpp"
#include "model/decode_team.hpp"
#include "model/half_products.hpp"
#include "shared_models.hpp"
#include "test_support.hpp"

namespace embedlab {
namespace {

// Sets libtorch's thread count for a scope (the team splits over at::get_num_threads()).
class TorchThreads {
public:
    explicit TorchThreads(int n) : previous_(at::get_num_threads()) { at::set_num_threads(n); }
    ~TorchThreads() { at::set_num_threads(previous_); }

private:
    int previous_;
};

// How often each index of [0, count) was handed to the body; whether every part but
// the last began and ended on a multiple of `grain`.
struct SplitRecord {
    std::vector<int> hits;
    bool parts_on_grain = true;
};

SplitRecord record_split(int64_t count, int64_t grain)
{
    std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
    std::atomic<bool> on_grain{true};
    detail::run_split(count, grain, [&](int64_t begin, int64_t end) {
        if (begin % grain != 0 || (end != count && end % grain != 0) || begin >= end)
            on_grain = false;
        for (int64_t i = begin; i < end; ++i)
            ++hits[static_cast<size_t>(i)];
    });
    SplitRecord r;
    for (const auto& h : hits)
        r.hits.push_back(h.load());
    r.parts_on_grain = on_grain;
    return r;
}

TEST(DecodeTeam, EveryIndexRunsOnceOnEveryThreadCountAndGrain)
{
    for (const int threads : {1, 2, 3, 4}) {
        const TorchThreads scope(threads);
        for (const int64_t count : {0, 1, 7, 16, 100, 1000, 4097})
            for (const int64_t grain : {1, 16, 64}) {
                const auto r = record_split(count, grain);
                EXPECT_EQ(r.hits, std::vector<int>(static_cast<size_t>(count), 1))
                    << threads << " threads, count " << count << ", grain " << grain;
                EXPECT_TRUE(r.parts_on_grain)
                    << threads << " threads, count " << count << ", grain " << grain;
            }
    }
}

// One caller has the workers, the other runs its ranges on its own thread: both whole.
TEST(DecodeTeam, TwoCallersAtOnceBothGetEveryIndex)
{
    const TorchThreads scope(2);
    std::atomic<int> wrong{0};
    const auto caller = [&] {
        std::vector<int64_t> out(3001);
        for (int round = 0; round < 500; ++round) {
            detail::run_split(static_cast<int64_t>(out.size()), 16, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i)
                    out[static_cast<size_t>(i)] = i * round;
            });
            for (size_t i = 0; i < out.size(); ++i)
                if (out[i] != static_cast<int64_t>(i) * round)
                    ++wrong;
        }
    };
    std::thread first(caller), second(caller);
    first.join();
    second.join();
    EXPECT_EQ(wrong.load(), 0);
}

// The tests' CLI server forks after its libraries load: a child must not wait for its
// parent's workers (they are not in it). Without its own, the child would hang: the
// alarm ends it.
TEST(DecodeTeam, AForkedChildSplitsWithItsOwnWorkers)
{
    const TorchThreads scope(2);
    ASSERT_EQ(record_split(1000, 16).hits, std::vector<int>(1000, 1)); // the parent's workers exist
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::alarm(20);
        const auto r = record_split(1000, 16);
        ::_exit(r.hits == std::vector<int>(1000, 1) && r.parts_on_grain ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "the child ended by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Split or not, every output is the same kernel over the same weights: the same bits
// on 1 to 3 threads, both layouts, f16 and bf16, every kernel this CPU runs.
TEST(HalfProducts, TokenByTokenProductsAreTheSameBitsOnOneToThreeThreads)
{
    torch::manual_seed(66);
    for (const auto dtype : {torch::kHalf, torch::kBFloat16}) {
        const auto W = torch::randn({1501, 101}).to(dtype); // above kSplitWeights, odd sizes
        const auto Wt = torch::randn({101, 1501}).to(dtype);
        const auto bias = torch::randn({1501});
        for (const auto kernel : {detail::HalfKernel::Portable, detail::HalfKernel::Avx2}) {
            if (!detail::cpu_runs(kernel))
                continue;
            for (int64_t rows = 1; rows <= detail::kHalfKernelRows; ++rows) {
                const auto x = torch::randn({rows, 101});
                torch::Tensor rows_one, columns_one;
                for (const int threads : {1, 2, 3}) {
                    const TorchThreads scope(threads);
                    const auto y = detail::half_times_transposed(x, W, bias, kernel);
                    const auto yc = detail::half_add_times(bias, x, Wt, kernel);
                    if (threads == 1) {
                        rows_one = y;
                        columns_one = yc;
                        continue;
                    }
                    const std::string what = std::string(detail::half_kernel_name(kernel)) + " " +
                                             c10::toString(dtype) + " rows " + std::to_string(rows) +
                                             " threads " + std::to_string(threads);
                    EXPECT_TRUE(torch::equal(y, rows_one)) << what;
                    EXPECT_TRUE(torch::equal(yc, columns_one)) << what << " (Conv1D)";
                }
            }
        }
    }
}

TEST(WeightArena, CopiesAreCacheLineAlignedAndRefusedWhenTheArenaIsFull)
{
    std::vector<uint8_t> bytes(900);
    for (size_t i = 0; i < bytes.size(); ++i)
        bytes[i] = static_cast<uint8_t>(i * 7);
    io::WeightArena arena(1000);
    const auto* first = static_cast<const uint8_t*>(arena.copy_in(bytes.data(), 100));
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % (uintptr_t{2} << 20), 0u); // a huge page's start
    EXPECT_TRUE(std::equal(first, first + 100, bytes.begin()));
    EXPECT_EQ(arena.copy_in(bytes.data(), 900), nullptr); // 128 + 900 > 1000
    const auto* second = static_cast<const uint8_t*>(arena.copy_in(bytes.data(), 872));
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(second - first, 128); // the next cache line
    EXPECT_TRUE(std::equal(second, second + 872, bytes.begin()));
    EXPECT_EQ(arena.used(), 1000u);
    EXPECT_EQ(arena.copy_in(bytes.data(), 1), nullptr);
    EXPECT_EQ(io::WeightArena(0).copy_in(bytes.data(), 1), nullptr);
}

// The mapping of /proc/self/smaps that holds `p`: its header line and VmFlags.
std::pair<std::string, std::string> mapping_of(const void* p)
{
    std::ifstream smaps("/proc/self/smaps");
    const auto address = reinterpret_cast<uintptr_t>(p);
    std::string line, header;
    bool inside = false;
    while (std::getline(smaps, line)) {
        uintptr_t start = 0, end = 0;
        char dash = 0;
        std::istringstream fields(line);
        if (fields >> std::hex >> start >> dash >> end && dash == '-' &&
            line.find(' ') != std::string::npos && std::isxdigit(static_cast<unsigned char>(line[0]))) {
            inside = start <= address && address < end;
            header = line;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
            return {header, line};
        }
    }
    return {};
}

// A generation load copies each half matrix out of the mapped file into anonymous
// memory advised for huge pages ("hg"); the float32 load keeps none of them.
TEST(WeightArena, AGenerationLoadHoldsHalfMatricesInHugePageAdvisedMemory)
{
    EMBEDLAB_REQUIRE_SHARED();
    const auto dir = test::shared_dir() / "models/tinygpt2-f16";
    const auto half = load_model_for_generation(dir, {.need_tokenizer = false}, GenerationWeights::Half);
    int matrices = 0;
    for (const auto& [name, w] : half.model->weights()) {
        if (!detail::is_half(w))
            continue;
        ++matrices;
        const auto [header, flags] = mapping_of(w.data_ptr());
        ASSERT_FALSE(header.empty()) << name;
        EXPECT_EQ(header.find("model.safetensors"), std::string::npos) << name << ": " << header;
        EXPECT_NE(flags.find(" hg"), std::string::npos) << name << ": " << flags;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data_ptr()) % 64, 0u) << name;
    }
    EXPECT_GT(matrices, 0);
}

TEST(OpenBlasThreads, TheScopeRunsOpenBlasOnOneThreadAndGivesTheCountBack)
{
    const auto set = reinterpret_cast<void (*)(int)>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    const auto get = reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    if (!set || !get)
        GTEST_SKIP() << "the BLAS here is not OpenBLAS";
    const int before = get();
    set(2);
    {
        const detail::OpenBlasThreads one(1);
        EXPECT_EQ(get(), 1);
    }
    EXPECT_EQ(get(), 2);
    set(before);
}

} // namespace
} // namespace embedlab
